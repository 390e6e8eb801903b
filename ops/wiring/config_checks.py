"""What `openbell config check` finds beyond the file's own validity: what `run` and `replay`
would stop on when they build the agents, and, when asked, whether the models answer.

This module owns `resolution_problems` and `reach_models`. A config can be valid as a file and
still fail at run time: an `api_key_env` whose variable is unset, a `python` plug-in that cannot be
imported or refuses its options, a `command` whose program is not there, a strategy-code or command
agent with no jail and no `allow_unsandboxed`. `resolution_problems` builds every agent of every
market it trades exactly as a run does (`planning.agent_for`, with the run's containment) and
returns one line per agent that cannot be built; nothing is started and nothing is sent.
`reach_models` asks each distinct model endpoint (`base_url`, with the agent's key) for its
`/models` list once: an endpoint that cannot be connected to, times out or refuses the key is a
problem; any other HTTP answer (some servers have no `/models`) says it is there.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx

from openbell.markets.errors import OpenbellError
from openbell.ops.config.schema import (
    CommandAgentConfig,
    OpenbellConfig,
    RatingJudgeConfig,
    resolve_secret,
)
from openbell.ops.wiring.planning import agent_for
from openbell.ops.wiring.sandboxing import containment_for

#: How long `reach_models` waits for each endpoint, in seconds.
REACH_TIMEOUT_S: Final = 10.0
#: HTTP statuses that mean the key (or the lack of one) is refused.
REFUSED_KEY: Final = frozenset({401, 403})


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """One model endpoint to reach: the agents (or judges) that use it, its base URL and model,
    and the variable of its key (None: no key)."""

    users: tuple[str, ...]
    base_url: str
    model: str
    api_key_env: str | None


def resolution_problems(config: OpenbellConfig, environ: Mapping[str, str]) -> list[str]:
    """One line per agent that `run` or `replay` could not build (see the module docstring), in
    file order; empty when every agent builds."""
    problems: list[str] = []
    containment = containment_for(config, environ)
    for agent in config.agents:
        try:
            if isinstance(agent, CommandAgentConfig):
                _check_program(agent.command[0], environ)
            for market in agent.markets:
                agent_for(config.resolved(agent), market, environ, containment=containment)
        except (OpenbellError, ValueError) as exc:
            problems.append(f"agent {agent.name!r}: {exc}")
    for name, judge in config.judges.items():
        if judge.api_key_env is not None:
            try:
                resolve_secret(judge.api_key_env, environ)
            except OpenbellError as exc:
                problems.append(f"judge {name!r}: {exc}")
    return problems


def _check_program(program: str, environ: Mapping[str, str]) -> None:
    found = shutil.which(program, path=environ.get("PATH", os.defpath))
    if found is None or not Path(found).is_file():
        raise OpenbellError(f"command: cannot start {program!r}: no such program on PATH")


def endpoints(config: OpenbellConfig) -> list[Endpoint]:
    """The distinct model endpoints of the config's agents and judges, in file order."""
    found: dict[tuple[str, str, str | None], list[str]] = {}
    for agent in config.agents:
        base_url = getattr(agent, "base_url", None)
        model = getattr(agent, "model", None)
        if isinstance(base_url, str) and isinstance(model, str):
            key = (base_url, model, getattr(agent, "api_key_env", None))
            found.setdefault(key, []).append(f"agent {agent.name!r}")
        judge = getattr(agent, "judge", None)
        if isinstance(judge, RatingJudgeConfig):
            key = (judge.base_url, judge.model, judge.api_key_env)
            found.setdefault(key, []).append(f"the judge of agent {agent.name!r}")
    for name, judge in config.judges.items():
        found.setdefault((judge.base_url, judge.model, judge.api_key_env), []).append(
            f"judge {name!r}"
        )
    return [
        Endpoint(users=tuple(users), base_url=base_url, model=model, api_key_env=key_env)
        for (base_url, model, key_env), users in found.items()
    ]


def reach_models(
    wanted: Iterable[Endpoint], environ: Mapping[str, str], http: httpx.Client
) -> tuple[list[str], list[str]]:
    """Ask each endpoint for `/models` once: (lines of those that answered, problems)."""
    reached: list[str] = []
    problems: list[str] = []
    for endpoint in wanted:
        who = ", ".join(endpoint.users)
        where = f"{endpoint.model} at {endpoint.base_url}"
        key = environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else ""
        headers = {"Authorization": f"Bearer {key}"} if key.strip() else {}
        try:
            response = http.get(
                endpoint.base_url.rstrip("/") + "/models",
                headers=headers,
                timeout=REACH_TIMEOUT_S,
            )
        except httpx.TimeoutException:
            problems.append(f"{who}: {where}: no answer within {REACH_TIMEOUT_S:g} s")
            continue
        except httpx.HTTPError as exc:
            problems.append(f"{who}: {where}: cannot connect ({type(exc).__name__})")
            continue
        if response.status_code in REFUSED_KEY:
            problems.append(
                f"{who}: {where}: the key was refused (HTTP {response.status_code}); check "
                f"{endpoint.api_key_env or 'api_key_env'}"
            )
            continue
        reached.append(f"{who}: {where}: reachable (HTTP {response.status_code})")
    return reached, problems
