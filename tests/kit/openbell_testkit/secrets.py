"""A secret scanner for the tests: finds a secret in text however it was encoded.

It works the other way round from `openbell.store.redact` (which encodes the secret every way it
knows and masks what matches): it decodes the text every way it can (JSON `\\uXXXX` escapes, also
escaped again, percent-encoding, also doubled, HTML character references, `\\xHH` escapes) and
looks for the secret, for each of its parts after a `-` or `_` that is still `MIN_PART_CHARS` long
(the key without its `sk-` prefix, its base part), and for its Base64 in the three alignments. Each
decoding is also read undisguised (`undisguised`): reversed, ROT13-decoded, without whitespace and
format characters (zero-width spaces and joiners, bidirectional marks, the soft hyphen), and every
run of hex digits or of Base32 characters decoded. So a test that finds no leak with it is not
checking the redactor against itself.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import re
import unicodedata
from collections.abc import Iterable, Iterator
from urllib.parse import unquote

#: Parts of a secret shorter than this are not looked for (they would be found by chance).
MIN_PART_CHARS = 8

_JSON_ESCAPE = re.compile(r"\\+u([0-9a-fA-F]{4})")
_JSON_SLASH = re.compile(r"\\+/")
_BYTE_ESCAPE = re.compile(r"\\+x([0-9a-fA-F]{2})")
_HEX_RUN = re.compile(r"[0-9a-fA-F]{16,}")
_BASE32_RUN = re.compile(r"[A-Za-z2-7]{13,}=*")


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
            _BYTE_ESCAPE.sub(lambda match: chr(int(match.group(1), 16)), current),
        ):
            if decoded not in seen and len(seen) < 64:
                seen.add(decoded)
                frontier.append(decoded)
    return seen


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _unhex(run: str) -> Iterator[str]:
    for start in (0, 1):
        digits = run[start:]
        yield _decoded(binascii.unhexlify(digits[: len(digits) - len(digits) % 2]))


def _unbase32(run: str) -> Iterator[str]:
    """The run decoded from each of its first 8 characters on, its last block as far as it
    decodes."""
    letters = run.rstrip("=").upper()
    for start in range(8):
        body = letters[start:]
        for cut in range(8):
            block = body[: len(body) - cut]
            try:
                yield _decoded(base64.b32decode(block + "=" * (-len(block) % 8)))
                break
            except binascii.Error:
                continue


def undisguised(text: str) -> list[str]:
    """`text` read through each cheap disguise: reversed, ROT13, without whitespace and format
    characters, and the hex and Base32 runs of that decoded."""
    bare = "".join(c for c in text if not c.isspace() and unicodedata.category(c) != "Cf")
    found = [text, text[::-1], codecs.decode(text, "rot13"), bare]
    for run in _HEX_RUN.findall(bare):
        found.extend(_unhex(run))
    for run in _BASE32_RUN.findall(bare):
        found.extend(_unbase32(run))
    return found


def needles(secret: str) -> list[str]:
    """The secret, its parts after each `-` or `_` (at least `MIN_PART_CHARS` long), and each
    without its whitespace (as a view without whitespace shows it)."""
    found = [secret]
    for match in re.finditer(r"[-_]", secret):
        part = secret[match.end() :]
        if len(part) >= MIN_PART_CHARS:
            found.append(part)
    found += [bare for needle in found if (bare := "".join(needle.split())) != needle]
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
    views = [view for decoded in _views(text) for view in undisguised(decoded)]
    for secret in secrets:
        for needle in needles(secret):
            if any(needle in view for view in views):
                found.append(needle)
        found += [form for form in _base64_forms(secret) if form in text]
    return found
