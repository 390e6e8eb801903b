"""What each name and expression of a strategy holds: bar data, the bars mapping, or neither.

This module owns `Taint`, a fixpoint over the binding sites of `bindings.py` in a small value
domain:

- `Data`: a series, frame, array or list that holds rows of the bars, with five flags:
  `windowed` (a window object or a bounded trailing slice: a reduction over it sees a bounded
  number of the latest rows), `dropped` (rows were dropped from the front or by a mask: a slice
  from a later row, `tail`, `dropna`, `np.diff`), `positional` (a numpy array or a list: no
  labels, so it aligns by position) and `groups` (a `rolling`, `expanding`, `ewm` or `resample`
  window, or a `groupby`: a reduction on it gives one value per row, bin or group) and
  `cumulative` (a running statistic: `cum*`, an `expanding` window or what it reduces to, a
  `rolling` window whose length the check cannot bound; its value at a fixed row is a statistic
  of every row up to that one, and at the last row of the whole history).
- `Keyed(value)`: a dict from keys to `value` (the bars: symbol -> Data). Iterating it, sorting
  it or taking its length gives the keys, which are `Clean`.
- `Seq(element)`: a collection over symbols, not rows (`bars.values()`, a list comprehension of
  one series per symbol); iterating it gives `element`.
- `Tup(parts)`: a tuple or list display, kept apart for unpacking (`for symbol, frame in ...`).
- `Clean`: anything else: numbers, symbol keys, one row or one value of a series, a statistic,
  per-symbol scalars (ranking the symbols' latest momentum is not look-ahead).

A comprehension or loop over the rows of a series (not over symbols) is itself a pass over
every row: its result is `Data`. Parameters get the values of the arguments at every call
(`bindings.py`), so a helper called with per-symbol scalars computes on scalars.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import Final

from openbell.agents.strategy_code.bindings import Bindings, How, Key, Site, solve
from openbell.agents.strategy_code.index_proof import IndexProof
from openbell.agents.strategy_code.vocabulary import (
    BUILTIN_STATS,
    CUMULATIVE,
    FULL_SAMPLE_STATS,
    WINDOWS,
)

_CLEAN_ATTRIBUTES: Final = frozenset(
    {"shape", "size", "ndim", "dtype", "dtypes", "empty", "name", "names", "columns", "tz",
     "freq", "nlevels", "itemsize", "nbytes"}
)  # fmt: skip
_POSITIONAL_METHODS: Final = frozenset({"to_numpy", "tolist", "to_list"})
_DROPPING_METHODS: Final = frozenset({"dropna", "drop_duplicates", "drop", "compress"})
_RELABELLING_METHODS: Final = frozenset({"reset_index", "set_axis"})
_SCALAR_BUILTINS: Final = frozenset(
    {"len", "float", "int", "bool", "str", "round", "abs", "isinstance", "divmod", "pow", "print"}
)
_COLLECTION_BUILTINS: Final = frozenset({"list", "tuple", "set", "frozenset", "iter", "sorted",
                                         "reversed"})  # fmt: skip
_DEPTH: Final = 3


@dataclass(frozen=True, slots=True)
class Clean:
    """Holds no rows of the bars."""


@dataclass(frozen=True, slots=True)
class Data:
    """Rows of the bars (see the module docstring for the flags)."""

    windowed: bool = False
    dropped: bool = False
    positional: bool = False
    groups: bool = False  # a window or a groupby: its methods give one value per row or group
    cumulative: bool = False  # a running statistic: at a fixed row, one of every row before


@dataclass(frozen=True, slots=True)
class Keyed:
    """A dict from keys to `value`."""

    value: Value


@dataclass(frozen=True, slots=True)
class Seq:
    """A collection over symbols whose elements are `element`."""

    element: Value


@dataclass(frozen=True, slots=True)
class Tup:
    """A tuple or list display."""

    parts: tuple[Value, ...]


Value = Clean | Data | Keyed | Seq | Tup
CLEAN: Final = Clean()


def has_data(value: Value | None) -> bool:
    """Whether `value` holds rows of the bars anywhere."""
    if isinstance(value, Data):
        return True
    if isinstance(value, Keyed):
        return has_data(value.value)
    if isinstance(value, Seq):
        return has_data(value.element)
    if isinstance(value, Tup):
        return any(has_data(part) for part in value.parts)
    return False


def flatten(value: Value | None) -> Value:
    """`Clean`, or one `Data` standing for every row `value` holds."""
    leaves = list(_data_leaves(value))
    if not leaves:
        return CLEAN
    return Data(
        windowed=all(leaf.windowed for leaf in leaves),
        dropped=any(leaf.dropped for leaf in leaves),
        positional=all(leaf.positional for leaf in leaves),
        cumulative=any(leaf.cumulative for leaf in leaves),
    )  # a result of combining groups is no group any more


def join(a: Value | None, b: Value | None) -> Value | None:
    if a is None or b is None:
        return a if b is None else b
    if a == b or isinstance(b, Clean):
        return a
    if isinstance(a, Clean):
        return b
    if isinstance(a, Data) and isinstance(b, Data):
        return Data(
            windowed=a.windowed and b.windowed,
            dropped=a.dropped or b.dropped,
            positional=a.positional and b.positional,
            cumulative=a.cumulative or b.cumulative,
        )
    if isinstance(a, Keyed) and isinstance(b, Keyed):
        return Keyed(join(a.value, b.value) or CLEAN)
    if isinstance(a, Seq) and isinstance(b, Seq):
        return Seq(join(a.element, b.element) or CLEAN)
    if isinstance(a, Tup) and isinstance(b, Tup) and len(a.parts) == len(b.parts):
        return Tup(tuple(join(x, y) or CLEAN for x, y in zip(a.parts, b.parts, strict=True)))
    return flatten(Tup((a, b)))


def element(value: Value) -> Value:
    """What iterating `value` gives."""
    if isinstance(value, Seq):
        return value.element
    if isinstance(value, Keyed):
        return CLEAN  # the keys
    if isinstance(value, Tup):
        found: Value | None = None
        for part in value.parts:
            found = join(found, part)
        return found or CLEAN
    return value


def project(value: Value, path: tuple[int, ...]) -> Value:
    """The part of `value` an unpacking target at `path` receives."""
    for step in path:
        if isinstance(value, Tup) and 0 <= step < len(value.parts):
            value = value.parts[step]
        elif step == -1:  # a starred target: a list of the rest
            value = value if not isinstance(value, Keyed) else CLEAN
        else:
            value = element(value)
    return value


def _data_leaves(value: Value | None) -> list[Data]:
    if isinstance(value, Data):
        return [value]
    if isinstance(value, Keyed):
        return _data_leaves(value.value)
    if isinstance(value, Seq):
        return _data_leaves(value.element)
    if isinstance(value, Tup):
        return [leaf for part in value.parts for leaf in _data_leaves(part)]
    return []


def _depth(value: Value) -> int:
    if isinstance(value, Keyed):
        return 1 + _depth(value.value)
    if isinstance(value, Seq):
        return 1 + _depth(value.element)
    if isinstance(value, Tup):
        return 1 + max((_depth(part) for part in value.parts), default=0)
    return 0


class Taint:
    """The value of every name, and of any expression, in one module."""

    def __init__(self, bindings: Bindings, indexes: IndexProof, imports: dict[str, str]) -> None:
        self.bindings = bindings
        self.indexes = indexes
        self.imports = imports  # what the names imports bind stand for (np -> numpy)
        self._with_sites = {site.key for site in bindings.sites}
        self.env: dict[Key, Value] = {}
        self._memo: dict[int, Value] | None = None
        self.settled = solve(bindings, bindings.sites, self.env, self._bounded_site, join, _keep)
        self._memo = {}  # the names are solved: an expression's value no longer changes

    def data(self, node: ast.expr) -> Data | None:
        """The rows `node` holds as one `Data`, or None when it holds none."""
        value = self.value(node)
        found = value if isinstance(value, Data) else flatten(value)
        return found if isinstance(found, Data) else None

    def unbounded(self, node: ast.expr) -> bool:
        """Whether `node` holds rows of the bars not bounded by a window."""
        found = self.data(node)
        return found is not None and not found.windowed

    def is_module(self, node: ast.expr) -> bool:
        """`np`, `pd.Series`, `np.linalg`: an attribute chain rooted at an imported module."""
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.imports

    # -- expressions -----------------------------------------------------------------------

    def value(self, node: ast.expr) -> Value:
        """What `node` holds (`Clean` while the fixpoint has not reached its names)."""
        if self._memo is None:
            return self._value(node)
        if id(node) not in self._memo:
            self._memo[id(node)] = self._value(node)
        return self._memo[id(node)]

    def _value(self, node: ast.expr) -> Value:  # noqa: C901
        if isinstance(node, ast.Name):
            return self._name(node) or CLEAN
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Tuple | ast.List):
            return Tup(tuple(self.value(part) for part in node.elts))
        if isinstance(node, ast.Set):
            return self._collection([self.value(part) for part in node.elts])
        if isinstance(node, ast.Dict):
            keys = [self.value(key) for key in node.keys if key is not None]
            if any(has_data(key) for key in keys):
                return flatten(Tup(tuple(keys)))
            found = self._collection([self.value(part) for part in node.values])
            return Keyed(found.element) if isinstance(found, Seq) else CLEAN
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            return self._comprehension(node)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                return CLEAN  # a dot product (see the rules)
            return flatten(Tup((self.value(node.left), self.value(node.right))))
        if isinstance(node, ast.Compare):
            if all(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
                return CLEAN
            parts = (node.left, *node.comparators)
            return flatten(Tup(tuple(self.value(part) for part in parts)))
        if isinstance(node, ast.BoolOp):
            return flatten(Tup(tuple(self.value(part) for part in node.values)))
        if isinstance(node, ast.UnaryOp):
            return self.value(node.operand)
        if isinstance(node, ast.IfExp):
            return join(self.value(node.body), self.value(node.orelse)) or CLEAN
        if isinstance(node, ast.NamedExpr | ast.Starred):
            return self.value(node.value)
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return Data()  # whatever is sent into the generator
        return CLEAN

    def _name(self, node: ast.Name) -> Value | None:
        key = self.bindings.key(node)
        if key in self.env:
            return self.env[key]
        return None if key in self._with_sites else CLEAN

    def _attribute(self, node: ast.Attribute) -> Value:
        base = self.value(node.value)
        if not isinstance(base, Data):
            return base if has_data(base) else CLEAN
        if node.attr in _CLEAN_ATTRIBUTES:
            return CLEAN
        if node.attr in ("values", "array"):
            return replace(base, positional=True)
        return base

    def _subscript(self, node: ast.Subscript) -> Value:
        base = self.value(node.value)
        index = node.slice
        if isinstance(base, Keyed):
            return base.value
        if isinstance(base, Seq):
            return base if isinstance(index, ast.Slice) else base.element
        if isinstance(base, Tup):
            position = index.value if isinstance(index, ast.Constant) else None
            if isinstance(position, int) and -len(base.parts) <= position < len(base.parts):
                return base.parts[position]
            return element(base) if not isinstance(index, ast.Slice) else base
        if not isinstance(base, Data):
            return CLEAN
        indexer = node.value.attr if isinstance(node.value, ast.Attribute) else None
        if indexer in ("iloc", "loc", "iat", "at") and isinstance(index, ast.Tuple) and index.elts:
            index = index.elts[0]  # [rows, columns]
        if isinstance(index, ast.Slice):
            trailing = self.indexes.trailing(index)
            return replace(
                base,
                windowed=base.windowed or trailing,
                dropped=base.dropped or not self.indexes.starts_at_first(index),
            )
        if self._one_row(indexer, index):
            return CLEAN
        many = isinstance(index, ast.List | ast.Tuple) or has_data(self.value(index))
        return replace(base, dropped=base.dropped or many)

    def _one_row(self, indexer: str | None, index: ast.expr) -> bool:
        """Whether `x.iloc[index]` (or `x.loc`, `x[...]`) is one row or one value."""
        if isinstance(index, ast.List | ast.Tuple | ast.Set) or has_data(self.value(index)):
            return False
        if self.indexes.many(index):
            return False
        if indexer in ("iloc", "iat", "at"):
            return True
        if indexer == "loc":  # a label: a date string, a timestamp, a key
            return not (isinstance(index, ast.Constant) and index.value is None)
        return self.indexes.single(index)

    def _collection(self, values: list[Value]) -> Value:
        found: Value | None = None
        for value in values:
            found = join(found, value)
        return Seq(found) if found is not None and has_data(found) else CLEAN

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> Value:
        scanned = [self.value(generator.iter) for generator in node.generators]
        rows = [value for value in scanned if isinstance(value, Data)]
        if rows:  # a pass over the rows of a series
            return Data(windowed=all(row.windowed for row in rows), positional=True)
        if isinstance(node, ast.DictComp):
            if has_data(self.value(node.key)):
                return flatten(self.value(node.key))
            found = self.value(node.value)
            return Keyed(found) if has_data(found) else CLEAN
        found = self.value(node.elt)
        return Seq(found) if has_data(found) else CLEAN

    # -- calls -----------------------------------------------------------------------------

    def _call(self, node: ast.Call) -> Value:
        arguments = [self.value(argument) for argument in node.args]
        arguments += [
            self.value(keyword.value) for keyword in node.keywords if keyword.arg != "key"
        ]
        if isinstance(node.func, ast.Name):
            return self._named_call(node, node.func.id, arguments)
        if isinstance(node.func, ast.Attribute):
            if self.is_module(node.func.value):
                return self._module_call(node.func.attr, arguments)
            return self._method(node, self.value(node.func.value), node.func.attr, arguments)
        return flatten(Tup((self.value(node.func), *arguments)))

    def _named_call(self, node: ast.Call, name: str, arguments: list[Value]) -> Value:
        functions = self.bindings.function_of(node.func)
        if functions:  # a helper: what it returns (solved with the names)
            found: Value | None = None
            for function in functions:
                found = join(found, self.env.get(self.bindings.return_key(function)))
            return found or CLEAN
        if name in self.imports:  # from statistics import mean
            return self._module_call(self.imports[name].rsplit(".", 1)[-1], arguments)
        return self._builtin_call(node, name, arguments)

    def _builtin_call(self, node: ast.Call, name: str, arguments: list[Value]) -> Value:
        first = arguments[0] if arguments else CLEAN
        if name in _SCALAR_BUILTINS or name == "range":
            return CLEAN
        if name in BUILTIN_STATS and len(node.args) == 1:
            return self._builtin_stat(name, first)
        if name in _COLLECTION_BUILTINS:
            if isinstance(first, Data):
                return replace(first, positional=True)
            return CLEAN if isinstance(first, Keyed) else first
        if name == "dict":
            if isinstance(first, Seq) and isinstance(first.element, Tup):
                return Keyed(first.element.parts[-1])
            return first if isinstance(first, Keyed) else flatten(first)
        if name in ("enumerate", "zip", "map", "filter"):
            if any(isinstance(argument, Data) for argument in arguments):
                return flatten(Tup(tuple(arguments)))
            if name == "enumerate":
                return Seq(Tup((CLEAN, element(first))))
            if name == "zip":
                return Seq(Tup(tuple(element(argument) for argument in arguments)))
            return self._collection([element(argument) for argument in arguments[1:]])
        return flatten(Tup((self.value(node.func), *arguments)))

    def _builtin_stat(self, name: str, first: Value) -> Value:
        if isinstance(first, Keyed | Clean):
            return CLEAN  # the keys
        if isinstance(first, Data):
            return replace(first, positional=True) if name == "sorted" else CLEAN
        inner = element(first)
        if name == "sorted":
            return Seq(inner) if has_data(inner) else CLEAN
        if name in ("max", "min") or (name == "sum" and has_data(inner)):
            return inner
        return CLEAN

    def _module_call(self, name: str, arguments: list[Value]) -> Value:
        found = flatten(Tup(tuple(arguments)))
        if not isinstance(found, Data):
            return CLEAN
        if name in FULL_SAMPLE_STATS and name not in ("sort", "argsort"):
            return CLEAN
        if name in ("asarray", "array", "diff", "ediff1d", "column_stack", "vstack", "stack"):
            return replace(found, positional=True, dropped=found.dropped or "diff" in name)
        if name in ("Series", "DataFrame", "concat"):
            return replace(found, positional=False)
        return found

    def _method(self, node: ast.Call, receiver: Value, name: str, arguments: list[Value]) -> Value:
        if isinstance(receiver, Keyed):
            if name == "keys":
                return CLEAN
            if name == "values":
                return Seq(receiver.value)
            if name == "items":
                return Seq(Tup((CLEAN, receiver.value)))
            if name in ("get", "pop", "setdefault"):
                return receiver.value
            return receiver if name == "copy" else flatten(receiver)
        if isinstance(receiver, Seq):
            if name in ("index", "count"):
                return CLEAN
            return receiver.element if name == "pop" else receiver
        if not isinstance(receiver, Data):
            found = flatten(Tup((receiver, *arguments)))
            return CLEAN if name in FULL_SAMPLE_STATS else found
        return self._data_method(node, receiver, name)

    def _data_method(self, node: ast.Call, receiver: Data, name: str) -> Value:
        if receiver.groups:  # one result per group (or per row, for transform and cum*)
            running = receiver.cumulative or name in CUMULATIVE
            return Data(dropped=receiver.dropped, cumulative=running)
        if name in FULL_SAMPLE_STATS:
            return CLEAN
        if name in WINDOWS:  # a running window over a bounded slice is bounded
            running = name == "expanding" or (name == "rolling" and not self._bounded_window(node))
            running = receiver.cumulative or (running and not receiver.windowed)
            return Data(windowed=True, groups=True, cumulative=running)
        if name in CUMULATIVE:
            return replace(receiver, cumulative=receiver.cumulative or not receiver.windowed)
        if name == "groupby":
            return replace(receiver, windowed=False, groups=True)
        if name == "tail":
            count = node.args[0] if node.args else None
            bounded = count is None or self.indexes.bounded_count(count)
            return replace(receiver, windowed=receiver.windowed or bounded, dropped=True)
        if name in _POSITIONAL_METHODS:
            return replace(receiver, positional=True)
        if name in _DROPPING_METHODS:
            return replace(receiver, dropped=True)
        if name in _RELABELLING_METHODS:
            return replace(receiver, dropped=False, positional=False)
        if name in ("item", "first_valid_index", "last_valid_index", "get_loc"):
            return CLEAN
        return receiver

    def _bounded_window(self, node: ast.Call) -> bool:
        """Whether a `rolling` call's window is a count the check can bound, or an offset such as
        `"30D"` (a window of time); `rolling(len(x))` is a running statistic."""
        window = node.args[0] if node.args else None
        for keyword in node.keywords:
            if keyword.arg == "window":
                window = keyword.value
        if window is None:
            return False
        if isinstance(window, ast.Constant) and isinstance(window.value, str):
            return True
        return self.indexes.bounded_count(window)

    # -- sites -----------------------------------------------------------------------------

    def _bounded_site(self, site: Site) -> Value | None:
        """A site's value, with containers nested past `_DEPTH` flattened (`x = [x]`)."""
        value = self._site(site)
        return flatten(value) if value is not None and _depth(value) > _DEPTH else value

    def _site(self, site: Site) -> Value | None:
        if site.how is How.ENTRY:
            return Keyed(Data())
        if site.how is How.RAISED:  # its arguments may be any series
            return Seq(Data())
        if site.how is How.UNKNOWN or site.source is None:
            return Data()
        value = self.value(site.source)
        if site.how is How.ELEMENT:
            return project(element(value), site.path)
        if site.how is How.STORE:
            if not has_data(value):
                return None
            return Keyed(value) if self.bindings.is_dict(site.key) else flatten(value)
        return project(value, site.path)


def _keep(_old: Value | None, new: Value) -> Value:
    """No widening: the values of the taint analysis are finitely many."""
    return new
