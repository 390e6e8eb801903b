"""Python plug-in agents: a user's own class, loaded from the config, trading like any agent.

This module owns loading an `[[agents]] kind = "python"` entry. Its `entry` is either
`"package.module:Class"` (imported from `sys.path`) or the name of an entry point in the
`openbell.agents` group (`ENTRY_POINT_GROUP`) of an installed package, whose value is such a
`module:Class`. The class is made as `Class(name=NAME, **options)`: the agent's configured name
and the entry's `options` table as keyword arguments. What it makes must satisfy the agent
protocol (`protocol.Agent`): a `name` equal to the configured one, a non-empty string `kind`
(stored as the agent's kind in the ledger) and an `async def decide(self, ctx)`, which observes
and trades only through `ctx.tools`, the toolbox the baselines use, so the market rules, the
point-in-time rule and the ledger bind it as they bind every agent. Anything that goes wrong
while loading (no such module or entry point, an import that fails, not a class, no async
`decide`, a constructor that refuses the options) is one `ConfigError` naming the agent and the
entry, never a traceback.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any, Final

from openbell.agents.protocol import Agent
from openbell.markets.errors import ConfigError

#: The entry-point group in which installed packages offer agent classes.
ENTRY_POINT_GROUP: Final = "openbell.agents"
#: `package.module:Class` (the attribute may be dotted: `module:Outer.Inner`).
_OBJECT_REFERENCE: Final = re.compile(r"\w+(\.\w+)*:\w+(\.\w+)*")

#: Makes the one-line error of a loading problem.
_Problem = Callable[[str], ConfigError]


def load_plugin(name: str, entry: str, options: Mapping[str, object]) -> Agent:
    """The agent `name` made from `entry` with `options` (see the module docstring); raises
    `ConfigError` naming the agent and the entry when it cannot be made."""

    def problem(what: str) -> ConfigError:
        return ConfigError(f"agent {name!r}: entry {entry!r}: {what}")

    reference = entry if ":" in entry else _entry_point(entry, problem)
    factory = _resolve(reference, problem)
    if not inspect.isclass(factory):
        raise problem(f"{reference} is not a class")
    if not inspect.iscoroutinefunction(getattr(factory, "decide", None)):
        raise problem(f"{factory.__name__} has no `async def decide(self, ctx)`")
    agent = _make(factory, name, options, problem)
    _check(agent, name, problem)
    return agent


def _make(factory: Any, name: str, options: Mapping[str, object], problem: _Problem) -> Agent:
    """`factory(name=name, **options)`: a user's class, which the caller checks, not its type."""
    try:
        made: Agent = factory(name=name, **options)
    except Exception as exc:  # noqa: BLE001  (whatever a user's constructor raises)
        raise problem(f"{factory.__name__}(name=..., **options) failed: {_why(exc)}") from None
    return made


def _entry_point(entry: str, problem: _Problem) -> str:
    """The `module:Class` reference of the installed entry point called `entry`."""
    found = metadata.entry_points(group=ENTRY_POINT_GROUP, name=entry)
    if not found:
        offered = sorted(point.name for point in metadata.entry_points(group=ENTRY_POINT_GROUP))
        raise problem(
            f"not `package.module:Class`, and no installed package offers an entry point of that "
            f"name in group {ENTRY_POINT_GROUP!r} (offered: {', '.join(offered) or 'none'})"
        )
    return next(iter(found)).value


def _resolve(reference: str, problem: _Problem) -> object:
    """The object `module:attribute` names, imported."""
    if not _OBJECT_REFERENCE.fullmatch(reference):
        raise problem(f"{reference!r} is not of the form `package.module:Class`")
    module_name, _, attribute = reference.partition(":")
    try:
        found: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            raise problem(
                f"no module named {missing!r} (is its directory on PYTHONPATH, or its package "
                "installed?)"
            ) from None
        raise problem(f"importing {module_name} failed: {_why(exc)}") from None
    except Exception as exc:  # noqa: BLE001  (whatever a user's module raises on import)
        raise problem(f"importing {module_name} failed: {_why(exc)}") from None
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise problem(f"{module_name} has no attribute {attribute!r}")
        found = getattr(found, part)
    return found


def _check(agent: object, name: str, problem: _Problem) -> None:
    """Refuse an object that does not satisfy the agent protocol."""
    made = type(agent).__name__
    found_name = getattr(agent, "name", None)
    if found_name != name:
        raise problem(f"the {made} made has name {found_name!r}, not the configured {name!r}")
    kind = getattr(agent, "kind", None)
    if not isinstance(kind, str) or not kind.strip():
        raise problem(f"the {made} made has no `kind` (a non-empty string, e.g. 'momentum')")
    if not inspect.iscoroutinefunction(getattr(agent, "decide", None)):
        raise problem(f"the {made} made has no `async def decide(self, ctx)`")


def _why(exc: BaseException) -> str:
    """`exc` in one line: its class and message."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
