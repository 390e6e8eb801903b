"""`McpLimits`: the numbers that bound what one token may hold of the MCP endpoint.

This module owns the value only (`[mcp]` in the config, read at every start without importing
the MCP SDK); `sessions.py` enforces it. Per principal (an agent's token, or one cycle's token):
`max_sessions_per_token` sessions open, `max_requests_in_flight` requests served at once; a
session with no request in flight for `session_idle_s` seconds ends; a request body over
`max_request_bytes` is refused (413).
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True, kw_only=True)
class McpLimits:
    """The MCP endpoint's limits per principal (see the module docstring)."""

    max_sessions_per_token: int = 4
    max_requests_in_flight: int = 16
    session_idle_s: float = 600.0
    max_request_bytes: int = 1_048_576

    def __post_init__(self) -> None:
        for field in fields(self):
            if not getattr(self, field.name) > 0:
                raise ValueError(f"{field.name} must be positive, got {getattr(self, field.name)}")
