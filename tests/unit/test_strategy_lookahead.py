"""The static check refuses strategies that peek at later rows or reach outside the sandbox, and
accepts honest ones (trailing windows, one row, cross-sectional statistics)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from openbell.agents.strategy_code.lookahead import check_strategy

HONEST = '''
import math
import numpy as np
import pandas as pd

LOOKBACK = 20


def strategy(bars):
    """Long the two symbols with the best 20-bar momentum, scaled by trailing volatility."""
    scores = {}
    for symbol, frame in bars.items():
        close = frame["close"]
        if len(close) < LOOKBACK + 1:
            continue
        momentum = close.iloc[-1] / close.iloc[-LOOKBACK - 1] - 1
        vol = close.pct_change().rolling(LOOKBACK).std().iloc[-1]
        trailing = close.iloc[-LOOKBACK:]
        level = trailing.mean() + close.tail(5).max() + np.mean(close.tail(10))
        smooth = close.ewm(span=10).mean().iloc[-1] + close.rolling(60).max().iloc[-1]
        prior = close.shift(1).iloc[-1] + close.diff().iloc[-1]
        prior += close.to_numpy()[-10:].std() + close.iloc[-21:-1].mean() + sum(close[-3:])
        if vol > 0 and math.isfinite(level + smooth + prior):
            scores[symbol] = momentum / vol
    if not scores:
        return {}
    ranked = pd.Series(scores).rank(ascending=False)
    best = [symbol for symbol, rank in ranked.items() if rank <= 2]
    top = max(scores.values())
    return {symbol: 0.45 for symbol in best if top > -1}
'''


def rules(source: str) -> set[str]:
    return {refusal.rule for refusal in check_strategy(source)}


def test_an_honest_strategy_passes() -> None:
    assert check_strategy(HONEST) == ()


def wrap(body: str, imports: str = "import pandas as pd\nimport numpy as np\n") -> str:
    lines = "\n".join(f"    {line}" for line in body.strip().splitlines())
    return f"{imports}\ndef strategy(bars):\n{lines}\n    return {{}}\n"


PEEKS = {
    "shift(-1)": "c = bars['A']['close']\nnext_close = c.shift(-1).iloc[-2]",
    "shift(periods=-3)": "c = bars['A']['close']\nx = c.shift(periods=-3)",
    "shift(variable)": "c = bars['A']['close']\nk = -1\nx = c.shift(k)",
    "pct_change(-1)": "r = bars['A']['close'].pct_change(-1)",
    "diff(-2)": "for s, df in bars.items():\n    d = df['close'].diff(-2)",
    "full mean": "c = bars['A']['close']\nz = (c.iloc[-1] - c.mean()) / c.std()",
    "full rank": "c = bars['A']['close']\nr = c.rank(pct=True).iloc[-1]",
    "full max": "for s, df in bars.items():\n    hi = df['high'].max()",
    "full quantile": "q = bars['A']['close'].quantile(0.9)",
    "frame mean": "m = bars['A'].mean()",
    "np.std": "s = np.std(bars['A']['close'])",
    "builtin max": "for s, df in bars.items():\n    m = max(df['close'])",
    "all but the last": "m = bars['A']['close'].iloc[:-1].mean()",
    "numpy values": "m = bars['A']['close'].to_numpy().std()",
    "windowed then full": "r = bars['A']['close'].rolling(5).mean()\nm = r.max()",
    "qcut": "b = pd.qcut(bars['A']['close'], 5)",
    "iloc[i + 1]": (
        "c = bars['A']['close']\nfor i in range(len(c) - 1):\n    up = c.iloc[i + 1] > c.iloc[i]"
    ),
    "iloc[i + 1:]": "c = bars['A']['close']\nfor i in range(10):\n    later = c.iloc[i + 1:]",
    "iloc[-0]": "last = bars['A']['close'].iloc[-0]",
    "iloc[len]": "c = bars['A']['close']\nx = c.iloc[len(c)]",
    "iloc[shape]": "df = bars['A']\nx = df.iloc[df.shape[0]]",
    "loc[t + 1 day]": "df = bars['A']\nx = df.loc[df.index[-2] + 1]",
    "bfill": "c = bars['A']['close'].bfill()",
    "fillna bfill": "c = bars['A']['close'].fillna(method='bfill')",
    "interpolate": "c = bars['A']['close'].interpolate()",
    "centred window": "m = bars['A']['close'].rolling(5, center=True).mean()",
    "helper zscore": "pass",
}


@pytest.mark.parametrize("name", sorted(PEEKS))
def test_peeking_code_is_refused(name: str) -> None:
    source = wrap(PEEKS[name])
    if name == "helper zscore":
        source += "\n\ndef zscore(x):\n    return (x - x.mean()) / x.std()\n"
    found = check_strategy(source)
    assert found, f"{name} passed the check"
    assert {r.rule for r in found} <= {
        "negative_shift",
        "full_sample",
        "future_index",
        "backfill",
        "centered_window",
    }, found


ESCAPES = {
    "import os": ("import os", "import"),
    "import socket": ("import socket", "import"),
    "import subprocess": ("import subprocess", "import"),
    "from os import path": ("from os import path", "import"),
    "numpy submodule": ("import numpy.lib", "import"),
    "__import__": ("m = __import__('os')", "io"),
    "getattr builtins": ("f = getattr(__builtins__, 'open')", "io"),
    "open passwd": ("t = open('/etc/passwd').read()", "io"),
    "write a file": ("with open('out.txt', 'w') as f:\n    f.write('x')", "io"),
    "eval": ("eval('1 + 1')", "io"),
    "exec": ("exec('x = 1')", "io"),
    "compile": ("c = compile('1', 'f', 'eval')", "io"),
    "globals": ("g = globals()", "io"),
    "dunder attribute": ("k = ().__class__.__base__.__subclasses__()", "io"),
    "private attribute": ("x = pd._libs", "io"),
    "os via pandas": ("pd.io.common.os.system('id')", "io"),
    "to_csv": ("bars['A'].to_csv('x.csv')", "io"),
    "np.save": ("np.save('x.npy', np.ones(3))", "io"),
    "read_csv": ("d = pd.read_csv('/etc/passwd')", "io"),
    "df.eval": ("bars['A'].eval('close * 2')", "io"),
    "dunder string": ("k = '__class__'", "io"),
    "agg by name": ("bars['A'].agg('to_pickle', 'x.pkl')", "io"),
    "a pandas 3 reader": ("t = pd.read_iceberg('t')", "io"),
    "a pandas 3 writer": ("bars['A'].to_iceberg('t')", "io"),
    "styler templates": ("s = bars['A'].style", "io"),
    "versions written to a file": ("pd.show_versions(as_json='x.json')", "io"),
    "a frame written as text": ("bars['A'].to_string(buf='x.txt')", "io"),
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_io_and_escapes_are_refused(name: str) -> None:
    body, rule = ESCAPES[name]
    if body.startswith(("import ", "from ")):
        source = f"{body}\n\ndef strategy(bars):\n    return {{}}\n"
    else:
        source = wrap(body)
    assert rule in rules(source), check_strategy(source)


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("def strategy(bars, extra):\n    return {}\n", "entry"),
        ("def other(bars):\n    return {}\n", "entry"),
        ("print('at import')\ndef strategy(bars):\n    return {}\n", "top_level"),
        ("def strategy(bars):\n    return {\n", "syntax"),
        ("async def strategy(bars):\n    return {}\n", "async"),
        ("x = 1\n" * 5000 + "def strategy(bars):\n    return {}\n", "size"),
    ],
)
def test_the_shape_is_checked(source: str, rule: str) -> None:
    assert rule in rules(source)


def test_a_refusal_names_the_line() -> None:
    (refusal,) = check_strategy(wrap("x = bars['A']['close'].shift(-1)"))
    assert refusal.line == 5
    assert "line 5" in str(refusal)
    assert "shift(-1)" in str(refusal)


@given(
    method=st.sampled_from(["shift", "diff", "pct_change"]),
    period=st.integers(-500, 500),
    keyword=st.booleans(),
)
def test_a_period_is_refused_exactly_when_it_is_negative(
    method: str, period: int, keyword: bool
) -> None:
    argument = f"periods={period}" if keyword else str(period)
    found = rules(wrap(f"x = bars['A']['close'].{method}({argument}).iloc[-1]"))
    assert ("negative_shift" in found) == (period < 0)
    assert found <= {"negative_shift"}


@given(window=st.integers(1, 400), stat=st.sampled_from(["mean", "std", "max", "rank", "median"]))
def test_a_trailing_window_passes_and_the_whole_history_does_not(window: int, stat: str) -> None:
    assert rules(wrap(f"x = bars['A']['close'].iloc[-{window}:].{stat}()")) == set()
    assert rules(wrap(f"x = bars['A']['close'].rolling({window}).{stat}().iloc[-1]")) == set()
    assert rules(wrap(f"x = bars['A']['close'].{stat}()")) == {"full_sample"}


# -- issue 23: the rewrites that passed, and the harmless code that was refused ------------------

LOOP = "c = bars['A']['close']\nfor i in range(1, len(c) - 1):\n"

#: (refused, accepted) for each case of issue 23's look-ahead item, each run through `wrap`.
BOTH_WAYS = {
    "computed iloc index": (
        LOOP + "    j = i + 1\n    up = c.iloc[j] > c.iloc[i]",
        LOOP + "    j = i - 1\n    up = c.iloc[i] > c.iloc[j]",
    ),
    "index given to a helper": (
        LOOP + "    up = at(c, i + 1) > at(c, i)\n    def at(s, k):\n        return s.iloc[k]",
        LOOP + "    up = at(c, i) > at(c, i - 1)\n    def at(s, k):\n        return s.iloc[k]",
    ),
    "centre by position": (
        "m = bars['A']['close'].rolling(5, 1, True).mean()",
        "m = bars['A']['close'].rolling(5, 1, False).mean().iloc[-1]",
    ),
    "centre by keyword": (
        "m = bars['A']['close'].rolling(5, center=1).mean()",
        "m = bars['A']['close'].rolling(window=5, min_periods=1, center=False).mean().iloc[-1]",
    ),
    "slice then reset_index": (
        (
            "c = bars['A']['close']\nnxt = bars['A']['close'].iloc[1:].reset_index(drop=True)\n"
            "up = nxt > c.iloc[:-1]"
        ),
        "c = bars['A']['close'].reset_index(drop=True)\nup = (c > c.shift(1)).iloc[-1]",
    ),
    "values re-attached to earlier labels": (
        "c = bars['A']['close']\nnxt = pd.Series(c.values[1:], index=c.index[:-1])",
        "c = bars['A']['close']\nr = (c.iloc[1:] / c.iloc[:-1].values - 1).iloc[-1]",
    ),
    "agg with a string reduction": (
        "m = bars['A']['close'].agg('max')",
        "m = bars['A']['close'].rolling(5).agg('max').iloc[-1]",
    ),
    "aggregate with a list": (
        "m = bars['A']['close'].aggregate(['mean', 'std'])",
        "m = bars['A']['close'].iloc[-20:].aggregate(['mean', 'std'])",
    ),
    "apply a numpy reduction": (
        "m = bars['A'].apply(np.max)",
        "m = bars['A'].rolling(5).apply(np.max).iloc[-1]",
    ),
    "pipe a builtin reduction": (
        "m = bars['A']['close'].pipe(max)",
        "m = bars['A']['close'].tail(20).pipe(max)",
    ),
    "transform by name": (
        "m = bars['A']['close'].transform('shift', -1)",
        "m = bars['A']['close'].transform(np.log).iloc[-1]",
    ),
    "cumulative statistics at the last row": (
        "c = bars['A']['close']\nm = c.cummax().iloc[-1]",
        (
            "c = bars['A']['close']\n"
            "m = c.rolling(20).max().iloc[-1] + c.iloc[-20:].cumsum().iloc[-1]"
            "\nfor i in range(len(c)):\n    d = (c / c.cummin() - 1).iloc[i]"
        ),
    ),
    "symbol keys": (
        "m = sorted(bars['A']['close'])",
        (
            "syms = sorted(bars)\nfirst = min(bars)\nn = len(bars)\n"
            "ordered = list(reversed(syms))\npairs = sorted(bars.items())\n"
            "by_last = sorted(bars, key=lambda s: bars[s]['close'].iloc[-1])"
        ),
    ),
    "per-symbol scalars": (
        (
            "closes = {}\nfor s, df in bars.items():\n    closes[s] = df['close']\n"
            "top = {s: closes[s].max() for s in sorted(closes)}"
        ),
        (
            "scores = {}\nfor s, df in bars.items():\n"
            "    scores[s] = df['close'].iloc[-1] / df['close'].iloc[0]\n"
            "ranked = pd.Series(scores).rank()\nbest = sorted(scores, key=scores.get)[-2:]\n"
            "total = sum(scores.values())\nw = {s: clip(v / total) for s, v in scores.items()}\n"
            "def clip(x):\n    return max(0.0, min(1.0, x))"
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(BOTH_WAYS))
def test_each_issue_case_is_refused_one_way_and_accepted_the_other(name: str) -> None:
    refused, accepted = BOTH_WAYS[name]
    assert check_strategy(wrap(refused)), f"{name}: the rewrite passed"
    assert check_strategy(wrap(accepted)) == (), f"{name}: the harmless version was refused"


def test_a_running_statistic_at_a_fixed_row_is_a_whole_history_statistic() -> None:
    """`close.cummax().iloc[-1]` is `close.max()`: a running statistic (cum*, an expanding
    window, a rolling window of unbounded length) read at a fixed row, reduced or taken as one
    value is refused in every spelling; read at the loop's row, or over a bounded window of the
    rows, it is not."""
    whole = [
        "c.max()", "c.agg('max')", "c.pipe(np.max)", "np.max(c)", "max(c)", "c.cummax().max()",
        "c.cummax().iloc[-1]", "c.cumsum().iat[-1]", "c.cumprod().values[-1]",
        "c.cummin().to_numpy()[-1]", "list(c.cummax())[-1]", "c.expanding().max().iloc[-1]",
        "c.expanding().mean().iloc[len(c) - 1]", "max(c.cummax().tail(1))",
        "c.cummax().tail(1).item()", "c.cummax().iloc[-1:].sum()", "(c.cummax() * 1).iloc[-1]",
        "(c >= c.cummax()).iloc[-1]", "c.cummax().rolling(5).max().iloc[-1]",
        "c.rolling(len(c)).max().iloc[-1]", "c.cummax().loc[c.index[-1]]",
        "c.cummax().get(c.index[-1])", "c.groupby(c.index.year * 0).cummax().iloc[-1]",
        "c.cummax().iloc[0]", "c.cummax().squeeze()",
    ]  # fmt: skip
    for expression in whole:
        assert rules(wrap(f"c = bars['A']['close']\nm = {expression}")) == {"full_sample"}, (
            expression
        )
    bounded = [
        "c.rolling(20).max().iloc[-1]", "c.rolling('30D').max().iloc[-1]",
        "c.iloc[-20:].cummax().iloc[-1]", "c.tail(20).cumsum().iat[-1]",
        "c.ewm(span=10).mean().iloc[-1]", "c.cummax()",
    ]  # fmt: skip
    for expression in bounded:
        assert rules(wrap(f"c = bars['A']['close']\nm = {expression}")) == set(), expression
    loop = "c = bars['A']['close']\nr = c.cummax()\nfor i in range(len(c)):\n    m = r.iloc[i]"
    assert rules(wrap(loop)) == set()


def test_ewm_is_causal_for_every_argument_and_a_centred_window_is_not() -> None:
    """The premise for accepting every `ewm` argument (`times`, `halflife`, `adjust`, ...):
    changing later rows leaves every earlier value of the mean unchanged."""
    index = pd.date_range("2024-01-01", periods=40, freq="D", tz="UTC")
    close = pd.Series(np.random.default_rng(7).normal(size=40).cumsum() + 50, index=index)
    later = close.copy()
    later.iloc[25:] = later.iloc[25:] * 1.5 + 3
    ewms = [
        lambda s: s.ewm(span=5).mean(),
        lambda s: s.ewm(halflife="2D", times=s.index).mean(),
        lambda s: s.ewm(com=2, adjust=False, ignore_na=True).mean(),
        lambda s: s.ewm(alpha=0.3, min_periods=3).std(),
    ]
    for ewm in ewms:
        assert np.allclose(ewm(close).iloc[:25].fillna(0), ewm(later).iloc[:25].fillna(0))
    centred = close.rolling(5, 1, True).mean()
    assert not np.allclose(centred.iloc[:25], later.rolling(5, 1, True).mean().iloc[:25])
    sources = [
        "m = bars['A']['close'].ewm(span=5).mean().iloc[-1]",
        "c = bars['A']['close']\nm = c.ewm(halflife='2D', times=c.index).mean().iloc[-1]",
        "m = bars['A']['close'].ewm(0.5, None, None, None, 3, False, True).mean().iloc[-1]",
    ]
    for source in sources:
        assert check_strategy(wrap(source)) == (), source


#: Rewrites an attacker would try next, and the rule that refuses each.
ATTACKS = {
    "method held in a name": ("m = bars['A']['close'].max\nx = m()", "full_sample"),
    "function held in a name": ("f = np.max\nx = f(bars['A']['close'])", "full_sample"),
    "np.roll": ("x = np.roll(bars['A']['close'], -1)", "negative_shift"),
    "reverse then cummax": ("x = bars['A']['close'][::-1].cummax()", "reversed"),
    "reverse then first row": ("x = bars['A']['close'].iloc[::-1].iloc[0]", "reversed"),
    "reordered by a list": ("x = bars['A']['close'].iloc[[2, 1, 0]].cummax()", "reversed"),
    "values[i + 1]": (LOOP + "    x = c.values[i + 1]", "future_index"),
    "to_numpy()[j]": (LOOP + "    j = i + 1\n    x = c.to_numpy()[j]", "future_index"),
    "array[i + 1]": (LOOP + "    x = c.array[i + 1]", "future_index"),
    "iat[i + 1]": (LOOP + "    x = c.iat[i + 1]", "future_index"),
    "at[index[i + 1]]": (LOOP + "    x = c.at[c.index[i + 1]]", "future_index"),
    "xs(index[i + 1])": (LOOP + "    x = c.xs(c.index[i + 1])", "future_index"),
    "take([i + 1])": (LOOP + "    x = c.take([i, i + 1])", "future_index"),
    "head(i + 2)": (LOOP + "    x = c.head(i + 2).iloc[-1]", "future_index"),
    "slice to i + 2": (LOOP + "    x = c.iloc[i - 1:i + 2].iloc[-1]", "future_index"),
    "slice from i": (LOOP + "    x = c.iloc[i:].iloc[1]", "future_index"),
    "mask from row i": (LOOP + "    x = c[c.index > c.index[i]].iloc[0]", "future_index"),
    "counter + 1": (
        "c = bars['A']['close']\ni = 0\nwhile i < len(c) - 1:\n    x = c.iloc[i + 1]\n    i += 1",
        "future_index",
    ),
    "asof a later label": (
        LOOP + "    x = c.asof(c.index[i] + pd.Timedelta('1D'))",
        "future_index",
    ),
    "sort_values then last": ("x = bars['A']['close'].sort_values().iloc[-1]", "full_sample"),
    "shift(periods=-1)": ("x = bars['A']['close'].shift(periods=-1)", "negative_shift"),
    "shift(-1 * 1)": ("x = bars['A']['close'].shift(-1 * 1)", "negative_shift"),
    "shift by a negative loop value": (
        "for k in (1, -1):\n    x = bars['A']['close'].shift(k)",
        "negative_shift",
    ),
    "shift with a negative freq": ("x = bars['A']['close'].shift(1, '-1D')", "negative_shift"),
    "unbound shift": ("x = pd.Series.shift(bars['A']['close'], -1)", "negative_shift"),
    "diff(-1)": ("x = bars['A']['close'].diff(-1)", "negative_shift"),
    "pct_change(periods=-1)": ("x = bars['A']['close'].pct_change(periods=-1)", "negative_shift"),
    "ffill inside": ("x = bars['A']['close'].ffill(limit_area='inside')", "backfill"),
    "reindex bfill": ("c = bars['A']['close']\nx = c.reindex(c.index, method='bfill')", "backfill"),
    "duplicated keep last": ("x = bars['A']['close'].duplicated(keep='last')", "backfill"),
    "resample labelled left": ("x = bars['A']['close'].resample('2D').last()", "future_bin"),
    "groupby transform": (
        "c = bars['A']['close']\nx = c.groupby(c.index.date).transform('max')",
        "full_sample",
    ),
    "groupby reduction": (
        "c = bars['A']['close']\nx = c.groupby(c.index.month).max()",
        "full_sample",
    ),
    "rolling options hidden": (
        "o = {'center': True}\nx = bars['A']['close'].rolling(5, **o).mean()",
        "centered_window",
    ),
    "np.gradient": ("x = np.gradient(bars['A']['close'].values)", "future_index"),
    "masked full mean": ("c = bars['A']['close']\nx = c.loc[c > 0].mean()", "full_sample"),
    "list of series": (
        "cs = [df['close'] for df in bars.values()]\nx = cs[0].max()",
        "full_sample",
    ),
    "dict of series": ("d = {}\nd['c'] = bars['A']['close']\nx = d['c'].max()", "full_sample"),
    "nested helper": ("def hi(s):\n    return s.max()\nx = hi(bars['A']['close'])", "full_sample"),
    "lambda returning a series": (
        "f = lambda: bars['A']['close']\nx = f().max()",
        "full_sample",
    ),
    "default argument": (
        "def hi(s=bars['A']['close']):\n    return s.max()\nx = hi()",
        "full_sample",
    ),
    "matmul": ("c = bars['A']['close']\nx = c @ c", "full_sample"),
    "np.dot": ("c = bars['A']['close']\nx = np.dot(c, c)", "full_sample"),
    "ufunc reduce": ("x = np.maximum.reduce(bars['A']['close'])", "full_sample"),
    "count in a generator": ("x = sum(1 for v in bars['A']['close'] if v > 0)", "full_sample"),
    "trailing slice of the whole length": (
        "c = bars['A']['close']\nx = c.iloc[-len(c):].mean()",
        "full_sample",
    ),
    "tail of the whole length": (
        "c = bars['A']['close']\nx = c.tail(len(c)).mean()",
        "full_sample",
    ),
    "relabel by rename": (
        "x = bars['A']['close'].rename(lambda t: t - pd.Timedelta('1D'))",
        "realign",
    ),
    "assign an earlier index": (
        "c = bars['A']['close']\nd = c.iloc[1:]\nd.index = c.index[:-1]",
        "realign",
    ),
    "series given by keyword": ("x = np.asarray(a=bars['A']['close']).max()", "full_sample"),
    "dict built by keyword": ("x = dict(c=bars['A']['close'])['c'].max()", "full_sample"),
    "relabel by keyword": ("x = pd.Series(data=bars['A']['close'].values[1:])", "realign"),
    "series through an exception": (
        (
            "try:\n    raise ValueError(bars['A']['close'])\nexcept ValueError as e:\n"
            "    x = e.args[0].max()"
        ),
        "full_sample",
    ),
    "series sent into a generator": (
        "def g():\n    v = yield\n    yield v.max()\ngen = g()\nx = gen.send(bars['A'])",
        "full_sample",
    ),
    "row sent into a generator": (
        "def g():\n    k = yield\n    yield bars['A']['close'].iloc[k]",
        "future_index",
    ),
    "math.hypot": ("x = math.hypot(*bars['A']['close'])", "full_sample"),
    "np.fft": ("x = np.fft.fft(bars['A']['close'].values)", "full_sample"),
    "np.linalg.solve": (
        "x = np.linalg.solve(np.eye(2), bars['A']['close'].values[:2])",
        "full_sample",
    ),
    "np.count_nonzero": ("x = np.count_nonzero(bars['A']['close'] > 0)", "full_sample"),
    "shuffled rows": ("x = bars['A'].sample(frac=1).cummax()", "reversed"),
    "set_index to moved labels": (
        "f = bars['A']\nx = f.set_index(f.index - pd.Timedelta('1D'))",
        "realign",
    ),
    "labelled series against a shifted array": (
        "c = bars['A']['close']\nx = c.iloc[:-1] / c.iloc[1:].values",
        "realign",
    ),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_attackers_rewrite_is_refused(name: str) -> None:
    body, rule = ATTACKS[name]
    source = wrap(body, "import math\nimport numpy as np\nimport pandas as pd\n")
    assert rule in rules(source), check_strategy(source)


def test_honest_variants_of_the_attacks_pass() -> None:
    bodies = [
        LOOP + "    w = c.iloc[i - 1:i + 1].mean()\n    x = c.values[i] + c.iat[i - 1]",
        LOOP + "    x = c.head(i + 1).iloc[-1] + c.take([i - 1, i]).iloc[0]",
        "c = bars['A']['close']\nx = c.head(len(c)).iloc[-1] + c.iloc[len(c) - 1]",
        "c = bars['A']['close']\nfor k in range(1, 6):\n    x = c.iat[-k - 1] + c.shift(k).iat[-1]",
        "c = bars['A']['close']\ni = 0\nwhile i < len(c):\n    x = c.iloc[i]\n    i += 1",
        "c = bars['A']['close']\nx = c.iloc[[0, -21, -1]].pct_change().iloc[-1]",
        "c = bars['A']['close']\nidx = np.where(c.values > 0)[0]\nx = c.iloc[idx].iloc[-5:].mean()",
        "c = bars['A']['close']\nx = c.resample('W', label='right').max().iloc[-1]",
        "c = bars['A']['close']\nr = c.values[1:] / c.values[:-1] - 1\nx = r[-20:].std()",
        "x = bars['A'].rename(columns={'close': 'c'})['c'].iloc[-1]",
        "x = bars['A'].reset_index().set_index('start_at')['close'].iloc[-1]",
        "try:\n    x = bars['A']['close'].iloc[-1]\nexcept IndexError as e:\n    print(e)",
        "c = bars['A']['close']\nx = np.max(c.iloc[-20:]) + c.rolling(400).max().iloc[-1]",
        (
            "def mom(s, n):\n    return s.iloc[-1] / s.iloc[-n - 1] - 1\n"
            "def vol(s, n):\n    return s.pct_change().iloc[-n:].std()\n"
            "x = mom(bars['A']['close'], 20)"
            " / vol(bars['A']['close'], 20)"
        ),
    ]
    for body in bodies:
        assert check_strategy(wrap(body)) == (), body


@given(offset=st.integers(-5, 5), through=st.sampled_from(["direct", "name", "helper"]))
def test_a_loop_row_is_refused_exactly_when_it_is_later(offset: int, through: str) -> None:
    index = f"i + {offset}" if offset >= 0 else f"i - {-offset}"
    read = {
        "direct": f"x = c.iloc[{index}]",
        "name": f"j = {index}\n    x = c.iloc[j]",
        "helper": f"x = at(c, {index})\n    def at(s, k):\n        return s.iloc[k]",
    }[through]
    found = rules(wrap(f"c = bars['A']['close']\nfor i in range(5, len(c) - 5):\n    {read}"))
    assert found == ({"future_index"} if offset > 0 else set())


# -- frames, code objects and tracebacks (issue 23, item 1's static half) -----------------------

FRAME_ATTRIBUTES = [
    "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended", "cr_frame", "cr_code",
    "cr_await", "cr_origin", "ag_frame", "ag_code", "ag_await", "f_back", "f_globals",
    "f_locals", "f_builtins", "f_code", "f_trace", "f_lasti", "f_lineno", "tb_frame", "tb_next",
    "tb_lasti", "tb_lineno", "co_code", "co_consts", "co_names", "co_filename", "co_varnames",
]  # fmt: skip


@pytest.mark.parametrize("attribute", FRAME_ATTRIBUTES)
def test_frame_code_and_traceback_attributes_are_refused(attribute: str) -> None:
    source = wrap(f"def g():\n    yield 1\ngen = g()\nx = gen.{attribute}")
    assert "io" in rules(source), check_strategy(source)
    named = wrap(f"x = '{{0.{attribute}}}'")
    assert "io" in rules(named), check_strategy(named)


FRAME_WALK = """
def strategy(bars):
    def climb():
        frame = gen.gi_frame
        while frame.f_back is not None:
            frame = frame.f_back
        yield frame
    gen = climb()
    top = next(gen)
    opener = top.f_builtins["op" + "en"]
    raise ValueError(opener("/proc/self/environ").read()[::-1])
"""


def test_the_frame_walking_escape_is_refused_for_its_attributes() -> None:
    found = check_strategy(FRAME_WALK)
    refused = {refusal.message for refusal in found if refusal.rule == "io"}
    assert {
        f"the attribute .{name} is forbidden" for name in ("gi_frame", "f_back", "f_builtins")
    } <= refused


@pytest.mark.parametrize(
    "body",
    [
        "x = bars['A']['close'].agg('to_' + 'json')",
        "name = 'max'\nx = bars['A']['close'].agg(name)",
        "x = bars['A'].groupby('close').agg(m=('close', 'to_' + 'json'))",
        "x = bars['A']['close'].apply(''.join(['ma', 'x']))",
        "x = '{0.gi_frame}'.format(bars)",
    ],
)
def test_a_function_named_at_run_time_is_refused(body: str) -> None:
    """pandas looks a string given to agg/apply/transform up with getattr: a name built at run
    time would reach any attribute; `.format` reads attributes named in a string."""
    assert "io" in rules(wrap(body)), check_strategy(wrap(body))


def test_a_class_or_match_statement_is_refused() -> None:
    assert "scope" in rules(wrap("class Window:\n    pass"))
    assert "scope" in rules(wrap("match bars:\n    case _:\n        pass"))


def test_a_long_chain_of_names_cannot_hide_a_series_or_a_later_row() -> None:
    """The analyses settle however the names are ordered (each name written before the one it
    copies, so every step needs the previous one resolved)."""
    copies = "\n".join(f"d{k} = d{k - 1}" for k in range(300, 0, -1))
    assert rules(wrap(f"{copies}\nd0 = bars['A']['close']\nx = d300.max()")) == {"full_sample"}
    steps = "\n".join(f"    j{k} = j{k - 1}" for k in range(300, 0, -1))
    loop = f"c = bars['A']['close']\nfor i in range(len(c) - 1):\n{steps}\n    j0 = i + 1\n"
    assert rules(wrap(loop + "    x = c.iloc[j300]")) == {"future_index"}
    assert rules(wrap(loop.replace("i + 1", "i - 1") + "    x = c.iloc[j300]")) == set()


def test_nested_helpers_are_checked_in_linear_time() -> None:
    """Each helper calls the one before twice: evaluating calls through their callees would take
    2**400 steps; a helper's return value is solved once, like a name."""
    helpers = "def h0(s):\n    return s\n" + "".join(
        f"def h{k}(s):\n    return h{k - 1}(s) + h{k - 1}(s)\n" for k in range(1, 400)
    )
    found = check_strategy(helpers + wrap("y = h399(bars['A']['close'])\nm = y.max()"))
    assert {refusal.rule for refusal in found} == {"full_sample"}
