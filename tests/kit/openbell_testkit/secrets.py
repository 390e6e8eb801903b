"""A secret scanner for the tests: finds a secret in text however it was encoded.

It works the other way round from `openbell.store.redact` (which encodes the secret every way it
knows and masks what matches): it decodes the text every way it can (JSON `\\uXXXX` escapes, also
escaped again, percent-encoding, also doubled, HTML character references) and looks for the secret,
for each of its parts after a `-` or `_` that is still `MIN_PART_CHARS` long (the key without its
`sk-` prefix, its base part), and for its Base64 in the three alignments. So a test that finds no
leak with it is not checking the redactor against itself.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable
from urllib.parse import unquote

#: Parts of a secret shorter than this are not looked for (they would be found by chance).
MIN_PART_CHARS = 8

_JSON_ESCAPE = re.compile(r"\\+u([0-9a-fA-F]{4})")
_JSON_SLASH = re.compile(r"\\+/")


def _views(text: str) -> set[str]:
    """`text` and every decoding of it, applied repeatedly until nothing changes."""
    seen = {text}
    frontier = [text]
    while frontier:
        current = frontier.pop()
        for decoded in (
            _JSON_ESCAPE.sub(lambda match: chr(int(match.group(1), 16)), current),
            _JSON_SLASH.sub("/", current),
            unquote(current),
            unquote(current.replace("+", " ")),
            html.unescape(current),
        ):
            if decoded not in seen and len(seen) < 64:
                seen.add(decoded)
                frontier.append(decoded)
    return seen


def needles(secret: str) -> list[str]:
    """The secret, its parts after each `-` or `_` (at least `MIN_PART_CHARS` long)."""
    found = [secret]
    for match in re.finditer(r"[-_]", secret):
        part = secret[match.end() :]
        if len(part) >= MIN_PART_CHARS:
            found.append(part)
    return found


def _base64_forms(secret: str) -> list[str]:
    raw = secret.encode()
    forms = []
    for skip in range(3):
        body = raw[skip:]
        body = body[: len(body) - len(body) % 3]
        if len(body) >= 6:
            encoded = base64.b64encode(body).decode()
            forms += [encoded, encoded.replace("+", "-").replace("/", "_")]
    return forms


def leaks(text: str, secrets: Iterable[str]) -> list[str]:
    """What of `secrets` `text` still shows, in any form (empty when nothing)."""
    found: list[str] = []
    views = _views(text)
    for secret in secrets:
        for needle in needles(secret):
            if any(needle in view for view in views):
                found.append(needle)
        found += [form for form in _base64_forms(secret) if form in text]
    return found
