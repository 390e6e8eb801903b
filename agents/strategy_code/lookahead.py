"""The static check a model's strategy code passes before it ever runs: no look-ahead, no I/O.

This module owns `check_strategy`: it parses the source once and returns every reason to refuse
it (an empty tuple: accepted). It never runs the code. The rules, by module:

- **Shape** (here): only imports, constant assignments, function definitions and a docstring at
  the top level; a `strategy(bars)` taking one argument; at most `MAX_SOURCE_CHARS`.
- **I/O and escapes** (`escapes.py`): imports outside pandas, numpy, math and statistics; open,
  eval, getattr and the like; names and attributes starting with `_`; the attributes of frames,
  code objects, generators, coroutines and tracebacks (`gi_frame`, `f_back`, `f_globals`,
  `tb_frame`, `co_*`, ...); I/O attributes; strings naming any of these; async, classes, match,
  global/nonlocal; a function given to `agg`/`apply`/`transform`/`pipe` not written in the code.
- **Look-ahead** (`lookahead_rules.py`, on `taint.py`, which tells rows of the bars from symbol
  keys and per-symbol scalars, and `index_proof.py`, which places integer row indexes). The code
  is read as FIDES reads it: as a rule evaluated at every row of a longer history, where a value
  at a row may use that row and earlier ones only. Refused:
  - a `shift`/`diff`/`pct_change` period not provably >= 0 (`-1`, `-1 * 1`, `periods=-1`, a
    name it cannot bound), or a `freq` that is not a literal forward offset;
  - backward fills: `bfill`, `interpolate`, `method="bfill"`/`"nearest"`, `limit_area`,
    `merge_asof` other than `direction="backward"`, `duplicated(keep="last")`;
  - a centred `rolling` window, by keyword or as the third positional argument (`rolling(window,
    min_periods, center, ...)`), or window arguments hidden in `*args`/`**kwargs`; `resample`
    without `label="right"`; a groupby's `transform` or reductions (each group's later rows);
  - a row index not provably at or before the current row, through `iloc`, `iat`, `loc`, `at`,
    `take`, `head`, `asof`, `.values[...]`: `i + 1`, `j` where `j = i + 1`, a helper given
    `i + 1`, `len(x)`, `-0`, a slice ending after the current row or running from it to the end,
    a mask built from the loop's row;
  - reordered rows (a negative step, `np.flip`, `reversed`, `sort_index(ascending=False)`, a list
    of rows not in order), `np.roll`, `np.gradient`, `np.interp`;
  - re-labelling rows after dropping the first ones or with moved labels
    (`x.iloc[1:].reset_index(drop=True)`, `set_axis`, `rename`, `pd.Series(x.values[1:])`,
    assigning `.index`, a labelled series combined with such an array): a shift backwards;
  - full-sample statistics (`vocabulary.FULL_SAMPLE_STATS`) of rows not bounded by a window, in
    every spelling: the method (`close.max()`), held in a name (`m = close.max`), the function
    (`np.max(close)`, `max(close)`, `close @ w`), named in `agg`/`apply`/`transform`/`pipe`
    (`close.agg("max")`, `close.apply(np.max)`, `close.pipe(max)`), or a comprehension over every
    row, or a running statistic read at a fixed row (`close.cummax().iloc[-1]`, which is
    `close.max()`). Bounded: a `rolling` window of a length the check can bound (or of time),
    `ewm`, `resample(label="right")`, a trailing slice or `tail` of a length the check can bound,
    one row; an `expanding` window only as a series or at the loop's row.

What passes, and why. `ewm` cannot look ahead whatever its arguments: every weight falls on the
row or earlier ones, and `times`/`halflife` only set the weights. A running statistic (`cummax`,
`cumsum`, `expanding().max()`, `rolling(len(x))`) passes as a series, and read at the loop's row
(`r.iloc[i]`); read at a fixed row (`.iloc[-1]`, `.values[-1]`, `.item()`, `.get(label)`), or
reduced, it is refused as the whole-history statistic it is: `close.cummax().iloc[-1]` is
`close.max()`. Over a bounded window of the rows (`close.iloc[-20:].cummax()`) it is bounded.
Symbol keys and per-symbol scalars are not rows: `sorted(bars)`, ranking the symbols' latest
momentum, a helper given a scalar. The check is conservative: what it cannot prove harmless is
refused, and the sandbox (`sandbox.py`) is the wall for what a static pass cannot see.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from openbell.agents.strategy_code.escapes import ALLOWED_IMPORTS, escapes
from openbell.agents.strategy_code.lookahead_rules import LookAheadRules

__all__ = ["ALLOWED_IMPORTS", "ENTRY_POINT", "MAX_SOURCE_CHARS", "Refusal", "check_strategy"]

#: Source longer than this is refused unread.
MAX_SOURCE_CHARS: Final = 20_000
#: The function the code must define.
ENTRY_POINT: Final = "strategy"
_TOP_LEVEL: Final = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.Assign, ast.AnnAssign)


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why the check refuses the code: a `rule` name and a message naming the line."""

    rule: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message} [{self.rule}]"


def check_strategy(source: str) -> tuple[Refusal, ...]:
    """Every reason to refuse `source` (see the module docstring); empty when it passes."""
    if len(source) > MAX_SOURCE_CHARS:
        return (Refusal(rule="size", line=1, message=f"over {MAX_SOURCE_CHARS} characters"),)
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return (Refusal(rule="syntax", line=exc.lineno or 1, message=f"syntax error: {exc.msg}"),)
    except (RecursionError, MemoryError):
        return (Refusal(rule="syntax", line=1, message="nested too deeply to read"),)
    found = [*_shape(tree)]
    try:
        for line, rule, message in [*escapes(tree), *LookAheadRules(tree, ENTRY_POINT).check()]:
            found.append(Refusal(rule=rule, line=line, message=message))
    except RecursionError:
        found.append(Refusal(rule="syntax", line=1, message="nested too deeply to check"))
    unique = {(refusal.line, refusal.rule, refusal.message): refusal for refusal in found}
    return tuple(unique[key] for key in sorted(unique))


def _shape(tree: ast.Module) -> Iterator[Refusal]:
    entry = None
    for index, node in enumerate(tree.body):
        docstring = (
            index == 0
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        )
        if not docstring and not isinstance(node, _TOP_LEVEL):
            yield Refusal(
                rule="top_level",
                line=node.lineno,
                message="only imports, constants and function definitions at the top level",
            )
        if isinstance(node, ast.FunctionDef) and node.name == ENTRY_POINT:
            entry = node
    if entry is None:
        yield Refusal(rule="entry", line=1, message=f"no function {ENTRY_POINT}(bars) defined")
    elif len(entry.args.args) != 1 or entry.args.vararg or entry.args.kwarg:
        yield Refusal(
            rule="entry", line=entry.lineno, message=f"{ENTRY_POINT} must take one argument, bars"
        )
