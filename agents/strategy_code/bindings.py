"""Where each name of a strategy's source is bound, scope by scope.

This module owns `Bindings`: one pass over the module that resolves every name to the scope that
binds it (the module, a function, a lambda or a comprehension, by Python's rules; `global` and
`nonlocal` are refused before this runs) and lists the sites that give it a value: an
assignment, a loop or comprehension target, an augmented assignment, a `with ... as`, a walrus,
a parameter (bound from the arguments of every call of its function), or a store into it
(`name[k] = v`, `name.attr = v`, `name.append(v)`). The analyses in `index_proof.py` and `taint.py`
evaluate these sites; nothing here judges the code.
"""

from __future__ import annotations

import ast
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final, TypeVar

#: A name in its binding scope: (id of the scope's node, name).
Key = tuple[int, str]
Function = ast.FunctionDef | ast.Lambda
_SCOPES: Final = (
    ast.Module, ast.FunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp,
)  # fmt: skip
_COMPREHENSIONS: Final = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
#: Container methods that put their arguments into the container they are called on.
MUTATORS: Final = frozenset(
    {"append", "extend", "insert", "add", "update", "setdefault", "appendleft", "extendleft"}
)
_STEPS_PER_SITE: Final = 40  # a fixpoint's budget: steps per site, plus `_STEPS`
_STEPS: Final = 1000
_WIDEN_AFTER: Final = 4  # changes of a value before one that still grows is widened
V = TypeVar("V")
#: Methods that call a function they are given on the receiver (or its parts).
FUNCTION_TAKERS: Final = frozenset({"agg", "aggregate", "apply", "transform", "pipe", "map"})


class How(Enum):
    """How a site gives its name a value."""

    VALUE = "value"  # name = source (path: where inside the source)
    ELEMENT = "element"  # for name in source (path: where inside one element)
    AUGMENT = "augment"  # name op= source
    ARGUMENT = "argument"  # a parameter, bound from an argument at one call of its function
    RECEIVER = "receiver"  # a parameter of a function applied to the source (x.apply(f))
    UNKNOWN = "unknown"  # a parameter of a function called where the check cannot see
    ENTRY = "entry"  # the strategy's one parameter: the bars
    RAISED = "raised"  # `except ... as name`: whatever was raised, carrying anything
    STORE = "store"  # name[k] = source, name.attr = source, name.append(source)


@dataclass(frozen=True, slots=True)
class Site:
    """One place that gives the name `key` a value."""

    key: Key
    how: How
    source: ast.expr | None = None
    path: tuple[int, ...] = ()


class Bindings:
    """Scopes, binding sites and functions of one module (see the module docstring)."""

    def __init__(self, tree: ast.Module, entry: str) -> None:
        self.tree = tree
        self.nodes = list(ast.walk(tree))
        self.sites: list[Site] = []
        self._scope: dict[int, ast.AST] = {}  # id(node) -> the scope its names resolve in
        self._parent_scope: dict[int, ast.AST | None] = {id(tree): None}
        self._bound: dict[int, set[str]] = defaultdict(set)
        self._functions: dict[Key, list[Function]] = defaultdict(list)
        self.by_key: dict[Key, list[Site]] = defaultdict(list)
        self._scope[id(tree)] = tree
        self._children(tree, tree, set())
        self._collect_functions()
        self._collect_sites(entry)

    # -- resolution ----------------------------------------------------------------------------

    def key(self, node: ast.Name) -> Key:
        """The binding scope of the name `node` reads or writes."""
        return self._resolve(self._scope.get(id(node), self.tree), node.id)

    def _resolve(self, start: ast.AST, name: str) -> Key:
        scope: ast.AST | None = start
        while scope is not None:
            if name in self._bound[id(scope)]:
                return (id(scope), name)
            scope = self._parent_scope[id(scope)]
        return (id(self.tree), name)

    def functions(self, key: Key) -> list[Function]:
        """The functions (defs, and lambdas assigned to the name) bound to `key`."""
        return self._functions.get(key, [])

    def function_of(self, node: ast.expr) -> list[Function]:
        """The functions an expression names: a lambda, or a name bound to functions."""
        if isinstance(node, ast.Lambda):
            return [node]
        if isinstance(node, ast.Name):
            return self.functions(self.key(node))
        return []

    def parameters(self, function: Function) -> list[Key]:
        """The keys of a function's positional and keyword parameters, in order."""
        arguments = function.args
        names = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        return [(id(function), argument.arg) for argument in names]

    def is_dict(self, key: Key) -> bool:
        """Whether every assignment to `key` is a dict (a display, a comprehension, dict())."""
        values = [site.source for site in self.by_key.get(key, []) if site.how is How.VALUE]
        return bool(values) and all(
            isinstance(value, ast.Dict | ast.DictComp)
            or (isinstance(value, ast.Call) and _called_name(value) == "dict")
            for value in values
        )

    def reads(self, site: Site) -> set[Key]:
        """The names (and helpers' return values) a site's value is computed from."""
        found: set[Key] = set()
        if site.source is None:
            return found
        for node in ast.walk(site.source):
            if isinstance(node, ast.Name):
                found.add(self.key(node))
            elif isinstance(node, ast.Call):
                found.update(self.return_key(function) for function in self.function_of(node.func))
        return found

    def return_key(self, function: Function) -> Key:
        """The pseudo-name of what `function` returns: a call's value is looked up, never
        evaluated through the callee (which would be exponential in nested helpers)."""
        return (id(function), "<return>")

    def returns(self, function: Function) -> Iterator[ast.expr]:
        """What a function gives back: its lambda body, or its `return` and `yield` values."""
        if isinstance(function, ast.Lambda):
            yield function.body
            return
        for node in _own_nodes(function):
            if isinstance(node, ast.Return | ast.Yield | ast.YieldFrom) and node.value is not None:
                yield node.value

    # -- the walk ------------------------------------------------------------------------------

    def _enter(self, node: ast.AST, scope: ast.AST) -> None:
        """Record that `node` resolves its names in `scope`, and walk it."""
        self._scope[id(node)] = scope
        if not isinstance(node, _SCOPES):
            self._children(node, scope, set())
            return
        self._parent_scope[id(node)] = scope
        self._bind_scope(node, scope)
        outside = _outside(node)  # defaults, a comprehension's first iterable
        for part in outside:
            self._enter(part, scope)
        self._children(node, node, {id(part) for part in outside})

    def _children(self, node: ast.AST, scope: ast.AST, skip: set[int]) -> None:
        for child in ast.iter_child_nodes(node):
            if id(child) in skip:
                continue
            if isinstance(child, ast.arguments | ast.comprehension):
                self._scope[id(child)] = scope
                self._children(child, scope, skip)
            else:
                self._enter(child, scope)

    def _bind_scope(self, node: ast.AST, enclosing: ast.AST) -> None:
        bound = self._bound[id(node)]
        if isinstance(node, ast.FunctionDef | ast.Lambda):
            arguments = node.args
            for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                bound.add(argument.arg)
            for star in (arguments.vararg, arguments.kwarg):
                if star is not None:
                    bound.add(star.arg)
        if isinstance(node, ast.FunctionDef):
            self._bound[id(enclosing)].add(node.name)
        if isinstance(node, _COMPREHENSIONS):
            for generator in node.generators:
                bound.update(_target_names(generator.target))

    def _collect_functions(self) -> None:
        for node in self.nodes:
            for name in _stored_names(node):
                owner = self._binding_scope(node, name)
                self._bound[id(owner)].add(name.id)
        for node in self.nodes:
            if isinstance(node, ast.FunctionDef):
                scope = self._parent_scope[id(node)] or self.tree
                self._functions[(id(scope), node.name)].append(node)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self._functions[self.key(target)].append(node.value)

    def _binding_scope(self, node: ast.AST, name: ast.Name) -> ast.AST:
        scope = self._scope.get(id(name)) or self._scope.get(id(node), self.tree)
        if isinstance(node, ast.NamedExpr):  # a walrus binds outside its comprehensions
            while isinstance(scope, _COMPREHENSIONS):
                scope = self._parent_scope[id(scope)] or self.tree
        return scope

    # -- sites ---------------------------------------------------------------------------------

    def _collect_sites(self, entry: str) -> None:
        stack: list[ast.AST] = [self.tree]
        while stack:  # in the order of the source, so a fixpoint's first round goes far
            node = stack.pop()
            self._sites_of(node)
            stack.extend(reversed(list(ast.iter_child_nodes(node))))
        self._parameter_sites(entry)
        for node in self.nodes:
            if isinstance(node, ast.FunctionDef | ast.Lambda):
                key = self.return_key(node)
                self.sites.extend(
                    Site(key=key, how=How.VALUE, source=r) for r in self.returns(node)
                )
        for site in self.sites:
            self.by_key[site.key].append(site)

    def _sites_of(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self._target(target, How.VALUE, node.value)
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            self._target(node.target, How.VALUE, node.value)
        elif isinstance(node, ast.AugAssign):
            how = How.AUGMENT if isinstance(node.target, ast.Name) else How.STORE
            self._target(node.target, how, node.value)
        elif isinstance(node, ast.For | ast.comprehension):
            self._target(node.target, How.ELEMENT, node.iter)
        elif isinstance(node, ast.With):
            for item in node.items:
                if item.optional_vars is not None:
                    self._target(item.optional_vars, How.VALUE, item.context_expr)
        elif isinstance(node, ast.Call):
            self._mutation(node)
        elif isinstance(node, ast.ExceptHandler) and node.name:  # may carry anything raised
            scope = self._scope.get(id(node), self.tree)
            self.sites.append(Site(key=self._resolve(scope, node.name), how=How.RAISED))

    def _mutation(self, node: ast.Call) -> None:
        """`name.append(v)` and the like store `v` into `name`."""
        if isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            root = _root_name(node.func.value)
            if root is not None:
                for part in [*node.args, *(keyword.value for keyword in node.keywords)]:
                    self.sites.append(Site(key=self.key(root), how=How.STORE, source=part))

    def _target(
        self, target: ast.expr, how: How, source: ast.expr, path: tuple[int, ...] = ()
    ) -> None:
        if isinstance(target, ast.Name):
            self.sites.append(Site(key=self.key(target), how=how, source=source, path=path))
        elif isinstance(target, ast.Tuple | ast.List):
            for index, element in enumerate(target.elts):
                step = -1 if isinstance(element, ast.Starred) else index
                self._target(element, how, source, (*path, step))
        elif isinstance(target, ast.Starred):
            self._target(target.value, how, source, path)
        elif isinstance(target, ast.Subscript | ast.Attribute):
            root = _root_name(target)
            if root is not None:
                self.sites.append(Site(key=self.key(root), how=How.STORE, source=source))

    def _parameter_sites(self, entry: str) -> None:
        """Bind every parameter from the arguments of every call the check can see; a function
        used any other way gets `UNKNOWN` parameters (treated as a series from the bars)."""
        uses: dict[int, int] = defaultdict(int)  # id(function) -> uses that are not seen calls
        for node in self.nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                for function in self.functions(self.key(node)):
                    uses[id(function)] += 1
        for node in self.nodes:
            if isinstance(node, ast.Call):
                for function in self.function_of(node.func):
                    uses[id(function)] -= 1
                    self._bind_call(function, node)
                self._bind_applied(node, uses)
        for node in self.nodes:
            if isinstance(node, ast.FunctionDef | ast.Lambda):
                self._bind_unseen(node, entry, uses.get(id(node), 0))

    def _bind_call(self, function: Function, call: ast.Call) -> None:
        keys = self.parameters(function)
        if any(isinstance(argument, ast.Starred) for argument in call.args) or any(
            keyword.arg is None for keyword in call.keywords
        ):
            for key in keys:
                self.sites.append(Site(key=key, how=How.UNKNOWN))
            return
        for key, argument in zip(keys, call.args, strict=False):
            self.sites.append(Site(key=key, how=How.ARGUMENT, source=argument))
        for keyword in call.keywords:
            self.sites.append(Site(key=(id(function), keyword.arg or ""), how=How.ARGUMENT,
                                   source=keyword.value))  # fmt: skip
        for key, default in _defaults(function):
            self.sites.append(Site(key=key, how=How.ARGUMENT, source=default))

    def _bind_applied(self, call: ast.Call, uses: dict[int, int]) -> None:
        """A function passed to x.apply(f) and the like gets x; to sorted(xs, key=f) or
        map(f, xs), an element of xs."""
        method = call.func.attr if isinstance(call.func, ast.Attribute) else None
        name = _called_name(call)
        applied: list[tuple[ast.expr, How, ast.expr]] = []
        if method in FUNCTION_TAKERS and isinstance(call.func, ast.Attribute):
            applied.extend((part, How.RECEIVER, call.func.value) for part in function_slot(call))
        elif name in ("sorted", "max", "min") and call.args:
            applied.extend(
                (keyword.value, How.ELEMENT, call.args[0])
                for keyword in call.keywords
                if keyword.arg == "key"
            )
        elif name in ("map", "filter") and len(call.args) >= 2:
            applied.append((call.args[0], How.ELEMENT, call.args[1]))
        for part, how, source in applied:
            for function in self.function_of(part):
                uses[id(function)] -= 1
                keys = self.parameters(function)
                if keys:
                    self.sites.append(Site(key=keys[0], how=how, source=source))
                for key in keys[1:]:
                    self.sites.append(Site(key=key, how=How.UNKNOWN))

    def _bind_unseen(self, function: Function, entry: str, unseen_uses: int) -> None:
        keys = self.parameters(function)
        star = [function.args.vararg, function.args.kwarg]
        keys += [(id(function), s.arg) for s in star if s is not None]
        if (
            isinstance(function, ast.FunctionDef)
            and function.name == entry
            and (function in self.tree.body)
        ):
            self.sites.extend(Site(key=key, how=How.ENTRY) for key in keys[:1])
            return
        never_called = not any(
            site.key in keys and site.how is not How.UNKNOWN for site in self.sites
        )
        if unseen_uses > 0 or never_called or star != [None, None]:
            self.sites.extend(Site(key=key, how=How.UNKNOWN) for key in keys)


def function_slot(call: ast.Call) -> list[ast.expr]:
    """The function argument(s) of x.agg(f), x.apply(f), x.pipe(f) ...: the first positional
    or `func=`, and the values of named aggregations."""
    found = [call.args[0]] if call.args else []
    found += [keyword.value for keyword in call.keywords if keyword.arg in ("func", "arg")]
    return found


def _defaults(function: Function) -> Iterator[tuple[Key, ast.expr]]:
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    for argument, default in zip(positional[::-1], arguments.defaults[::-1], strict=False):
        yield (id(function), argument.arg), default
    for argument, keyword_default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        if keyword_default is not None:
            yield (id(function), argument.arg), keyword_default


def _called_name(call: ast.Call) -> str | None:
    return call.func.id if isinstance(call.func, ast.Name) else None


def _root_name(node: ast.expr) -> ast.Name | None:
    """`a` in `a`, `a.b`, `a[k]`, `a.b[k].c`."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node if isinstance(node, ast.Name) else None


def _outside(node: ast.AST) -> list[ast.expr]:
    """The parts of a scope's node evaluated in the enclosing scope."""
    if isinstance(node, _COMPREHENSIONS):
        return [node.generators[0].iter]
    if isinstance(node, ast.FunctionDef | ast.Lambda):
        defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        decorators = node.decorator_list if isinstance(node, ast.FunctionDef) else []
        return [*decorators, *defaults]
    return []


def _target_names(target: ast.expr) -> Iterator[str]:
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            yield node.id


def _stored_names(node: ast.AST) -> Iterator[ast.Name]:
    """The plain names a statement or expression binds (assignments, loops, with, walrus)."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For | ast.NamedExpr):
        targets = [node.target]
    elif isinstance(node, ast.With):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    elif isinstance(node, ast.Import | ast.ImportFrom):
        for alias in node.names:
            name = ast.Name(id=(alias.asname or alias.name).split(".")[0], ctx=ast.Store())
            ast.copy_location(name, node)
            yield name
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield ast.Name(id=node.name, ctx=ast.Store())
    for target in targets:
        for inner in ast.walk(target):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                yield inner


def _own_nodes(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """The nodes of a function's body, not those of the functions nested in it."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(
            child
            for child in ast.iter_child_nodes(node)
            if not isinstance(child, ast.FunctionDef | ast.Lambda)
        )


def solve(
    bindings: Bindings,
    sites: Sequence[Site],
    env: dict[Key, V],
    evaluate: Callable[[Site], V | None],
    join: Callable[[V | None, V | None], V | None],
    widen: Callable[[V | None, V], V],
) -> bool:
    """Fill `env` with the least value of every name that holds each of its sites' values: join
    from nothing, re-evaluating only the sites that read a name whose value changed, widening a
    value that keeps growing. False when that has not settled within a budget of steps (then
    `env` is not to be trusted)."""
    waiting = deque(range(len(sites)))
    queued = set(waiting)
    readers: dict[Key, list[int]] = defaultdict(list)
    for index, site in enumerate(sites):
        for key in bindings.reads(site):
            readers[key].append(index)
    updates: dict[Key, int] = defaultdict(int)
    for _ in range(_STEPS_PER_SITE * len(sites) + _STEPS):
        if not waiting:
            return True
        index = waiting.popleft()
        queued.discard(index)
        site = sites[index]
        old = env.get(site.key)
        new = join(old, evaluate(site))
        if new is None or new == old:
            continue
        updates[site.key] += 1
        env[site.key] = widen(old, new) if updates[site.key] > _WIDEN_AFTER else new
        for reader in readers[site.key]:
            if reader not in queued:
                queued.add(reader)
                waiting.append(reader)
    return not waiting
