"""The static check a model's strategy code passes before it ever runs: no look-ahead, no I/O.

This module owns `check_strategy`, one AST pass over the source, which returns the reasons it
refuses the code (an empty tuple: accepted). It never runs the code. What it refuses:

- **Shape.** Anything but imports, constant assignments, function definitions and a docstring at
  the top level; no `strategy(bars)` function taking one argument; async code; source over
  `MAX_SOURCE_CHARS`.
- **I/O and escapes.** An import outside `ALLOWED_IMPORTS` (pandas, numpy, math, statistics);
  the names in `FORBIDDEN_NAMES` (open, eval, exec, compile, `__import__`, getattr, globals,
  locals, vars, ...); any name or attribute starting with `_` (dunders, private internals); an
  attribute or string in `FORBIDDEN_ATTRIBUTES` (`os`, `sys`, `to_csv`, `read_csv`, `save`,
  `load`, `eval`, `query`, ...); a string holding `__`.
- **Look-ahead.** A negative or non-literal `shift`/`diff`/`pct_change` period; backward filling
  (`bfill`, `backfill`, `fillna(method="bfill")`) and `interpolate`; a centred `rolling` window;
  `iloc`/`iat`/`loc` indexed at `i + k` (the next row of a loop), at `-0`, at `len(...)` or
  `.shape[...]` without a minus, or sliced from `i + k` onward; and full-sample statistics: a
  reduction (`FULL_SAMPLE_STATS`: mean, std, rank, min, max, quantile, ...) of a series or frame
  taken from the bars, unless it is taken over a window (`rolling`, `expanding`, `ewm`), a
  trailing slice (`.iloc[-k:]`, `[-k:-j]`, `.tail(k)`) or one row (`.iloc[-1]`); also
  `np.mean(x)`-style calls and `pd.qcut`/`pd.cut` of such a series.

Which values are "taken from the bars" is a small taint analysis: the function's argument, what
a loop over it binds, and every name assigned from an expression that uses a tainted name, except
through one row or one value (`.iloc[-1]`, a windowed reduction). Cross-sectional statistics of
per-symbol scalars (ranking the symbols' latest momentum) are not look-ahead and pass. The check
is conservative: it refuses what it cannot prove harmless, and the sandbox (`sandbox.py`) is the
second wall for what a static pass cannot see.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

#: The only modules strategy code may import (and their public attributes).
ALLOWED_IMPORTS: Final = frozenset({"pandas", "numpy", "math", "statistics"})
#: Source longer than this is refused unread.
MAX_SOURCE_CHARS: Final = 20_000
#: The function the code must define.
ENTRY_POINT: Final = "strategy"

FORBIDDEN_NAMES: Final = frozenset(
    {
        "open", "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr",
        "hasattr", "globals", "locals", "vars", "dir", "input", "breakpoint", "help", "exit",
        "quit", "memoryview", "__builtins__", "object", "super", "classmethod", "staticmethod",
        "property", "type",
    }
)  # fmt: skip
FORBIDDEN_ATTRIBUTES: Final = frozenset(
    {
        # modules reachable from pandas/numpy internals, and process control
        "os", "sys", "subprocess", "io", "builtins", "importlib", "ctypes", "socket", "shutil",
        "pathlib", "Path", "system", "popen", "spawn", "fork", "kill", "core", "lib", "util",
        "testing", "distutils", "f2py", "ctypeslib", "compat", "errors", "plotting", "options",
        "set_option", "config", "resource", "signal", "threading", "multiprocessing",
        # evaluation of text
        "eval", "query", "exec", "compile",
        # file and network I/O of pandas and numpy
        "to_csv", "to_pickle", "to_parquet", "to_feather", "to_hdf", "to_sql", "to_excel",
        "to_json", "to_html", "to_latex", "to_markdown", "to_stata", "to_orc", "to_xml",
        "to_clipboard", "to_gbq", "read_csv", "read_pickle", "read_parquet", "read_feather",
        "read_hdf", "read_sql", "read_sql_query", "read_sql_table", "read_excel", "read_json",
        "read_html", "read_table", "read_fwf", "read_clipboard", "read_stata", "read_sas",
        "read_spss", "read_orc", "read_xml", "read_gbq", "HDFStore", "ExcelWriter", "save",
        "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt", "fromfile",
        "tofile", "memmap", "fromregex", "DataSource", "dump", "dumps", "open_memmap",
    }
)  # fmt: skip
#: Reductions that look at every row they are given.
FULL_SAMPLE_STATS: Final = frozenset(
    {
        "mean", "std", "var", "sem", "median", "rank", "min", "max", "quantile", "describe",
        "idxmax", "idxmin", "argmax", "argmin", "nlargest", "nsmallest", "corr", "cov", "skew",
        "kurt", "kurtosis", "zscore", "sum", "prod", "mad", "ptp", "percentile", "nanmean",
        "nanstd", "nanvar", "nanmedian", "nanmin", "nanmax", "nanquantile", "nanpercentile",
        "nansum", "average", "stdev", "pstdev", "variance", "pvariance", "fmean", "mode",
        "value_counts", "unique", "nunique", "all", "any", "count", "sort_values", "sorted",
        "qcut", "cut",
    }
)  # fmt: skip
_WINDOWS: Final = frozenset({"rolling", "expanding", "ewm"})
_PERIODS: Final = frozenset({"shift", "diff", "pct_change"})
_BACKFILLS: Final = frozenset({"bfill", "backfill", "interpolate"})
_INDEXERS: Final = frozenset({"iloc", "iat", "loc", "at"})
_STAT_MODULES: Final = frozenset({"np", "numpy", "statistics", "pd", "pandas", "math"})
_BUILTIN_STATS: Final = frozenset({"max", "min", "sum", "sorted"})
_SCALAR_BUILTINS: Final = frozenset({"len", "float", "int", "bool", "str", "round", "abs"})
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
    found = [*_shape(tree), *_escapes(tree)]
    found.extend(_LookAhead().check(tree))
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


def _escapes(tree: ast.Module) -> Iterator[Refusal]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from _imports(node)
        else:
            found = _escape(node)
            if found is not None:
                yield Refusal(rule=found[0], line=getattr(node, "lineno", 1), message=found[1])


def _escape(node: ast.AST) -> tuple[str, str] | None:
    """(rule, message) when `node` is an escape from the sandbox's rules, else None."""
    if isinstance(node, ast.AsyncFunctionDef | ast.Await | ast.AsyncFor | ast.AsyncWith):
        return "async", "async code is not allowed"
    if isinstance(node, ast.Global | ast.Nonlocal):
        return "scope", "global/nonlocal is not allowed"
    name: str | None = None
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.FunctionDef | ast.ClassDef):
        name = node.name
    elif isinstance(node, ast.arg):
        name = node.arg
    if name is not None and (name in FORBIDDEN_NAMES or name.startswith("_")):
        return "io", f"the name {name!r} is forbidden"
    if isinstance(node, ast.Attribute) and (
        node.attr in FORBIDDEN_ATTRIBUTES or node.attr.startswith("_")
    ):
        return "io", f"the attribute .{node.attr} is forbidden"
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and ("__" in node.value or node.value in FORBIDDEN_ATTRIBUTES)
    ):
        return "io", f"the string {node.value[:40]!r} is forbidden"
    return None


def _imports(node: ast.Import | ast.ImportFrom) -> Iterator[Refusal]:
    if isinstance(node, ast.ImportFrom):
        modules = [node.module or ""] if node.level == 0 else ["." * node.level]
        imported = [alias.name for alias in node.names]
    else:
        modules = [alias.name for alias in node.names]
        imported = []
    for module in modules:
        if module not in ALLOWED_IMPORTS:
            yield Refusal(
                rule="import",
                line=node.lineno,
                message=f"import of {module!r}; allowed: {', '.join(sorted(ALLOWED_IMPORTS))}",
            )
    for name in imported:
        if name == "*" or name.startswith("_") or name in FORBIDDEN_ATTRIBUTES:
            yield Refusal(rule="import", line=node.lineno, message=f"import of {name!r}")
    for alias in node.names:
        if alias.asname is not None and alias.asname.startswith("_"):
            yield Refusal(rule="import", line=node.lineno, message=f"alias {alias.asname!r}")


def _literal_int(node: ast.expr) -> int | None:
    """The value of an int literal (with a sign), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return int(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _literal_int(node.operand)
        if inner is not None:
            return -inner if isinstance(node.op, ast.USub) else inner
    return None


def _method(node: ast.expr) -> tuple[ast.expr, str] | None:
    """(receiver, name) of a method call `receiver.name(...)`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.value, node.func.attr
    return None


def _indexer(node: ast.Subscript) -> str | None:
    """`iloc`, `iat`, `loc` or `at` when `node` is `x.iloc[...]` and the like."""
    if isinstance(node.value, ast.Attribute) and node.value.attr in _INDEXERS:
        return node.value.attr
    return None


def _is_trailing_slice(index: ast.expr) -> bool:
    """`[-k:]` or `[-k:-j]`: a slice from a negative start (literal or `-name`) to the end or
    to a negative stop."""
    if not isinstance(index, ast.Slice) or index.lower is None:
        return False
    return _negated(index.lower) and (index.upper is None or _negated(index.upper))


def _negated(node: ast.expr) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)


def _adds_positive(node: ast.expr) -> bool:
    """`x + k` with a positive literal k (the next row of `x`)."""
    if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Add):
        return False
    right, left = _literal_int(node.right), _literal_int(node.left)
    return (right is not None and right > 0) or (left is not None and left > 0)


def _mentions_length(node: ast.expr) -> bool:
    """Uses `len(...)` or `.shape` and subtracts nothing: the end of a frame, or past it."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return False
    for inner in ast.walk(node):
        if (
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Name)
            and inner.func.id == "len"
        ):
            return True
        if isinstance(inner, ast.Attribute) and inner.attr == "shape":
            return True
    return False


class _LookAhead:
    """The look-ahead rules, with the taint analysis they need (see the module docstring)."""

    def __init__(self) -> None:
        self.tainted: set[str] = set()
        self.windowed: set[str] = set()
        self.refusals: list[Refusal] = []

    def check(self, tree: ast.Module) -> list[Refusal]:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                self._function(node)
        return self.refusals

    def _refuse(self, node: ast.AST, rule: str, message: str) -> None:
        self.refusals.append(Refusal(rule=rule, line=getattr(node, "lineno", 1), message=message))

    def _function(self, function: ast.FunctionDef) -> None:
        if function.name == ENTRY_POINT and function.args.args:
            self.tainted.add(function.args.args[0].arg)
        else:  # a helper's arguments may be any series
            self.tainted.update(arg.arg for arg in function.args.args)
        # Two passes: a name assigned late in the body may be read earlier in a loop.
        for _ in range(2):
            for node in ast.walk(function):
                self._bind(node)
        for node in ast.walk(function):
            self._rules(node)

    # -- taint ---------------------------------------------------------------------------------

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is None:
                return
            tainted, windowed = self.taints(node.value), self.is_windowed(node.value)
            for target in targets:
                for name in _names(target):
                    if tainted:
                        self.tainted.add(name)
                    if windowed:
                        self.windowed.add(name)
        elif isinstance(node, ast.For | ast.comprehension) and self.taints(node.iter):
            self.tainted.update(_names(node.target))
        elif isinstance(node, ast.NamedExpr) and self.taints(node.value):
            self.tainted.add(node.target.id)

    def taints(self, node: ast.expr) -> bool:
        """Whether `node` may be a series or frame taken from the bars."""
        if isinstance(node, ast.Name):
            return node.id in self.tainted
        if isinstance(node, ast.Subscript):
            if _indexer(node) is not None and not isinstance(node.slice, ast.Slice):
                return False  # one row or one value
            return self.taints(node.value)
        if isinstance(node, ast.Call):
            return self._taints_call(node)
        return any(self.taints(part) for part in _operands(node))

    def _taints_call(self, node: ast.Call) -> bool:
        method = _method(node)
        if method is not None and method[1] in FULL_SAMPLE_STATS:
            # Over a rolling window: a series again. Otherwise a scalar (or refused in `_rules`).
            inner = _method(method[0])
            return inner is not None and inner[1] in _WINDOWS
        if isinstance(node.func, ast.Name) and node.func.id in _SCALAR_BUILTINS:
            return False
        parts: list[ast.expr] = [*node.args, *(kw.value for kw in node.keywords)]
        if method is not None:
            parts.append(method[0])
        return any(self.taints(part) for part in parts)

    def is_windowed(self, node: ast.expr) -> bool:
        """Whether `node` is a window (rolling, expanding, ewm), a trailing slice, or taken
        from one."""
        if isinstance(node, ast.Name):
            return node.id in self.windowed
        if isinstance(node, ast.Subscript):
            if _is_trailing_slice(node.slice):  # df.iloc[-k:], values[-k:], df[-k:-1]
                return True
            return self.is_windowed(node.value)
        if isinstance(node, ast.Attribute):
            return self.is_windowed(node.value)
        method = _method(node)
        if method is not None:
            receiver, name = method
            if name in _WINDOWS or name == "tail":
                return True
            return name not in FULL_SAMPLE_STATS and self.is_windowed(receiver)
        if isinstance(node, ast.BinOp):
            return self.is_windowed(node.left) and self.is_windowed(node.right)
        return False

    # -- rules ---------------------------------------------------------------------------------

    def _rules(self, node: ast.AST) -> None:
        if isinstance(node, ast.Subscript):
            self._index(node)
        if not isinstance(node, ast.Call):
            return
        method = _method(node)
        if method is not None:
            self._method_call(node, *method)
        elif isinstance(node.func, ast.Name) and node.func.id in _BUILTIN_STATS:
            self._stat_of_argument(node, node.func.id)

    def _method_call(self, node: ast.Call, receiver: ast.expr, name: str) -> None:
        if name in _PERIODS:
            self._periods(node, name)
        elif name in _BACKFILLS:
            self._refuse(node, "backfill", f".{name}() fills rows from later rows")
        elif name == "fillna" and any(
            kw.arg == "method"
            and isinstance(kw.value, ast.Constant)
            and kw.value.value in ("bfill", "backfill")
            for kw in node.keywords
        ):
            self._refuse(node, "backfill", "fillna(method='bfill') fills rows from later rows")
        elif name == "rolling" and any(
            kw.arg == "center" and not (isinstance(kw.value, ast.Constant) and not kw.value.value)
            for kw in node.keywords
        ):
            self._refuse(node, "centered_window", "a centred rolling window sees later rows")
        if name not in FULL_SAMPLE_STATS:
            return
        if isinstance(receiver, ast.Name) and receiver.id in _STAT_MODULES:
            self._stat_of_argument(node, f"{receiver.id}.{name}")
        elif self.taints(receiver) and not self.is_windowed(receiver):
            self._refuse(
                node,
                "full_sample",
                f".{name}() over the whole history; use .rolling(n), .expanding(), "
                f".iloc[-n:] or .tail(n)",
            )

    def _stat_of_argument(self, node: ast.Call, shown: str) -> None:
        if not node.args:
            return
        if shown in _BUILTIN_STATS and len(node.args) > 1:
            return  # max(a, b): two values, not a series
        first = node.args[0]
        if self.taints(first) and not self.is_windowed(first):
            self._refuse(
                node,
                "full_sample",
                f"{shown}(...) over the whole history; take a trailing window first",
            )

    def _periods(self, node: ast.Call, name: str) -> None:
        given = [*node.args[:1], *(kw.value for kw in node.keywords if kw.arg == "periods")]
        for value in given:
            period = _literal_int(value)
            if period is None:
                self._refuse(node, "negative_shift", f".{name}() needs a literal period >= 0")
            elif period < 0:
                self._refuse(node, "negative_shift", f".{name}({period}) reads later rows")

    def _index(self, node: ast.Subscript) -> None:
        indexer = _indexer(node)
        if indexer is None:
            return
        index = node.slice
        if isinstance(index, ast.Tuple):  # df.iloc[row, column]: the row is first
            index = index.elts[0] if index.elts else index
        if isinstance(index, ast.Slice):
            if index.lower is not None and _adds_positive(index.lower):
                self._refuse(node, "future_index", f".{indexer}[i + k:] reads later rows")
            return
        literal = _literal_int(index)
        if isinstance(index, ast.UnaryOp) and literal == 0:
            self._refuse(node, "future_index", f".{indexer}[-0] is the first row, not the last")
        elif _adds_positive(index):
            self._refuse(node, "future_index", f".{indexer}[i + k] reads a later row")
        elif _mentions_length(index):
            self._refuse(node, "future_index", f".{indexer}[len(...)] is past the last row")


def _operands(node: ast.expr) -> list[ast.expr]:
    """The parts of an expression a value flows from (attributes, operators, conditionals,
    tuples); none for literals, collections built of scalars and comprehensions."""
    if isinstance(node, ast.Attribute):
        return [node.value]
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.Tuple | ast.List):
        return list(node.elts)
    return []


def _names(target: ast.expr) -> Iterator[str]:
    """The names a target binds (`a`, `a, b`, `[a, (b, c)]`)."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _names(element)
    elif isinstance(target, ast.Starred):
        yield from _names(target.value)
