"""The `[sandbox]` config applied: whether the agents that run untrusted code are jailed.

This module owns `Containment`, what the agent builders (`strategy_agents`, `outside_agents`)
need to contain an agent of kind `strategy_code` (the model's code) or `command` (a program
openbell launches): `sandboxed(agent, kind)` probes once per process whether that kind of jail
(`agents/jail/`, bubblewrap) runs here. It does: True. It does not: one `ConfigError` naming the
agent and why (bubblewrap missing, user namespaces refused, ...), unless `[sandbox]
allow_unsandboxed = true`, when the agent runs as a plain subprocess, with an `agent_unsandboxed`
warning at every start (and the agent listed in `/healthz`: `unsandboxed_agents`).

It also carries the `Redactor` of every configured secret (`secrets.redactor_for`), with which
the text that comes back from those agents (a strategy's error, a command's output) is masked,
and the paths a launched command must never see (`protected`: the SQLite ledger file and the
daemon's working directory, its state directory under systemd).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import structlog

from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import OpenbellConfig
from openbell.ops.config.secrets import redactor_for
from openbell.store.db import parse_url
from openbell.store.redact import Redactor

log = structlog.stdlib.get_logger(__name__)

JailKind = Literal["strategy_code", "command"]


def jail_problem(kind: JailKind) -> str | None:
    """Why jails of agents of `kind` cannot run here, or None when they can (probed once)."""
    # Imported here: a run without untrusted code never loads the jails (issue 29).
    if kind == "strategy_code":
        from openbell.agents.strategy_code.sandbox import strategy_support

        support = strategy_support()
    else:
        from openbell.agents.jail.command_jail import command_support

        support = command_support()
    return None if support.jail is not None else support.reason


@dataclass(frozen=True, slots=True, kw_only=True)
class Containment:
    """How this run contains untrusted agents; see the module docstring."""

    allow_unsandboxed: bool = False
    redactor: Redactor = field(default_factory=Redactor, repr=False)
    protected: tuple[Path, ...] = ()
    probe: Callable[[JailKind], str | None] = jail_problem

    def sandboxed(self, agent: str, kind: JailKind) -> bool:
        """Whether agent `agent` of `kind` runs jailed; `ConfigError` when it cannot and may
        not run without (see the module docstring)."""
        problem = self.probe(kind)
        if problem is None:
            return True
        if not self.allow_unsandboxed:
            raise ConfigError(
                f'agent {agent}: kind = "{kind}" runs code openbell did not write and needs the '
                f"bubblewrap sandbox, which cannot run here: {problem}; install bubblewrap and "
                "allow unprivileged user namespaces, or set [sandbox] allow_unsandboxed = true "
                "to run it without (not recommended)"
            )
        log.warning(
            "agent_unsandboxed",
            agent=agent,
            kind=kind,
            reason=problem,
            message=f"agent {agent} runs unsandboxed ([sandbox] allow_unsandboxed): {problem}",
        )
        return False


def containment_for(config: OpenbellConfig, environ: Mapping[str, str]) -> Containment:
    """The containment of `config`'s run: its `[sandbox]`, its secrets and protected paths."""
    protected = [Path.cwd()]
    url = parse_url(config.store.url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        protected.append(Path(url.database).absolute())
    return Containment(
        allow_unsandboxed=config.sandbox.allow_unsandboxed,
        redactor=redactor_for(config, environ),
        protected=tuple(protected),
    )
