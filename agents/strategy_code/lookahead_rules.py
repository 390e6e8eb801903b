"""The look-ahead rules of the static check, applied node by node.

This module owns `LookAheadRules`: given a parsed strategy, it builds the analyses
(`bindings.py`, `index_proof.py`, `taint.py`) and yields `(line, rule, message)` for every use
of later rows it finds. `lookahead.py` documents the rules and turns these into refusals. The
rule names: `negative_shift`, `backfill`, `centered_window`, `future_bin`, `future_index`,
`reversed`, `realign`, `full_sample`, and `complexity` for code the analyses cannot settle.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from typing import Final

from openbell.agents.strategy_code.bindings import Bindings
from openbell.agents.strategy_code.escapes import FUNCTION_TAKERS, imports
from openbell.agents.strategy_code.index_proof import IndexProof
from openbell.agents.strategy_code.taint import Data, Taint
from openbell.agents.strategy_code.vocabulary import (
    BACKFILLS,
    BACKWARD_METHODS,
    BUILTIN_STATS,
    CHECKED,
    DUPLICATES,
    FULL_SAMPLE_STATS,
    GROUP_CAUSAL,
    INDEXERS,
    LATER_ROWS,
    PERIODS,
    REVERSERS,
)

Found = tuple[int, str, str]
_RELABELLERS: Final = ("reset_index", "set_axis", "set_index", "rename", "to_timestamp")
_WINDOW_HINT: Final = "use .rolling(n) with a fixed n, .iloc[-n:] or .tail(n)"
#: Methods that read one value of a series: at a fixed row of a running statistic, a statistic of
#: the whole history.
_ONE_VALUE: Final = frozenset({"item", "squeeze", "get", "asof", "xs", "at_time"})
_Handler = Callable[[ast.Call, str, list[ast.expr], Data], None]


class LookAheadRules:
    """The look-ahead rules over one module (see `lookahead.py`)."""

    def __init__(self, tree: ast.Module, entry: str) -> None:
        self.tree = tree
        self.imports = imports(tree)
        self.bindings = Bindings(tree, entry)
        self.indexes = IndexProof(self.bindings)
        self.taint = Taint(self.bindings, self.indexes, self.imports)
        self.parent = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        self.found: list[Found] = []
        self._methods: dict[str, _Handler] = {
            **dict.fromkeys(PERIODS, self._periods),
            **dict.fromkeys(BACKFILLS, self._backfill),
            **dict.fromkeys(LATER_ROWS, self._later_rows),
            **dict.fromkeys(_RELABELLERS, self._relabel),
            **dict.fromkeys(("asof", "get", "xs"), self._label_lookup),
            **dict.fromkeys(FUNCTION_TAKERS, self._function_slot),
            "rolling": self._rolling,
            "resample": self._resample,
            "sort_index": self._sort_index,
            "take": self._take,
            "head": self._head,
            "truncate": self._truncate,
            "reverse": self._reverse,
            "sample": self._reverse,
        }

    def check(self) -> Iterator[Found]:
        if not (self.indexes.settled and self.taint.settled):
            self._refuse(self.tree, "complexity", "names and helpers chained too deeply to check")
            return iter(self.found)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                self._subscript(node)
            elif isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, ast.Attribute):
                self._attribute(node)
            elif isinstance(node, ast.Name) and node.id in BUILTIN_STATS:
                self._reference(node, node.id)
            elif isinstance(node, ast.BinOp | ast.Compare):
                self._combination(node)
        return iter(self.found)

    def _refuse(self, node: ast.AST, rule: str, message: str) -> None:
        self.found.append((getattr(node, "lineno", 1), rule, message))

    def _rows_of(self, node: ast.expr) -> Data | None:
        """The rows `node` holds, when it is a series, frame or array (not a dict or list of
        them)."""
        value = self.taint.value(node)
        return value if isinstance(value, Data) else None

    def _unbounded(self, node: ast.expr) -> bool:
        found = self._rows_of(node)
        return found is not None and _whole(found)

    # -- rows ------------------------------------------------------------------------------

    def _subscript(self, node: ast.Subscript) -> None:
        if self._rows_of(node.value) is None:
            return
        indexer = node.value.attr if isinstance(node.value, ast.Attribute) else None
        indexer = indexer if indexer in INDEXERS else None
        index = node.slice
        if indexer is not None and isinstance(index, ast.Tuple) and index.elts:
            index = index.elts[0]  # df.iloc[row, column]: the row is first
        shown = f"{'.' + indexer if indexer else ''}[{ast.unparse(index)}]"
        if isinstance(index, ast.Slice):
            problem = self.indexes.slice_problem(index, inclusive=indexer in ("loc", "at"))
            if problem is not None:
                self._refuse(node, problem[0], f"{shown}: {problem[1]}")
        elif _minus_zero(index):
            self._refuse(node, "future_index", f"{shown} is the first row, not the last")
        else:
            self._positions(node, index, shown)
            self._running_at(node, index, shown)

    def _running_at(self, node: ast.AST, index: ast.expr, shown: str) -> None:
        """A running statistic (`cummax()`, `expanding().max()`) read at a fixed row, not the
        loop's: at the last row it is the statistic of the whole history (`close.max()`)."""
        data = self._rows_of(node.value) if isinstance(node, ast.Subscript) else None
        if data is None or not data.cumulative or data.groups:
            return
        if self.indexes.row_variables(index):
            return
        self._refuse(node, "full_sample", f"{shown} of a running statistic (cum*, expanding) is "
                     f"a statistic of every row up to it, the whole history at the last row; "
                     f"{_WINDOW_HINT}")  # fmt: skip

    def _positions(self, node: ast.AST, index: ast.expr, shown: str) -> None:
        """Refuse any row in `index` (one, a list, a mask) not at or before the current row,
        and a list of rows the check cannot see is in order."""
        display = isinstance(index, ast.List | ast.Tuple)
        for part in index.elts if isinstance(index, ast.List | ast.Tuple) else [index]:
            problem = self.indexes.at_or_before(part)
            if problem is not None:
                self._refuse(node, "future_index", f"{shown} {problem}")
        from_data = self.taint.data(index) is not None
        if not (display or from_data or self.indexes.many(index)):
            return
        if not display:
            for variable in self.indexes.row_variables(index)[:1]:
                self._refuse(
                    node, "future_index", f"{shown}: rows picked by a mask or list built from "
                    f"{variable} may be later ones"
                )  # fmt: skip
        if not from_data and not self.indexes.in_order(index):
            self._refuse(node, "reversed", f"{shown}: rows picked by a list not seen in order")

    # -- calls -----------------------------------------------------------------------------

    def _call(self, node: ast.Call) -> None:
        self._keywords(node)
        func, arguments = node.func, list(node.args)
        if isinstance(func, ast.Name):
            origin = self.imports.get(func.id)
            if origin is not None and "." in origin:  # from statistics import mean
                self._function(node, origin.rsplit(".", 1)[-1], arguments)
            elif not self.bindings.function_of(func):
                self._builtin(node, func.id, arguments)
        elif isinstance(func, ast.Attribute) and self.taint.is_module(func.value):
            if _names_a_class(func.value) and arguments:  # pd.Series.shift(close, -1)
                self._method(node, arguments[0], func.attr, arguments[1:])
            else:
                self._function(node, func.attr, arguments)
        elif isinstance(func, ast.Attribute):
            self._method(node, func.value, func.attr, arguments)

    def _keywords(self, node: ast.Call) -> None:
        """Keywords that choose a direction: `method`, `limit_area`, `direction`, `keep`."""
        parts = [node.func, *node.args, *(keyword.value for keyword in node.keywords)]
        touches_data = any(self.taint.data(part) is not None for part in parts)
        called = _called(node)
        for keyword in node.keywords:
            value = keyword.value
            literal = value.value if isinstance(value, ast.Constant) else ...
            if keyword.arg == "method" and (
                literal in BACKWARD_METHODS or (literal is ... and touches_data)
            ):
                self._refuse(node, "backfill", f"method={ast.unparse(value)} fills from later rows")
            elif keyword.arg == "limit_area" and literal is not None:
                self._refuse(node, "backfill", "limit_area fills depending on later rows")
            elif keyword.arg == "direction" and literal != "backward":
                self._refuse(node, "backfill", "only direction='backward' looks at earlier rows")
            elif keyword.arg == "keep" and literal != "first" and called in DUPLICATES:
                self._refuse(node, "backfill", "keep= other than 'first' looks at later rows")
        hidden = any(isinstance(part, ast.Starred) for part in node.args) or any(
            keyword.arg is None for keyword in node.keywords
        )
        if hidden and touches_data and called in CHECKED:
            self._refuse(node, CHECKED[called], f".{called}(*args, **kwargs) hides arguments")

    def _method(
        self, node: ast.Call, receiver: ast.expr, name: str, arguments: list[ast.expr]
    ) -> None:
        data = self._rows_of(receiver)
        if data is None:
            if name in FULL_SAMPLE_STATS and any(self._unbounded(a) for a in arguments):
                self._refuse(node, "full_sample", f".{name}(...) of the whole history")
            return
        if name in FULL_SAMPLE_STATS and _whole(data):
            self._refuse(node, "full_sample", _stat_message(name))
        elif name in _ONE_VALUE and data.cumulative and not data.groups:
            self._refuse(
                node,
                "full_sample",
                f".{name}() of a running statistic (cum*, expanding) is a statistic of the "
                f"whole history; {_WINDOW_HINT}",
            )
        if data.groups and name == "transform":
            self._refuse(node, "full_sample", ".transform() gives each row a value computed "
                         "from its whole group or bin, later rows included")  # fmt: skip
        elif data.groups and not data.windowed and name not in GROUP_CAUSAL:
            self._refuse(node, "full_sample", f"groupby(...).{name}() uses each group's later "
                         "rows; use cumulative methods (cumsum, cummax, shift, ...)")  # fmt: skip
        handler = self._methods.get(name)
        if handler is not None:
            handler(node, name, arguments, data)

    def _periods(self, node: ast.Call, name: str, arguments: list[ast.expr], _: Data) -> None:
        given = _argument(node, arguments, "periods", 0)
        for value in given.elts if isinstance(given, ast.List | ast.Tuple) else [given]:
            if value is None or self.indexes.nonneg(value):
                continue
            shown = ast.unparse(value)
            if self.indexes.negative(value):
                self._refuse(node, "negative_shift", f".{name}({shown}) reads later rows")
            else:
                self._refuse(node, "negative_shift", f".{name}({shown}): the period must be an "
                             "integer the check can see is >= 0")  # fmt: skip
        position = PERIODS[name]
        freq = None if position is None else _argument(node, arguments, "freq", position)
        if freq is not None and not (
            isinstance(freq, ast.Constant) and isinstance(freq.value, str) and "-" not in freq.value
        ):
            self._refuse(node, "negative_shift", f".{name}(freq=...) must be a literal forward "
                         "offset such as '1D'")  # fmt: skip

    def _backfill(self, node: ast.Call, name: str, _arguments: list[ast.expr], _: Data) -> None:
        self._refuse(node, "backfill", f".{name}() fills rows from later rows")

    def _later_rows(self, node: ast.Call, name: str, _arguments: list[ast.expr], _: Data) -> None:
        rule, why = LATER_ROWS[name]
        self._refuse(node, rule, f".{name}() {why}")

    def _rolling(self, node: ast.Call, _name: str, arguments: list[ast.expr], _: Data) -> None:
        center = _argument(node, arguments, "center", 2)  # rolling(window, min_periods, center)
        if center is not None and not _false(center):
            self._refuse(node, "centered_window", "a centred rolling window sees later rows")

    def _resample(self, node: ast.Call, _name: str, arguments: list[ast.expr], _: Data) -> None:
        label = _argument(node, arguments, "label", 2)  # resample(rule, closed, label)
        if not (isinstance(label, ast.Constant) and label.value == "right"):
            self._refuse(node, "future_bin", "resample needs label='right': a bin labelled at "
                         "its start holds later rows")  # fmt: skip

    def _sort_index(self, node: ast.Call, _name: str, _arguments: list[ast.expr], _: Data) -> None:
        ascending = _argument(node, [], "ascending", 0)
        if ascending is not None and not (
            isinstance(ascending, ast.Constant) and ascending.value is True
        ):
            self._refuse(node, "reversed", "sort_index(ascending=...) may reverse the rows")

    def _reverse(self, node: ast.Call, name: str, _arguments: list[ast.expr], _: Data) -> None:
        self._refuse(node, "reversed", f".{name}() reorders the rows")

    def _relabel(self, node: ast.Call, name: str, arguments: list[ast.expr], data: Data) -> None:
        """`reset_index`, `set_axis`, `rename`, `to_timestamp`: new labels for the rows."""
        if name == "reset_index":
            moved = data.dropped
        elif name == "set_axis":
            axis = _argument(node, arguments, "axis", 1)
            columns = isinstance(axis, ast.Constant) and axis.value in (1, "columns")
            labels = _argument(node, arguments, "labels", 0)
            moved = not columns and (data.dropped or not _plain_index(labels))
        elif name == "rename":
            first = _argument(node, arguments, "index", 0)
            moved = first is not None and not isinstance(first, ast.Constant)
        elif name == "set_index":
            keys = _argument(node, arguments, "keys", 0)
            named = keys.elts if isinstance(keys, ast.List | ast.Tuple) else [keys]
            moved = not all(isinstance(column, ast.Constant) for column in named)
        else:
            how = _argument(node, arguments, "how", 1)
            moved = not (isinstance(how, ast.Constant) and how.value in ("end", "e", "E"))
        if moved:
            self._refuse(node, "realign", _realign_message(f".{name}()"))

    def _label_lookup(self, node: ast.Call, name: str, arguments: list[ast.expr], _: Data) -> None:
        if arguments:
            self._positions(node, arguments[0], f".{name}({ast.unparse(arguments[0])})")

    def _take(self, node: ast.Call, _name: str, arguments: list[ast.expr], _: Data) -> None:
        indices = _argument(node, arguments, "indices", 0)
        if indices is not None:
            self._positions(node, indices, f".take({ast.unparse(indices)})")

    def _head(self, node: ast.Call, _name: str, arguments: list[ast.expr], _: Data) -> None:
        count = _argument(node, arguments, "n", 0)
        problem = None if count is None else self.indexes.at_or_before(count, inclusive_of=1)
        if count is not None and problem is not None:
            self._refuse(node, "future_index", f".head({ast.unparse(count)}) {problem}")

    def _truncate(self, node: ast.Call, _name: str, arguments: list[ast.expr], _: Data) -> None:
        before = _argument(node, arguments, "before", 0)
        if before is not None and _argument(node, arguments, "after", 1) is None:
            for variable in self.indexes.row_variables(before)[:1]:
                self._refuse(node, "future_index", f".truncate(before=...) from {variable} keeps "
                             "the rows after it")  # fmt: skip

    def _function_slot(
        self, node: ast.Call, name: str, _arguments: list[ast.expr], data: Data
    ) -> None:
        """`close.agg("max")`, `close.apply(np.max)`, `close.pipe(max)`: the function named
        is applied to every row of the receiver (a window's are bounded)."""
        if data.windowed:
            return
        for part in _slot_parts(node):
            called = None
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                called = part.value
            elif isinstance(part, ast.Name | ast.Attribute):
                called = part.id if isinstance(part, ast.Name) else part.attr
            shown = f".{name}({ast.unparse(part)})"
            if called in FULL_SAMPLE_STATS or called in BUILTIN_STATS:
                self._refuse(node, "full_sample", f"{shown} is .{called}() of the whole history")
            elif called in CHECKED:
                self._refuse(node, CHECKED[called], f"{shown} hides .{called}()'s arguments")

    def _function(self, node: ast.Call, name: str, arguments: list[ast.expr]) -> None:
        """A module function (`np.max`, `statistics.mean`, `pd.Series`) given rows."""
        given = [*arguments, *(keyword.value for keyword in node.keywords)]
        if not any(self.taint.data(part) is not None for part in given):
            return
        shown = ast.unparse(node.func)
        if name in FULL_SAMPLE_STATS and any(self._unbounded(part) for part in given):
            self._refuse(node, "full_sample", f"{shown}(...) over the whole history; take a "
                         "trailing window first")  # fmt: skip
        if name in REVERSERS:
            self._refuse(node, "reversed", f"{shown}() reverses the rows")
        elif name in LATER_ROWS:
            rule, why = LATER_ROWS[name]
            self._refuse(node, rule, f"{shown}() {why}")
        elif name == "convolve":
            mode = _argument(node, arguments, "mode", 2)
            if mode is not None and not (isinstance(mode, ast.Constant) and mode.value == "full"):
                self._refuse(node, "centered_window", f"{shown}(mode=...) reads later rows")
        elif name in ("Series", "DataFrame", "Index"):
            data = _argument(node, arguments, "data", 0)
            first = None if data is None else self.taint.data(data)
            index = _argument(node, arguments, "index", 1)
            moved = index is not None and not _plain_index(index)
            if first is not None and first.positional and (first.dropped or moved):
                self._refuse(node, "realign", _realign_message(f"{shown}(...)"))
        elif name == "concat" and any(
            keyword.arg == "ignore_index" and not _false(keyword.value) for keyword in node.keywords
        ):
            parts = [part for part in ast.walk(arguments[0]) if isinstance(part, ast.expr)]
            if any((found := self.taint.data(part)) and found.dropped for part in parts):
                self._refuse(node, "realign", _realign_message(f"{shown}(ignore_index=True)"))

    def _builtin(self, node: ast.Call, name: str, arguments: list[ast.expr]) -> None:
        if name in BUILTIN_STATS and len(arguments) == 1 and self._unbounded(arguments[0]):
            self._refuse(node, "full_sample", f"{name}(...) over the whole history; take a "
                         "trailing window first")  # fmt: skip
        elif name == "reversed" and arguments and self._rows_of(arguments[0]) is not None:
            self._refuse(node, "reversed", "reversed() reverses the rows")

    # -- references and combinations -------------------------------------------------------

    def _attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Store):
            if node.attr == "index" and self.taint.data(node.value) is not None:
                self._refuse(node, "realign", _realign_message("assigning .index"))
            return
        parent = self.parent.get(id(node))
        called = isinstance(parent, ast.Call) and parent.func is node
        if self.taint.is_module(node.value):
            if node.attr in FULL_SAMPLE_STATS and not called:
                self._reference(node, ast.unparse(node))
            return
        if self._rows_of(node.value) is None:
            return
        if node.attr in FULL_SAMPLE_STATS and self._unbounded(node.value):
            self._refuse(node, "full_sample", _stat_message(node.attr))
        elif node.attr in CHECKED and not called:
            self._refuse(node, CHECKED[node.attr], f".{node.attr} held in a name: its "
                         "arguments cannot be checked; call it")  # fmt: skip

    def _reference(self, node: ast.expr, shown: str) -> None:
        """A statistic function used as a value (`f = np.max`, `map(max, ...)`): refused unless
        passed to a call that touches no unbounded rows."""
        parent = self.parent.get(id(node))
        if isinstance(parent, ast.keyword):
            parent = self.parent.get(id(parent))
        local = isinstance(node, ast.Name) and self.bindings.key(node)[0] != id(self.tree)
        if local or (isinstance(parent, ast.Call) and parent.func is node):
            return
        if isinstance(parent, ast.Call):
            if isinstance(parent.func, ast.Attribute) and parent.func.attr in FUNCTION_TAKERS:
                return  # judged with the receiver (`_function_slot`)
            others = [*parent.args, *(keyword.value for keyword in parent.keywords)]
            if not any(self._unbounded(part) for part in others if part is not node):
                return
        self._refuse(node, "full_sample", f"{shown} held in a name or passed on: the check "
                     "cannot see what it reduces; call it on a window")  # fmt: skip

    def _combination(self, node: ast.BinOp | ast.Compare) -> None:
        if isinstance(node, ast.BinOp):
            parts = [node.left, node.right]
            if isinstance(node.op, ast.MatMult):
                if any(self._unbounded(part) for part in parts):
                    self._refuse(node, "full_sample", "@ multiplies over the whole history")
                return
        else:
            parts = [node.left, *node.comparators]
        data = [found for part in parts if (found := self.taint.data(part)) is not None]
        shifted = any(found.positional and found.dropped for found in data)
        if shifted and any(not found.positional for found in data):
            self._refuse(node, "realign", _realign_message("aligning it with a series"))


def _whole(data: Data) -> bool:
    """Whether a reduction of `data` sees the whole history: rows not bounded by a window, or
    any rows of a running statistic (its last row already holds every earlier one)."""
    return not data.windowed or (data.cumulative and not data.groups)


def _stat_message(name: str) -> str:
    return f".{name}() over the whole history; {_WINDOW_HINT}"


def _realign_message(how: str) -> str:
    return (
        f"{how} re-labels rows (after dropping the first ones, or by moved labels), so later "
        "rows take earlier rows' places: a shift backwards; use .shift(k) or .pct_change()"
    )


def _argument(
    node: ast.Call, arguments: list[ast.expr], name: str, position: int
) -> ast.expr | None:
    """The argument `name`, given by keyword or at `position` among `arguments`."""
    for keyword in node.keywords:
        if keyword.arg == name:
            return keyword.value
    return arguments[position] if len(arguments) > position else None


def _slot_parts(node: ast.Call) -> Iterator[ast.expr]:
    """The functions named in x.agg(...): strings and references, in lists, tuples, dicts."""
    stack = [*node.args[:1], *(k.value for k in node.keywords if k.arg not in ("axis", "args"))]
    while stack:
        part = stack.pop()
        if isinstance(part, ast.List | ast.Tuple):
            stack.extend(part.elts)
        elif isinstance(part, ast.Dict):
            stack.extend(part.values)
        else:
            yield part


def _called(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return node.func.id if isinstance(node.func, ast.Name) else None


def _names_a_class(node: ast.expr) -> bool:
    """`pd.Series`, `np.ndarray`, `Series`: a class whose methods are called unbound."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name[:1].isupper() or name == "ndarray"


def _plain_index(node: ast.expr | None) -> bool:
    """`x.index`: labels as they are, not moved or sliced."""
    return isinstance(node, ast.Attribute) and node.attr == "index"


def _false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and not node.value


def _minus_zero(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and node.operand.value == 0
    )
