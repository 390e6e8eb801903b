"""What an outside agent reads to find its way in (issue 28, 10): `server.json` for the MCP
registry, checked against the registry's published server.json rules (schema 2025-12-11, written
out below as pydantic models: the fields a publish needs and their limits) and against the code
it describes (the version, `openbell mcp`'s options, the token's variable); and the skill
`skills/openbell-trader/SKILL.md`, whose tools, arguments, resources and commands must be the
ones the MCP server and the CLI have."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import typer
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from openbell.agents.outside.hub import ACCOUNT_RESOURCE, RULES_RESOURCE, WAIT_FOR_CYCLE
from openbell.agents.outside.server import WaitForCycleArgs
from openbell.agents.tools import ARGUMENTS, SHORTING_ARGUMENTS
from openbell.ops import cli
from openbell.ops.cli.tokens import TOKEN_ENV

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
_URL = r"^https?://[^\s]+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Input(_Strict):
    description: str | None = None
    isRequired: bool = False
    isSecret: bool = False
    format: Literal["string", "number", "boolean", "filepath"] = "string"
    value: str | None = None
    default: str | None = None
    placeholder: str | None = None
    choices: list[str] | None = None
    variables: dict[str, Input] | None = None


class KeyValue(Input):
    name: str


class Argument(Input):
    type: Literal["positional", "named"]
    name: str | None = None
    valueHint: str | None = None
    isRepeated: bool = False


class Transport(_Strict):
    type: Literal["stdio", "streamable-http", "sse"]
    url: Annotated[str, StringConstraints(pattern=_URL)] | None = None
    headers: list[KeyValue] | None = None
    variables: dict[str, Input] | None = None


class Package(_Strict):
    registryType: str
    identifier: str
    version: Annotated[str, StringConstraints(min_length=1)]
    transport: Transport
    registryBaseUrl: str | None = None
    runtimeHint: str | None = None
    runtimeArguments: list[Argument] | None = None
    packageArguments: list[Argument] | None = None
    environmentVariables: list[KeyValue] | None = None


class ServerJson(_Strict):
    schema_: Literal[
        "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
    ] = Field(alias="$schema")
    name: Annotated[
        str, StringConstraints(pattern=r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$", max_length=200)
    ]
    title: Annotated[str, StringConstraints(min_length=1, max_length=100)] | None = None
    description: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    version: Annotated[str, StringConstraints(max_length=255)]
    websiteUrl: str | None = None
    packages: list[Package] = []
    remotes: list[Transport] = []


@pytest.fixture(scope="module")
def server() -> ServerJson:
    return ServerJson.model_validate(json.loads((ROOT / "server.json").read_text()))


def _options(*path: str) -> set[str]:
    command: Any = typer.main.get_command(cli.app)
    for name in path:
        command = command.commands[name]
    return {opt for param in command.params for opt in getattr(param, "opts", ())}


def test_server_json_keeps_the_registrys_rules_and_the_codes_names(server: ServerJson) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert server.version == project["version"]
    (package,) = server.packages
    assert (package.registryType, package.identifier) == ("pypi", project["name"])
    assert package.version == project["version"]
    assert package.version != "latest"
    assert package.transport.type == "stdio"
    arguments = package.packageArguments or []
    assert arguments[0].type == "positional"
    assert arguments[0].value == "mcp"  # `openbell mcp`
    named = {a.name for a in arguments if a.type == "named"}
    assert named <= _options("mcp")
    assert "--account" in named
    (token,) = package.environmentVariables or []
    assert (token.name, token.isSecret, token.isRequired) == (TOKEN_ENV, True, True)
    (remote,) = server.remotes
    assert remote.type == "streamable-http"
    assert remote.url is not None
    assert remote.url.endswith("/mcp")
    variables = set(re.findall(r"{(\w+)}", remote.url))
    assert variables == set(remote.variables or {})
    (header,) = remote.headers or []
    assert header.name == "Authorization"
    assert header.value == "Bearer {token}"
    assert header.isSecret
    assert set(header.variables or {}) == {"token"}


def test_server_json_refuses_what_the_registry_refuses(server: ServerJson) -> None:
    """The models above fail where the registry's schema fails: they can."""
    document = json.loads((ROOT / "server.json").read_text())
    for broken in (
        {**document, "name": "openbell"},  # no namespace
        {**document, "description": "x" * 101},
        {**document, "remotes": [{**document["remotes"][0], "url": "{host}/mcp"}]},
        {**document, "unknown": 1},
    ):
        with pytest.raises(ValueError, match="validation error"):
            ServerJson.model_validate(broken)


def _skill() -> tuple[dict[str, str], str]:
    text = (ROOT / "skills" / "openbell-trader" / "SKILL.md").read_text()
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.DOTALL)
    assert match is not None, "SKILL.md opens with its front matter"
    front = dict(line.split(": ", 1) for line in match.group(1).splitlines())
    return front, match.group(2)


def _tool_table(body: str) -> dict[str, str]:
    """The skill's tool table: each tool's name and its arguments cell."""
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \| .*? \|$", body, re.MULTILINE)
    return dict(rows)


def test_the_skill_names_what_the_server_and_the_cli_have() -> None:
    front, body = _skill()
    assert set(front) == {"name", "description"}
    assert front["name"] == "openbell-trader"  # its folder's name
    assert re.fullmatch(r"[a-z0-9-]{1,64}", front["name"])
    assert 0 < len(front["description"]) <= 1024
    table = _tool_table(body)
    assert list(table) == [WAIT_FOR_CYCLE, *ARGUMENTS]  # the order `tools/list` gives
    models = {WAIT_FOR_CYCLE: WaitForCycleArgs, **ARGUMENTS}
    for tool, cell in table.items():
        named = set(re.findall(r"`(\w+)\??`", cell)) - {"buy", "sell", "short", "cover", "1d", "1h"}
        fields = set(models[tool].model_fields)
        if tool == "place_order":
            assert set(SHORTING_ARGUMENTS[tool].model_fields) == fields
        assert named == fields, tool
        # Each default the skill states is the model's.
        for name, default in re.findall(r"`(\w+)\??` \([^)]*?default `?([\w.]+)`?", cell):
            assert str(models[tool].model_fields[name].default).removesuffix(".0") == default
    for said in (
        ACCOUNT_RESOURCE,
        RULES_RESOURCE,
        TOKEN_ENV,
        "openbell agent token",
        "openbell mcp --account",
        "/healthz",
        "/api/v1/",
        'kind = "mcp"',
    ):
        assert said in body, said
    assert "--url" in _options("mcp")
    assert "token" in typer.main.get_command(cli.app).commands["agent"].commands  # type: ignore[attr-defined]
