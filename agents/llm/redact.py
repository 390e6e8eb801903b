"""Redaction of secrets from text an LLM agent stores: trace rows and error messages.

This module owns `Redactor`: it masks the exact secret values it is given (the agent's API key,
even if a model or a tool result repeats it) and anything that looks like a credential (bearer
tokens, `sk-...` style keys, passwords in URLs), the same patterns `ops.logs` masks in log lines
(agents cannot import `ops`, so the patterns live here too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[redacted]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"), rf"\1 {REDACTED}"),
    (re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_-]{6,}"), REDACTED),
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s/]+@"), rf"\1{REDACTED}@"),
)
#: Secrets shorter than this are not masked by value (they would blank ordinary words).
MIN_SECRET_CHARS = 8


class Redactor:
    """Masks `secrets` (exact values) and credential-looking strings in text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = tuple(
            sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        )

    def __call__(self, text: str | None) -> str | None:
        """`text` with secrets masked (None stays None)."""
        if text is None:
            return None
        return self.text(text)

    def text(self, text: str) -> str:
        """`text` with secrets masked."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        for pattern, replacement in _PATTERNS:
            text = pattern.sub(replacement, text)
        return text
