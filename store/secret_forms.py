"""The forms a configured secret takes in text, and the patterns that find them (for `redact.py`).

This module owns how a secret is looked for. Each secret has its variants: itself, then itself
without each key prefix (a leading segment of one to five letters or digits and a `-` or `_`:
`sk-`, then `proj-` of `sk-proj-...`) while what is left is still `MIN_SECRET_CHARS` long. Each
variant is looked for in three kinds of form:

- plain forms (`PlainForms`), found in the text with its whitespace and invisible characters
  (`INVISIBLE`: zero-width spaces and joiners, bidirectional marks, the soft hyphen, variation
  selectors, the byte-order mark), also as JSON escapes them (`\\n`, `\\u200b`), left out
  (`Squeezed`), so a secret spaced out, broken over
  lines or with zero-width characters inserted is found as well (and masked with what was
  inserted): the variant as it is (its own spaces may be left out too), reversed, in ROT13, with
  `+` for its spaces (form encoding), its UTF-8 bytes in hex (either case), in Base64 (standard
  and URL-safe) in the three byte alignments it can start at, and in Base32 (either case) in the
  five;
- escaped forms (`escaped_pattern`): every character, independently, as itself, as a JSON
  `\\uXXXX` escape (any case, also escaped again: `\\\\u002d`), percent-encoded (any case, also
  encoded twice: `%252D`), as an HTML character reference (`&#45;`, `&#x2d;`) or as `\\xHH` escapes
  of its bytes; a text holds one only if it holds a `marker` of an escape;
- cut short: the last word of a text (the one right before its end, or before a `...` or an
  ellipsis that marks a cut) holding a variant's first `MIN_SECRET_CHARS` characters
  (`CUT_END`).

Encodings applied one over another (the hex of the reversed secret, a reversed Base64) are not
looked for. A text need not be searched for the plain forms when its squeezed text holds none of
`PlainForms.heads` (every plain form of every variant contains one of them) as they are, or in
lower case after a long enough run of hex or Base32 characters (`has_run`), nor for the escaped
forms when it holds no `markers`.
"""

from __future__ import annotations

import base64
import bisect
import codecs
import functools
import re
import string
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final

#: A secret (or the rest of a key after its prefix) shorter than this is not masked by value.
MIN_SECRET_CHARS: Final = 8
#: Characters that show as nothing, as a regex class body: found between a secret's characters.
INVISIBLE: Final = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
)
#: Where a cut text ends: a secret's start right before one of these is masked.
CUT_END: Final = r"(?=\.\.\.|\u2026|\Z)"
#: What ends a word of a cut text (the regex class of a cut word is everything else).
CUT_WORD: Final = r"[^\s\"'<>]"

_INVISIBLE_RE: Final = re.compile(f"[{INVISIBLE}]+")
_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_ASCII_SPACE: Final = bytes(byte for byte in range(128) if chr(byte).isspace())
_KEY_PREFIX: Final = re.compile(r"[A-Za-z0-9]{1,5}[-_]")


@functools.cache
def _separators() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A separator (whitespace or `INVISIBLE`) as JSON escapes it (`\\n`, `\\t`, `\\u200b`, also
    escaped again), and a run of separators, escaped or not. Built when first needed: finding the
    separators' code points and compiling their alternation take about 15 ms, which a command
    that never masks a secret need not spend at its start."""
    # One pass of the regex engine over the Basic Multilingual Plane (`\\s` is `str.isspace`),
    # not a match per code point.
    everything = "".join(map(chr, range(0x10000)))
    codes = [f"{ord(char):04x}" for char in re.findall(f"[\\s{INVISIBLE}]", everything)]
    escaped = r"\\+(?:[nrtfv]|(?i:u(?:" + "|".join(codes) + ")))"
    return re.compile(escaped), re.compile(rf"(?:[\s{INVISIBLE}]|{escaped})+")


def squeeze(text: str) -> str:
    """`text` without its whitespace and invisible characters, also as JSON escapes them."""
    joined = "".join(text.split())
    if "\\" in joined:
        joined = _separators()[0].sub("", joined)
    return joined if joined.isascii() else _INVISIBLE_RE.sub("", joined)


def squeezed_bytes(text: str) -> bytes:
    """`squeeze(text)` in UTF-8 (what the cheap checks search: bytes are squeezed fastest)."""
    if text.isascii() and "\\" not in text:
        return text.encode("ascii").translate(None, _ASCII_SPACE)
    return squeeze(text).encode("utf-8", "surrogatepass")


def variants(secret: str) -> Iterator[str]:
    """The secret, then the secret without each key prefix, while still long enough."""
    rest = secret
    while len(rest) >= MIN_SECRET_CHARS:
        yield rest
        prefix = _KEY_PREFIX.match(rest)
        if prefix is None:
            return
        rest = rest[prefix.end() :]


def _aligned(raw: bytes, block: int) -> Iterator[bytes]:
    """`raw` from each of its first `block` bytes on, cut to whole blocks."""
    for skip in range(block):
        body = raw[skip:]
        body = body[: len(body) - len(body) % block]
        if body:
            yield body


def base64_forms(text: str) -> Iterator[str]:
    """What the Base64 of any text containing `text` surely contains, in each alignment."""
    for body in _aligned(text.encode(), 3):
        encoded = base64.b64encode(body).decode()
        if len(encoded) >= MIN_SECRET_CHARS:
            yield encoded
            yield encoded.replace("+", "-").replace("/", "_")


def base32_forms(text: str) -> Iterator[str]:
    """What the Base32 of any text containing `text` surely contains, in each alignment."""
    for body in _aligned(text.encode(), 5):
        encoded = base64.b32encode(body).decode()
        if len(encoded) >= MIN_SECRET_CHARS:
            yield encoded


#: What a blob of Base64, Base32 or hex is made of: a match in one is masked with all of its blob.
BASE64_CHARS: Final = frozenset(string.ascii_letters + string.digits + "+/=-_")
BASE32_CHARS: Final = frozenset(string.ascii_letters + "234567=")
HEX_CHARS: Final = frozenset(string.hexdigits)


@dataclass(frozen=True, slots=True)
class PlainForms:
    """Plain forms, squeezed (see the module docstring): `exact` (the variant, reversed, in
    ROT13, with `+` for spaces) and `base64s` are found as they are; `hexes` (UTF-8 bytes in hex)
    and `base32s` in lower case, in a text with its ASCII letters in lower case
    (`ascii_lower`)."""

    exact: tuple[str, ...]
    base64s: tuple[str, ...]
    hexes: tuple[str, ...]
    base32s: tuple[str, ...]

    @classmethod
    def of(cls, secrets: Iterable[str]) -> PlainForms:
        """Every plain form of every variant of `secrets`."""
        exact: set[str] = set()
        base64s: set[str] = set()
        hexes: set[str] = set()
        base32s: set[str] = set()
        for secret in secrets:
            for variant in variants(secret):
                exact.update((variant, variant[::-1], codecs.encode(variant, "rot13")))
                if " " in variant:
                    exact.add(variant.replace(" ", "+"))
                base64s.update(base64_forms(variant))
                hexes.add(variant.encode().hex())
                base32s.update(form.lower() for form in base32_forms(variant))
        return cls(
            tuple(sorted({squeeze(form) for form in exact})),
            tuple(sorted(base64s)),
            tuple(sorted(hexes)),
            tuple(sorted(base32s)),
        )

    def heads(self) -> PlainForms:
        """The fewest of these forms such that each of them contains one (what a squeezed text
        holding one of these forms surely holds)."""
        return PlainForms(
            *(_fewest(forms) for forms in (self.exact, self.base64s, self.hexes, self.base32s))
        )

    def searches(self) -> tuple[tuple[tuple[str, ...], bool, frozenset[str] | None], ...]:
        """How each kind of form is searched: (the forms, whether in lower case, what its blob
        is made of, None for the forms that are no blob)."""
        return (
            (self.exact, False, None),
            (self.base64s, False, BASE64_CHARS),
            (self.hexes, True, HEX_CHARS),
            (self.base32s, True, BASE32_CHARS),
        )


def widen(text: str, start: int, end: int, chars: frozenset[str]) -> tuple[int, int]:
    """`[start, end)` of `text` widened over the `chars` on either side (to a whole blob)."""
    while start > 0 and text[start - 1] in chars:
        start -= 1
    while end < len(text) and text[end] in chars:
        end += 1
    return start, end


def _fewest(forms: Iterable[str]) -> tuple[str, ...]:
    """The shortest of `forms` such that each of them contains one."""
    kept: list[str] = []
    for form in sorted(set(forms), key=lambda form: (len(form), form)):
        if not any(head in form for head in kept):
            kept.append(form)
    return tuple(kept)


def run_marks(alphabet: str) -> bytes:
    """A `bytes.translate` table marking the bytes of `alphabet` (ASCII) `x`, the others `.`."""
    return bytes(ord("x") if chr(byte) in alphabet else ord(".") for byte in range(256))


#: The alphabets of `PlainForms.hexes` and `PlainForms.base32s` (in either case), as `run_marks`.
HEX_MARKS: Final = run_marks(string.hexdigits)
BASE32_MARKS: Final = run_marks(string.ascii_letters + "234567")


def has_run(data: bytes, marks: bytes, length: int) -> bool:
    """Whether `data` holds `length` bytes in a row of the alphabet `marks` marks."""
    return length > 0 and b"x" * length in data.translate(marks)


def cut_heads(secrets: Iterable[str]) -> tuple[str, ...]:
    """What a cut word holds when it holds a cut secret: a variant's first characters."""
    return _fewest(v[:MIN_SECRET_CHARS] for secret in secrets for v in variants(secret))


def _cut(variant: str, char: Callable[[str], str]) -> str:
    """A variant's first `MIN_SECRET_CHARS` characters in a text's last word (see `CUT_END`)."""
    head = "".join(char(c) for c in variant[:MIN_SECRET_CHARS])
    return head + CUT_WORD + "*?" + CUT_END


def cut_pattern(secrets: Iterable[str]) -> re.Pattern[str]:
    """One pattern matching the cut forms of every secret."""
    return re.compile(
        "|".join(_cut(variant, re.escape) for secret in secrets for variant in variants(secret))
    )


@dataclass(frozen=True, slots=True)
class Squeezed:
    """A text without its whitespace and invisible characters (`squeeze`), and where each of its
    pieces (between two runs of them) starts in the text and in the squeezed text."""

    text: str
    starts: tuple[int, ...]
    squeezed_starts: tuple[int, ...]

    @classmethod
    def of(cls, original: str) -> Squeezed:
        """`original` squeezed."""
        pieces: list[tuple[int, int]] = []
        at = 0
        for run in _separators()[1].finditer(original):
            pieces.append((at, run.start()))
            at = run.end()
        pieces.append((at, len(original)))
        starts, squeezed_starts, parts = [], [], []
        length = 0
        for start, end in pieces:
            if end > start:
                starts.append(start)
                squeezed_starts.append(length)
                parts.append(original[start:end])
                length += end - start
        return cls("".join(parts), tuple(starts), tuple(squeezed_starts))

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Where the squeezed text's `[start, end)` (not empty) lies in the text, with the
        whitespace and invisible characters inside it."""
        return self._position(start), self._position(end - 1) + 1

    def _position(self, index: int) -> int:
        piece = bisect.bisect_right(self.squeezed_starts, index) - 1
        return self.starts[piece] + index - self.squeezed_starts[piece]


def ascii_lower(text: str) -> str:
    """`text` with its ASCII letters in lower case (and nothing else changed, so every character
    stays where it was)."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def _hex(value: int, width: int) -> str:
    """`value` in hex, each letter matching either case."""
    digits = f"{value:0{width}x}"
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits)


def _char(c: str) -> str:
    """A pattern for character `c` in any of its escaped forms (see the module docstring)."""
    code = ord(c)
    forms = [re.escape(c)]
    if code <= 0xFFFF:
        forms.append(r"\\+u" + _hex(code, 4))
    if c in '"\\/':
        forms.append(r"\\+" + re.escape(c))
    forms.append("".join(r"%(?:25)*" + _hex(byte, 2) for byte in c.encode()))
    forms.append(rf"&#0*{code};|&#[xX]0*{_hex(code, 2 if code < 0x100 else 4)};")
    forms.append("".join(r"\\+x" + _hex(byte, 2) for byte in c.encode()))
    if c == " ":
        forms.append(r"\+")
    return "(?:" + "|".join(forms) + ")"


def escaped_pattern(secrets: Iterable[str]) -> re.Pattern[str]:
    """One pattern matching every escaped form of every secret (longest first), then their cut
    forms."""
    whole: list[str] = []
    cut: list[str] = []
    for secret in secrets:
        for variant in variants(secret):
            whole.append("".join(_char(c) for c in variant))
            cut.append(_cut(variant, _char))
    return re.compile("|".join([*whole, *cut]))


def markers(secrets: Iterable[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """What a text holding an escaped form holds (a `%` of "5% of NAV" is none), as (what each
    match starts with, the pattern): the start of a JSON escape, a `\\xHH` escape or (for a
    secret holding one) an escaped quote, backslash or slash; a percent-encoded byte; an HTML
    reference."""
    escaped = sorted({c for secret in secrets for c in secret if c in '"\\/'})
    backslash = ["u[0-9a-fA-F]{4}", "x[0-9a-fA-F]{2}", *(re.escape(c) for c in escaped)]
    return (
        ("\\", re.compile(r"\\(?:" + "|".join(backslash) + ")")),
        ("%", re.compile("%[0-9a-fA-F]{2}")),
        ("&#", re.compile("&#")),
    )
