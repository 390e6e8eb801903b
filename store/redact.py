"""Masking secrets in everything openbell stores or prints: the one redactor.

This module owns `Redactor`. It is built with the configured secret *values* (the API keys read
through `api_key_env`, the store URL's password, bearer tokens) and masks each of them, as
`[redacted]`, in every form it takes in text:

- raw, and without a key prefix: each leading segment of one to five letters or digits and a `-`
  or `_` (`sk-`, then `proj-` of `sk-proj-...`) is dropped in turn while what is left is still a
  secret's length, so `sk-abc...` is also masked as `abc...`;
- every character, independently, as itself, as a JSON `\\uXXXX` escape (any case, also escaped
  again: `\\\\u002d`), percent-encoded (any case, also encoded twice: `%252D`) or as an HTML
  character reference (`&#45;`, `&#x2d;`); so `sk\\u002d...` and `sk%2D...` are caught;
- Base64 (standard and URL-safe), in the three byte alignments it can start at;
- cut short: when the last word of a text (the one right before its end, or before a `...` or
  an ellipsis that marks a cut) starts with a secret's first `MIN_SECRET_CHARS` characters, that
  word is masked, so cutting a long message never leaves a usable piece behind.

A secret shorter than `MIN_SECRET_CHARS` (8) is not masked by value: a 3-character password would
blank every word it occurs in and still be guessable. Use longer secrets; `openbell` warns at
startup about any it cannot mask.

openbell's own tokens are masked whatever their value, in every redactor: an agent's bearer token
(`obt_...`, `store/agent_tokens.py`) and a cycle's token (`obc_...`) are high-entropy URL-safe
text behind a prefix nothing else uses, so `TOKEN_PATTERN` finds them without knowing them.

`mask_values` masks only the configured values and openbell's tokens; the store applies it to every
text it writes (`db.make_engine` installs it on the engine), where masking anything else could
change an identifier. `mask` also masks text that looks like a credential whatever its value
(`Bearer ...` and `Basic ...` tokens, `sk-`/`pk-`/`rk-` keys, URL passwords): the logs, trace rows
and error lines go through it.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Final

REDACTED: Final = "[redacted]"
#: A secret (or the rest of a key after its prefix) shorter than this is not masked by value.
MIN_SECRET_CHARS: Final = 8

#: Credential-looking text, masked by `mask` whatever its value.
CREDENTIAL_PATTERNS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"), rf"\1 {REDACTED}"),
    (re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_-]{6,}"), REDACTED),
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s/]+@"), rf"\1{REDACTED}@"),
)
#: The words the first of `CREDENTIAL_PATTERNS` starts with (see `mask_credentials`).
_BEARER_WORDS: Final = ("bearer", "basic")


def mask_credentials(text: str) -> str:
    """`text` with credential-looking text (`CREDENTIAL_PATTERNS`) masked: the same as applying
    each pattern in turn, but a pattern's scan (about 0.1 ms for a tool result of a few thousand
    characters) is skipped where the text cannot hold a match: a key needs `k-`, a URL password
    `://`, and a bearer or basic token its word in any case. That word's test is made on ASCII
    text only: case-insensitively a few other letters match too (U+017F as `s`, U+0130 and U+0131
    as `i`), so any other text is always scanned."""
    (bearer, replaces_bearer), (key, replaces_key), (url, replaces_url) = CREDENTIAL_PATTERNS
    lowered = text.lower() if text.isascii() else None
    if lowered is None or any(word in lowered for word in _BEARER_WORDS):
        text = bearer.sub(replaces_bearer, text)
    if "k-" in text:  # sk-, pk-, rk-
        text = key.sub(replaces_key, text)
    if "://" in text:
        text = url.sub(replaces_url, text)
    return text


#: openbell's own tokens (an agent's `obt_...`, a cycle's `obc_...`), masked by `mask_values`.
TOKEN_PATTERN: Final = re.compile(r"(?<![A-Za-z0-9])ob[tc]_[A-Za-z0-9_-]{8,}")
#: Where a token could start: one scan for the texts (nearly all) that hold none.
_TOKEN_START: Final = re.compile(r"ob[tc]_")
_KEY_PREFIX: Final = re.compile(r"[A-Za-z0-9]{1,5}[-_]")
#: Where a cut text ends: a secret's start right before one of these is masked.
_CUT_END: Final = r"(?=\.\.\.|\u2026|\Z)"


def _hex(value: int, width: int) -> str:
    """`value` in hex, each letter matching either case."""
    digits = f"{value:0{width}x}"
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits)


def _char(c: str) -> str:
    """A pattern for character `c` in any of its encodings (see the module docstring)."""
    code = ord(c)
    forms = [re.escape(c)]
    if code <= 0xFFFF:
        forms.append(r"\\+u" + _hex(code, 4))
    if c in '"\\/':
        forms.append(r"\\+" + re.escape(c))
    forms.append("".join(r"%(?:25)*" + _hex(byte, 2) for byte in c.encode()))
    forms.append(rf"&#0*{code};|&#[xX]0*{_hex(code, 2 if code < 0x100 else 4)};")
    if c == " ":
        forms.append(r"\+")
    return "(?:" + "|".join(forms) + ")"


def _variants(secret: str) -> Iterator[str]:
    """The secret, then the secret without each key prefix, while still long enough."""
    rest = secret
    while len(rest) >= MIN_SECRET_CHARS:
        yield rest
        prefix = _KEY_PREFIX.match(rest)
        if prefix is None:
            return
        rest = rest[prefix.end() :]


def _base64_forms(secret: str) -> Iterator[str]:
    """What the Base64 of any text containing `secret` surely contains, in each alignment."""
    raw = secret.encode()
    for skip in range(3):
        body = raw[skip:]
        body = body[: len(body) - len(body) % 3]
        if len(body) * 4 // 3 >= MIN_SECRET_CHARS:
            encoded = base64.b64encode(body).decode()
            yield encoded
            yield encoded.replace("+", "-").replace("/", "_")


def _cut_pattern(parts: list[str]) -> str:
    """A secret's first `MIN_SECRET_CHARS` characters starting the last word of a cut text."""
    return "".join(parts[:MIN_SECRET_CHARS]) + r"[^\s\"'<>]*?" + _CUT_END


def _pattern(secrets: tuple[str, ...], char: Callable[[str], str]) -> re.Pattern[str]:
    """One pattern matching every form of every secret (each character written as `char`
    makes it), longest forms first."""
    whole: list[str] = []
    cut: list[str] = []
    literal: set[str] = set()
    for secret in secrets:
        for variant in _variants(secret):
            parts = [char(c) for c in variant]
            whole.append("".join(parts))
            cut.append(_cut_pattern(parts))
        literal.update(_base64_forms(secret))
    alternatives = [*sorted(map(re.escape, literal), key=len, reverse=True), *whole, *cut]
    return re.compile("|".join(alternatives))


def _markers(secrets: tuple[str, ...]) -> re.Pattern[str]:
    """Texts without a match can hold the secrets only raw or in Base64 (the fast path): the
    start of a JSON escape, a percent-encoded byte or an HTML reference (a `%` of "5% of NAV" is
    none)."""
    markers = [r"\\u[0-9a-fA-F]{4}", r"%[0-9a-fA-F]{2}", "&#"]
    escaped = sorted({c for secret in secrets for c in secret if c in '"\\/'})
    markers += [r"\\" + re.escape(c) for c in escaped]
    if any(" " in secret for secret in secrets):
        markers.append(r"\+")
    return re.compile("|".join(markers))


def _heads(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """What every raw or Base64 form of the secrets starts with."""
    heads = {v[:MIN_SECRET_CHARS] for secret in secrets for v in _variants(secret)}
    heads.update(form for secret in secrets for form in _base64_forms(secret))
    return tuple(heads)


class Redactor:
    """Masks the configured `secrets` in every form (and, with `mask`, credential-looking text).

    Values shorter than `MIN_SECRET_CHARS` and None are ignored. A redactor never shows its
    secrets: its `repr` counts them.
    """

    __slots__ = ("_encoded", "_heads", "_markers", "_raw", "_secrets")

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        kept = {s for s in secrets if s is not None and len(s) >= MIN_SECRET_CHARS}
        self._secrets: tuple[str, ...] = tuple(sorted(kept, key=len, reverse=True))
        # Two patterns: every encoding (slow), and raw and Base64 only, for texts without a
        # sign of an encoding (most of them); a text holding no form's start skips both.
        self._encoded = _pattern(self._secrets, _char)
        self._raw = _pattern(self._secrets, re.escape)
        self._markers = _markers(self._secrets)
        self._heads = _heads(self._secrets)

    def __repr__(self) -> str:
        return f"Redactor({self.secret_count} secrets)"

    @property
    def secret_count(self) -> int:
        """How many secrets it masks by value."""
        return len(self._secrets)

    def with_secrets(self, secrets: Iterable[str | None]) -> Redactor:
        """A redactor masking these `secrets` as well as this one's."""
        return Redactor([*self._secrets, *secrets])

    def mask_values(self, text: str) -> str:
        """`text` with every form of every configured secret, and openbell's tokens, masked."""
        if len(text) < MIN_SECRET_CHARS:
            return text
        if _TOKEN_START.search(text) is not None:
            text = TOKEN_PATTERN.sub(REDACTED, text)
        if not self._secrets:
            return text
        if self._markers.search(text) is not None:
            return self._encoded.sub(REDACTED, text)
        if any(head in text for head in self._heads):
            return self._raw.sub(REDACTED, text)
        return text

    def may_mask(self, text: str) -> bool:
        """Whether `mask_values` could change `text` (no: it surely returns `text` as it is).

        It is True for any text holding a text it would change: `text` may be many texts joined,
        to decide for all of them in one scan (what the store's batches do, `db.py`)."""
        if _TOKEN_START.search(text) is not None:
            return True
        if not self._secrets:
            return False
        return self._markers.search(text) is not None or any(h in text for h in self._heads)

    def mask(self, text: str) -> str:
        """`text` with the configured secrets and credential-looking text masked."""
        return mask_credentials(self.mask_values(text))

    def __call__(self, text: str | None) -> str | None:
        """`mask(text)`; None stays None."""
        return None if text is None else self.mask(text)
