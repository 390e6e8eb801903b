"""The MCP server of outside agents: the registry's tools over streamable HTTP, behind bearer
tokens.

This module owns the MCP endpoint (`mcp_endpoint`), built on the official SDK's low-level `Server`
and its streamable-HTTP session manager. Its tools are the registry's own declarations (the names,
`DESCRIPTIONS` and argument models' JSON schemas of `agents/tools.py`), plus `wait_for_cycle` and
`finish`; every result is the JSON the built-in agent gets, as structured content and as text, and
a `ToolError` comes back with `isError` set. Resources give the account (`openbell://account`: the
portfolio and the latest orders with their outcomes) and the market's rules (`openbell://rules`).

Every request needs a bearer token (anything else gets a 401 and nothing more): an agent token
(`obt_...`, checked by `Ledger.agent_for_token`) reaches its own agent's cycles only; a cycle token
(`obc_...`, minted by `CycleHub.open`) reaches its one cycle while it is open. Tokens are checked
as hashes and never kept, logged or traced. An agent token's MCP session is bound to the cycle
`wait_for_cycle` returned (its optional `market` chooses among an agent's accounts; an ambiguous
call is an `ambiguous_cycle` error), and calls act on that cycle through `OpenCycle` (budgets,
masking, one trace row per call). What one token may hold of the endpoint (sessions, requests in
flight, idle time, body size) is bounded by `sessions.py`, between the token check and the SDK's
session manager; a cycle token's sessions end when its cycle closes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any, Final, Protocol

import mcp_types as types
import structlog
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    BearerAuthBackend,
    RequireAuthMiddleware,
)
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp

from openbell.agents.outside.hub import (
    ACCOUNT_RESOURCE,
    CYCLE_TOKEN_PREFIX,
    RULES_RESOURCE,
    WAIT_FOR_CYCLE,
    CycleHub,
    OpenCycle,
    Served,
    token_hash,
)
from openbell.agents.outside.limits import McpLimits
from openbell.agents.outside.sessions import SessionLimits
from openbell.agents.tools import (
    ARGUMENTS,
    DESCRIPTIONS,
    ErrorCode,
    ToolError,
    describe_validation_error,
)
from openbell.agents.untrusted import RULE

log = structlog.stdlib.get_logger(__name__)

SERVER_NAME: Final = "openbell"
#: The longest a `wait_for_cycle` call waits before answering "no cycle yet".
MAX_WAIT_S: Final = 120.0
#: How many of the account's latest orders `openbell://account` lists.
RECENT_ORDERS: Final = 20
_AGENT: Final = "agent:"
_CYCLE: Final = "cycle:"

WAIT_DESCRIPTION: Final = (
    "Wait for your account's next decision cycle (long poll) and bind this session to it: the "
    "slot, market, your account (cash, positions), the rules, the universe and the seconds left. "
    "Then research and trade with the other tools, and call finish."
)
INSTRUCTIONS: Final = (
    "openbell paper-trading arena. Call wait_for_cycle; then use the tools on that cycle before "
    f"its deadline; call finish last. {RULE}"
)


class AgentTokens(Protocol):
    """Where agent tokens are checked (`Ledger` is one)."""

    def agent_for_token(self, token: str) -> str | None:
        """The agent whose token is `token`, or None."""
        ...


class WaitForCycleArgs(BaseModel):
    """Arguments of `wait_for_cycle`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    market: str | None = Field(
        None, max_length=32, description="Which of your markets (needed if you trade in several)."
    )
    timeout_s: float = Field(30.0, gt=0, le=MAX_WAIT_S, description="How long to wait.")


class TokenVerifier:
    """The SDK's token verifier over agent and cycle tokens: an `AccessToken` whose `client_id`
    is `agent:NAME` or `cycle:ID`, and whose `token` is the hash, never the token."""

    def __init__(self, hub: CycleHub, tokens: AgentTokens) -> None:
        self._hub = hub
        self._tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        """The principal of `token`, or None when it opens nothing."""
        if token.startswith(CYCLE_TOKEN_PREFIX):
            cycle = self._hub.by_token(token)
            if cycle is None:
                return None
            principal = f"{_CYCLE}{cycle.ctx.cycle_id}"
        else:
            agent = self._tokens.agent_for_token(token)
            if agent is None:
                return None
            principal = f"{_AGENT}{agent}"
        return AccessToken(token=token_hash(token), client_id=principal, scopes=[])


class McpService:
    """The handlers of the MCP server over one `CycleHub`; see the module docstring."""

    def __init__(self, hub: CycleHub) -> None:
        self._hub = hub
        # The cycle each agent-token session is bound to, by (principal, MCP session id).
        self._bound: dict[tuple[str, str], OpenCycle] = {}

    def server(self) -> Server[Any]:
        """The SDK's low-level server with these handlers."""
        server: Server[Any] = Server(
            SERVER_NAME,
            instructions=INSTRUCTIONS,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_read_resource=self.read_resource,
        )
        # Without the SDK's default OpenTelemetry span per message: openbell exports no spans
        # (its calls are trace rows in the ledger), and the span costs a tenth of a call.
        server.middleware.clear()
        return server

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """`wait_for_cycle`, then the registry's tools as the toolbox declares them: as the
        caller's cycle's toolbox offers them when it has one (an account allowed to short is
        offered `short` and `cover`), else the long-only declarations."""
        tools = [_tool(WAIT_FOR_CYCLE, WAIT_DESCRIPTION, WaitForCycleArgs)]
        principal, session = _caller(ctx)
        cycle = self._cycle_seen(principal, session)
        if cycle is None:
            tools.extend(_tool(name, DESCRIPTIONS[name], args) for name, args in ARGUMENTS.items())
        else:
            tools.extend(
                _tool(spec.name, spec.description, spec.args) for spec in cycle.ctx.tools.specs
            )
        return types.ListToolsResult(tools=tools)

    def _cycle_seen(self, principal: str, session: str) -> OpenCycle | None:
        """The open cycle a call of the caller would act on, if there is exactly one (nothing is
        bound: listing tools is not a call)."""
        if principal.startswith(_CYCLE):
            cycle_id = int(principal.removeprefix(_CYCLE))
            found = [c for c in self._hub.waiting_any() if c.ctx.cycle_id == cycle_id]
        else:
            bound = self._bound.get((principal, session))
            if bound is not None and bound.is_open:
                return bound
            found = self._hub.waiting(principal.removeprefix(_AGENT))
        return found[0] if len(found) == 1 else None

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """Serve one tool call on the caller's cycle (see the module docstring)."""
        principal, session = _caller(ctx)
        arguments = dict(params.arguments or {})
        if params.name == WAIT_FOR_CYCLE:
            served = await self._wait_for_cycle(principal, session, arguments)
        else:
            found = self._cycle_of(principal, session)
            served = (
                found if isinstance(found, Served) else await found.call(params.name, arguments)
            )
        return _result(served)

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """The account and the rules of the caller's cycle."""
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=ACCOUNT_RESOURCE,
                    name="account",
                    description="Your cash, positions and latest orders, at the cycle's slot.",
                    mime_type="application/json",
                ),
                types.Resource(
                    uri=RULES_RESOURCE,
                    name="rules",
                    description="The market's trading rules.",
                    mime_type="application/json",
                ),
            ]
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """A resource of the caller's cycle (an error object when there is none)."""
        principal, session = _caller(ctx)
        found = self._cycle_of(principal, session)
        if isinstance(found, Served):
            served = found
        elif params.uri == ACCOUNT_RESOURCE:
            served = await found.account(RECENT_ORDERS)
        elif params.uri == RULES_RESOURCE:
            served = await found.rules()
        else:
            served = Served(_error_json(ErrorCode.INVALID_ARGUMENTS, "No such resource.", ""), True)
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=params.uri, mime_type="application/json", text=served.text
                )
            ]
        )

    async def _wait_for_cycle(
        self, principal: str, session: str, arguments: dict[str, Any]
    ) -> Served:
        try:
            args = WaitForCycleArgs.model_validate(arguments)
        except ValidationError as exc:
            return _error(
                ErrorCode.INVALID_ARGUMENTS,
                f"Invalid arguments for wait_for_cycle: {describe_validation_error(exc)}.",
                "Call wait_for_cycle with arguments matching its schema.",
            )
        if principal.startswith(_CYCLE):
            found = self._cycle_of(principal, session)
            return found if isinstance(found, Served) else await found.greet(arguments)
        agent = principal.removeprefix(_AGENT)
        key = (principal, session)
        bound = self._bound.get(key)
        if (
            bound is not None
            and bound.is_open
            and not bound.finished
            and args.market in (None, bound.ctx.market)
        ):
            return await bound.greet(arguments)
        waiting = await self._hub.wait_for(agent, args.market, args.timeout_s)
        if not waiting:
            return Served(
                json.dumps(
                    {
                        "status": "no_cycle",
                        "message": f"No cycle is open yet for {agent}"
                        + (f" in {args.market}" if args.market else "")
                        + f" (waited {args.timeout_s:g} s).",
                        "hint": "Call wait_for_cycle again: a cycle opens at each bell.",
                    }
                ),
                is_error=False,
            )
        if len(waiting) > 1:
            return _ambiguous(waiting)
        self._forget_closed()
        self._bound[key] = waiting[0]
        return await waiting[0].greet(arguments)

    def _cycle_of(self, principal: str, session: str) -> OpenCycle | Served:
        """The cycle a call acts on, or the error to answer."""
        if principal.startswith(_CYCLE):
            cycle_id = int(principal.removeprefix(_CYCLE))
            for cycle in self._hub.waiting_any():
                if cycle.ctx.cycle_id == cycle_id:
                    return cycle
            return _closed()
        bound = self._bound.get((principal, session))
        if bound is not None:
            return bound if bound.is_open else _closed()
        waiting = self._hub.waiting(principal.removeprefix(_AGENT))
        if len(waiting) > 1:
            return _ambiguous(waiting)
        if not waiting:
            return _error(
                ErrorCode.NO_CYCLE,
                "No cycle is open for you now.",
                "Call wait_for_cycle first.",
            )
        self._forget_closed()
        self._bound[(principal, session)] = waiting[0]
        return waiting[0]

    def _forget_closed(self) -> None:
        for key in [key for key, cycle in self._bound.items() if not cycle.is_open]:
            del self._bound[key]

    def forget(self, principal: str, session: str) -> None:
        """Forget an MCP session that ended."""
        self._bound.pop((principal, session), None)


def _caller(ctx: ServerRequestContext[Any]) -> tuple[str, str]:
    """The (principal, MCP session id) of a request; the auth middleware let only a verified
    token's request through."""
    request = ctx.request
    if not isinstance(request, Request):
        raise TypeError("the MCP server is served over HTTP only")
    user = request.scope.get("user")
    if not isinstance(user, AuthenticatedUser):
        raise TypeError("an MCP request reached the server without a verified token")
    return user.access_token.client_id, request.headers.get(MCP_SESSION_ID_HEADER, "")


def _tool(name: str, description: str, args: type[BaseModel]) -> types.Tool:
    schema = args.model_json_schema()
    schema.pop("title", None)
    return types.Tool(name=name, description=description, input_schema=schema)


def _result(served: Served) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=served.text)],
        structured_content=served.structured,
        is_error=served.is_error,
    )


def _error_json(code: ErrorCode, message: str, hint: str, as_of: datetime | None = None) -> str:
    return ToolError(code=code, message=message, hint=hint, as_of=as_of).model_dump_json()


def _error(code: ErrorCode, message: str, hint: str) -> Served:
    return Served(_error_json(code, message, hint), is_error=True)


def _closed() -> Served:
    return _error(
        ErrorCode.CYCLE_CLOSED,
        "This cycle is closed (finished, or past its deadline); nothing more is served.",
        "Call wait_for_cycle for the next one.",
    )


def _ambiguous(waiting: list[OpenCycle]) -> Served:
    markets = ", ".join(sorted(cycle.ctx.market for cycle in waiting))
    return _error(
        ErrorCode.AMBIGUOUS_CYCLE,
        f"You have open cycles in several markets ({markets}).",
        "Call wait_for_cycle with market set to one of them.",
    )


def mcp_endpoint(
    hub: CycleHub,
    tokens: AgentTokens,
    *,
    loopback: bool = True,
    limits: McpLimits | None = None,
) -> tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[None]]]:
    """The ASGI app serving MCP (mount it at `/mcp`) and the context that must be running while it
    serves (the SDK's session manager and its task group; enter it in the server's lifespan).

    With `loopback` (a server bound to 127.0.0.1 or localhost), requests must name a loopback
    host and origin (the SDK's DNS-rebinding protection). Each call is answered with one JSON
    response rather than an SSE stream (the server sends the client no requests of its own): half
    the latency per call. `limits` (`sessions.py`; default `McpLimits()`) bound each token's
    sessions and requests; a cycle token's sessions end when its cycle closes.
    """
    limits = limits if limits is not None else McpLimits()
    service = McpService(hub)
    security = (
        TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
        if loopback
        else None
    )
    manager = StreamableHTTPSessionManager(
        app=service.server(),
        security_settings=security,
        json_response=True,
        session_idle_timeout=limits.session_idle_s,
        max_request_body_size=limits.max_request_bytes,
    )
    sessions = SessionLimits(StreamableHTTPASGIApp(manager), limits, on_end=service.forget)
    guarded = RequireAuthMiddleware(sessions, required_scopes=[])
    app = AuthenticationMiddleware(guarded, backend=BearerAuthBackend(TokenVerifier(hub, tokens)))

    async def closed(cycle: OpenCycle) -> None:
        # An agent token's sessions stay: a client waits for its next cycle in the same session.
        try:
            await sessions.drop(f"{_CYCLE}{cycle.ctx.cycle_id}")
        except Exception:  # the cycle closed all the same; its token opens nothing more
            log.exception("mcp_sessions_not_ended", cycle_id=cycle.ctx.cycle_id)

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with manager.run():
            stop_listening = hub.on_close(closed)
            try:
                yield
            finally:
                stop_listening()

    return app, running
