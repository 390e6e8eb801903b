"""The pandas, numpy and builtin names the static check knows the meaning of.

This module owns the vocabulary `taint.py` and `lookahead_rules.py` share: which methods and
functions reduce every row they are given, which make windows, which take a period, fill
backwards, reverse or wrap the rows, and which a groupby may call without looking at a group's
later rows. Adding a name here is how the check learns a new spelling.
"""

from __future__ import annotations

from typing import Final

#: Reductions that look at every row they are given (methods, numpy/statistics functions).
FULL_SAMPLE_STATS: Final = frozenset(
    {
        "mean", "std", "var", "sem", "median", "rank", "min", "max", "quantile", "describe",
        "idxmax", "idxmin", "argmax", "argmin", "nlargest", "nsmallest", "corr", "cov", "skew",
        "kurt", "kurtosis", "zscore", "sum", "prod", "product", "mad", "ptp", "percentile",
        "nanmean", "nanstd", "nanvar", "nanmedian", "nanmin", "nanmax", "nanquantile",
        "nanpercentile", "nansum", "nanprod", "nanargmax", "nanargmin", "amax", "amin",
        "average", "stdev", "pstdev", "variance", "pvariance", "fmean", "geometric_mean",
        "harmonic_mean", "median_low", "median_high", "median_grouped", "multimode",
        "quantiles", "correlation", "covariance", "linear_regression", "fsum", "mode",
        "value_counts", "unique", "nunique", "all", "any", "count", "sort_values", "sorted",
        "sort", "argsort", "lexsort", "partition", "argpartition", "qcut", "cut", "dot", "vdot",
        "inner", "outer", "einsum", "tensordot", "matmul", "polyfit", "corrcoef", "corrwith",
        "autocorr", "histogram", "histogram_bin_edges", "bincount", "trapezoid", "trapz",
        "convolve", "correlate", "reduce", "reduceat", "norm", "lstsq", "is_monotonic_increasing",
        "is_monotonic_decreasing", "is_unique", "hasnans", "factorize", "pivot_table",
        "hypot", "dist", "count_nonzero", "allclose", "array_equal", "array_equiv", "equals",
        "histogram2d", "histogramdd", "fft", "ifft", "rfft", "irfft", "fftn", "ifftn", "hfft",
        "solve", "inv", "pinv", "svd", "eig", "eigh", "eigvals", "eigvalsh", "qr", "cholesky",
        "det", "slogdet", "matrix_rank", "cond",
    }
)  # fmt: skip
#: Windows: a reduction on one gives a value per row (or per bin) from earlier rows only.
WINDOWS: Final = frozenset({"rolling", "expanding", "ewm", "resample"})
#: Builtins that reduce the collection they are given.
BUILTIN_STATS: Final = frozenset({"max", "min", "sum", "sorted", "any", "all"})
#: Methods taking a period (>= 0: earlier rows); the value is the position of `freq`.
PERIODS: Final = {"shift": 1, "diff": None, "pct_change": 2}
#: Fills from later rows; `method=` values that do (reindex, asfreq, get_indexer).
BACKFILLS: Final = frozenset({"bfill", "backfill", "interpolate"})
BACKWARD_METHODS: Final = frozenset({"bfill", "backfill", "nearest"})
INDEXERS: Final = frozenset({"iloc", "iat", "loc", "at"})
#: numpy functions that reverse the rows, and those that move later rows onto earlier ones.
REVERSERS: Final = frozenset({"flip", "flipud", "fliplr", "rot90"})
LATER_ROWS: Final = {
    "roll": ("negative_shift", "wraps the last rows round to the front"),
    "gradient": ("future_index", "takes central differences, which read the next row"),
    "interp": ("backfill", "interpolates between a row and a later one"),
}
#: Running statistics: each row's value is a statistic of that row and every earlier one.
CUMULATIVE: Final = frozenset({"cumsum", "cumprod", "cummax", "cummin"})
#: What a groupby may do: work row by row within each group, looking back only.
GROUP_CAUSAL: Final = frozenset(
    {"cumsum", "cumprod", "cummax", "cummin", "cumcount", "shift", "diff", "pct_change",
     "ffill", "rolling", "expanding", "ewm", "head", "ngroup", "get_group"}
)  # fmt: skip
#: Methods whose arguments the check reads, so they may not be held in a name or named in a
#: string; the value is the rule a hidden use is refused under.
CHECKED: Final = {
    **dict.fromkeys(PERIODS, "negative_shift"),
    **dict.fromkeys((*BACKFILLS, "ffill", "fillna", "reindex", "asfreq"), "backfill"),
    **dict.fromkeys(("rolling", "resample"), "centered_window"),
    **dict.fromkeys(
        ("take", "head", "xs", "asof", "get", "truncate", "sort_index", "roll", "reverse",
         "sample", "reset_index", "set_axis", "set_index", "rename", "to_timestamp"),
        "future_index",
    ),
}  # fmt: skip
DUPLICATES: Final = frozenset({"duplicated", "drop_duplicates"})
