"""Masking secrets in everything openbell stores or prints: the one redactor.

This module owns `Redactor`. It is built with the configured secret *values* (the API keys read
through `api_key_env`, the store URL's password, bearer tokens) and masks each of them, as
`[redacted]`, in every form it takes in text (`secret_forms.py` lists them):

- raw, and without a key prefix (`sk-abc...` is also masked as `abc...`);
- the cheap disguises: reversed, ROT13, spaced out or broken over lines, with zero-width or other
  invisible characters inserted (found as if they were not there), with `+` for its spaces, its
  bytes in hex (either case), Base64 or Base32;
- escaped, each character independently: JSON `\\uXXXX` escapes, percent-encoding (each also
  applied twice), HTML character references and `\\xHH` byte escapes;
- cut short: the last word of a text (or the word before a `...` or an ellipsis that marks a cut)
  holding a secret's first `MIN_SECRET_CHARS` characters is masked, so cutting a long message
  never leaves a usable piece behind;
- cut into pieces: pieces that together make up a secret, each long enough not to occur by chance,
  in one text or across the texts of one write (`mask_together`, `secret_pieces.py`).

Encodings stacked on one another, pieces of a few characters, and pieces spread over separate
writes (two log lines, two turns of a cycle) are not found: masking is the backstop, not the
wall. The wall is that nothing untrusted can read a secret (the sandboxes, `docs/design.md`).

A secret shorter than `MIN_SECRET_CHARS` (8) is not masked by value: a 3-character password would
blank every word it occurs in and still be guessable. Use longer secrets; `openbell` warns at
startup about any it cannot mask.

openbell's own tokens are masked whatever their value, in every redactor: an agent's bearer token
(`obt_...`, `store/agent_tokens.py`) and a cycle's token (`obc_...`) are high-entropy URL-safe
text behind a prefix nothing else uses, so `TOKEN_PATTERN` finds them without knowing them.

`mask_values` masks only the configured values and openbell's tokens; the store applies it (as
`mask_together`, over the texts of each statement) to every text it writes (`db.make_engine`
installs it on the engine), where masking anything else could change an identifier. A text is
decided by a few substring searches when it holds no sign of a secret (nearly all): the start of
an escape (`secret_forms.markers`), a plain form's head once whitespace and invisible characters
are dropped, a secret's start in its last word, a secret's first and last piece; the patterns run
only on the others. `mask` also masks text that looks like a credential whatever its value
(`Bearer ...` and `Basic ...` tokens, `sk-`/`pk-`/`rk-` keys, URL passwords): the logs, trace rows
and error lines go through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from openbell.store.secret_forms import (
    BASE32_MARKS,
    CUT_WORD,
    HEX_MARKS,
    MIN_SECRET_CHARS,
    PlainForms,
    Squeezed,
    ascii_lower,
    cut_heads,
    cut_pattern,
    escaped_pattern,
    has_run,
    markers,
    squeezed_bytes,
    variants,
    widen,
)
from openbell.store.secret_pieces import anchors, covering_pieces, min_piece_chars

__all__ = [
    "CREDENTIAL_PATTERNS",
    "MIN_SECRET_CHARS",
    "REDACTED",
    "TOKEN_PATTERN",
    "Redactor",
    "mask_credentials",
]

REDACTED: Final = "[redacted]"

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
#: The last word of a text (what a cut secret would be).
_LAST_WORD: Final = re.compile(CUT_WORD + r"*\Z")
#: What marks a cut in the middle of a text.
_CUT_MARKS: Final = ("...", "\u2026")


def _prefixes(body: str, secrets: Iterable[str]) -> tuple[str, ...]:
    """The key prefixes (`sk-proj-`, `proj-`) that go before `body` in `secrets`, longest
    first."""
    found = {
        variant.removesuffix(body)
        for secret in secrets
        for variant in variants(secret)
        if variant != body and variant.endswith(body)
    }
    return tuple(sorted(found, key=len, reverse=True))


def _encoded(texts: Iterable[str]) -> tuple[bytes, ...]:
    return tuple(text.encode("utf-8", "surrogatepass") for text in texts)


def _mask_spans(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` with each of `spans` (merged where they overlap) masked."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    parts: list[str] = []
    last = 0
    for start, end in merged:
        parts += [text[last:start], REDACTED]
        last = end
    parts.append(text[last:])
    return "".join(parts)


def _word_before(text: str, end: int) -> str:
    """The word of `text` that ends at `end` (see `secret_forms.CUT_WORD`)."""
    window = 64
    while True:
        start = max(0, end - window)
        found = _LAST_WORD.search(text, start, end)
        if found is None:  # pragma: no cover  (the pattern matches the empty word at the end)
            return ""
        if found.start() > start or start == 0:
            return text[found.start() : end]
        window *= 4


def _cut_ends(text: str) -> Iterable[int]:
    """Where a cut secret could end in `text`: its end, and every `...` or ellipsis."""
    yield len(text)
    for mark in _CUT_MARKS:
        at = text.find(mark)
        while at != -1:
            yield at
            at = text.find(mark, at + 1)


class Redactor:
    """Masks the configured `secrets` in every form (and, with `mask`, credential-looking text).

    Values shorter than `MIN_SECRET_CHARS` and None are ignored. A redactor never shows its
    secrets: its `repr` counts them. What it looks for is worked out once, when it is made; its
    patterns are compiled the first time a text needs them (most texts are decided by the cheap
    checks alone).
    """

    __slots__ = (
        "_cut",
        "_cut_heads",
        "_escaped",
        "_forms",
        "_head_bytes",
        "_markers",
        "_pieces",
        "_runs",
        "_secrets",
    )

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        kept = {s for s in secrets if s is not None and len(s) >= MIN_SECRET_CHARS}
        self._secrets: tuple[str, ...] = tuple(sorted(kept, key=len, reverse=True))
        self._forms = PlainForms.of(self._secrets)
        heads = self._forms.heads()
        # (as they are, hex, Base32): what the cheap checks search, in bytes
        self._head_bytes = (
            _encoded(heads.exact + heads.base64s),
            _encoded(heads.hexes),
            _encoded(heads.base32s),
        )
        # the runs of hex (squeezed) and Base32 (as written, over two lines) a head needs
        self._runs = (
            min(map(len, heads.hexes), default=0),
            min(map(len, heads.base32s), default=0) // 2,
        )
        self._cut_heads = cut_heads(self._secrets)
        self._markers = markers(self._secrets)
        # (body, the shortest piece looked for, the key prefixes that go before the body)
        self._pieces: tuple[tuple[str, int, tuple[str, ...]], ...] = tuple(
            (body, size, _prefixes(body, self._secrets))
            for body in sorted({list(variants(s))[-1] for s in self._secrets})
            if len(body) >= (size := min_piece_chars(body))
        )
        self._escaped: re.Pattern[str] | None = None
        self._cut: re.Pattern[str] | None = None

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
        """`text` with every form of every configured secret, a secret cut into pieces within
        it, and openbell's tokens, masked."""
        if len(text) < MIN_SECRET_CHARS:
            return text
        return self._mask_pieces([text], [self._mask_forms(text)])[0]

    def mask_together(self, texts: Sequence[str]) -> list[str]:
        """`texts` (those of one write) each masked as `mask_values` masks it, and the pieces of
        a secret cut into pieces across them masked too (`secret_pieces`)."""
        masked = [
            text if len(text) < MIN_SECRET_CHARS else self._mask_forms(text) for text in texts
        ]
        return self._mask_pieces(texts, masked)

    def may_mask(self, text: str) -> bool:
        """Whether `mask_values` could change `text` (no: it surely returns `text` as it is).

        It is True for any text holding a text it would change: `text` may be many texts joined,
        to decide for all of them in one scan (what the store's batches do, `db.py`); it is also
        True when the texts joined may hold a secret in pieces (`mask_together`)."""
        if _TOKEN_START.search(text) is not None:
            return True
        if not self._secrets:
            return False
        return (
            self._holds_escaped(text)
            or self._holds_plain(text)
            or any(head in text for head in self._cut_heads)
            or any(body[:size] in text for body, size, _ in self._pieces)
        )

    def mask(self, text: str) -> str:
        """`text` with the configured secrets and credential-looking text masked."""
        return mask_credentials(self.mask_values(text))

    def __call__(self, text: str | None) -> str | None:
        """`mask(text)`; None stays None."""
        return None if text is None else self.mask(text)

    # -- internals ----------------------------------------------------------------------------

    def _mask_forms(self, text: str) -> str:
        """`text` with openbell's tokens and every whole form of every secret masked."""
        if _TOKEN_START.search(text) is not None:
            text = TOKEN_PATTERN.sub(REDACTED, text)
        if not self._secrets:
            return text
        if self._holds_escaped(text):
            if self._escaped is None:
                self._escaped = escaped_pattern(self._secrets)
            text = self._escaped.sub(REDACTED, text)
        if self._holds_plain(text):
            text = self._mask_plain(text)
        if self._holds_cut(text):
            if self._cut is None:
                self._cut = cut_pattern(self._secrets)
            text = self._cut.sub(REDACTED, text)
        return text

    def _holds_escaped(self, text: str) -> bool:
        """Whether `text` may hold an escaped form (`secret_forms.markers`)."""
        return any(
            start in text and marker.search(text) is not None for start, marker in self._markers
        )

    def _holds_plain(self, text: str) -> bool:
        """Whether `text` may hold a plain form: its squeezed text holds a head
        (`PlainForms.heads`) as it is, or in lower case after a run of hex (in the squeezed text:
        a hex dump's bytes may be spaced out) or of Base32 (in the text: prose squeezed is all
        letters; half the shortest form, for one wrapped over two lines) long enough for one."""
        exact, hexes, base32s = self._head_bytes
        squeezed = squeezed_bytes(text)
        if any(head in squeezed for head in exact):
            return True
        hex_run, base32_run = self._runs
        folded: list[bytes] = []
        if hexes and has_run(squeezed, HEX_MARKS, hex_run):
            folded.extend(hexes)
        if base32s and has_run(text.encode("utf-8", "surrogatepass"), BASE32_MARKS, base32_run):
            folded.extend(base32s)
        if not folded:
            return False
        lowered = squeezed.lower()
        return any(head in lowered for head in folded)

    def _mask_plain(self, text: str) -> str:
        """`text` with every plain form of every secret masked (found in the squeezed text, then
        masked in the text with what was inserted between its characters)."""
        squeezed = Squeezed.of(text)
        lowered = ascii_lower(squeezed.text)
        spans: list[tuple[int, int]] = []
        for needles, folded, blob in self._forms.searches():
            haystack = lowered if folded else squeezed.text
            for needle in needles:
                at = haystack.find(needle)
                while at != -1:
                    span = squeezed.span(at, at + len(needle))
                    spans.append(span if blob is None else widen(text, *span, blob))
                    at = haystack.find(needle, at + 1)
        return _mask_spans(text, spans)

    def _holds_cut(self, text: str) -> bool:
        """Whether a word that ends where `text` may have been cut holds a secret's start."""
        for end in _cut_ends(text):
            word = _word_before(text, end)
            if any(head in word for head in self._cut_heads):
                return True
        return False

    def _mask_pieces(self, texts: Sequence[str], masked: list[str]) -> list[str]:
        """`masked` (`texts` with their whole forms masked) with the pieces of each secret that
        `texts` hold whole masked too, wherever they still show. Cheap first checks: its first and
        last pieces hold its first and last characters, and one of them still shows unless the
        whole secret was masked (only a cut secret's start can be masked alone)."""
        for body, size, prefixes in self._pieces:
            first, last = anchors(body, size)
            if (
                not any(first in text for text in texts)
                or not any(last in text for text in texts)
                or not any(first in text or last in text for text in masked)
            ):
                continue
            for piece in covering_pieces(body, texts, size) or ():
                # the piece that starts the body takes the key prefix before it along
                starts = [prefix + piece for prefix in prefixes if body.startswith(piece)]
                for shown in [*starts, piece]:
                    masked = [text.replace(shown, REDACTED) for text in masked]
        return masked
