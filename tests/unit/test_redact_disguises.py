"""The redactor against the cheap disguises of a secret: reversed, ROT13, spaced out, broken over
lines, with zero-width characters inserted, in hex (either case, also byte by byte) or Base32
(either case, in every alignment), and cut into pieces within a text or across the texts of one
write. Each disguised secret is masked (checked with the test kit's scanner, which decodes instead
of encoding), and ordinary text that only looks alike is left as it is: hex digests, Base32 codes,
reversed and ROT13 words, spaced-out words, emoji joined with zero-width joiners, and a piece of a
secret that a text holds by chance."""

from __future__ import annotations

import base64
import codecs
import hashlib
import json
import time

import pytest

from openbell.store.redact import REDACTED, Redactor
from openbell_testkit.secrets import leaks

KEY = "sk-proj-Abc123def456GHI789xyz"
HEX_KEY = "sk-3f9a1c7e5b2d4f6a8c0e9d7b5a3c1e2f"  # a DeepSeek-style key
PASSWORD = "correct horse battery staple 42"  # noqa: S105  (a test value)
SECRETS = (KEY, HEX_KEY, PASSWORD)


def hex_of(text: str) -> str:
    return text.encode().hex()


def base32_after(prefix: bytes, text: str) -> str:
    return base64.b32encode(prefix + text.encode()).decode()


DISGUISES = {
    "reversed": KEY[::-1],
    "reversed without sk-": KEY.removeprefix("sk-")[::-1],
    "rot13": codecs.encode(KEY, "rot13"),
    "spaced out": " ".join(KEY),
    "spaced out with tabs and runs": "\t  ".join(KEY),
    "one character a line": "\n".join(KEY),
    "broken over lines": "\r\n".join(KEY[i : i + 5] for i in range(0, len(KEY), 5)),
    "zero-width spaces": "\u200b".join(KEY),
    "zero-width joiners and a byte-order mark": KEY[:9] + "\u200d\ufeff" + KEY[9:],
    "soft hyphens and bidi marks": "\u00ad".join(KEY[:10]) + "\u200e\u202a" + KEY[10:],
    "word joiners and variation selectors": "\u2060".join(KEY[:6]) + "\ufe0f" + KEY[6:],
    "hex": hex_of(KEY),
    "hex upper case": hex_of(KEY).upper(),
    "hex mixed case": "".join(c.upper() if i % 3 else c for i, c in enumerate(hex_of(KEY))),
    "hex byte by byte": " ".join(f"{b:02x}" for b in KEY.encode()),
    "hex bytes on lines": "\n".join(hex_of(KEY)[i : i + 16] for i in range(0, 58, 16)),
    "hex without sk-proj-": hex_of(KEY.removeprefix("sk-proj-")),
    "byte escapes": "".join(f"\\x{b:02x}" for b in KEY.encode()),
    "base32": base32_after(b"", KEY),
    "base32 lower case": base32_after(b"", KEY).lower(),
    **{f"base32 after {n} bytes": base32_after(b"x" * n, KEY) for n in range(1, 5)},
    "base32 wrapped": "\n".join(base32_after(b"ab", KEY)[i : i + 32] for i in (0, 32)),
    "hex of the other key": hex_of(HEX_KEY),
    "the other key reversed": HEX_KEY[::-1],
    "password spaced out": " ".join(PASSWORD),
    "password without its spaces": PASSWORD.replace(" ", ""),
    "password form-encoded": PASSWORD.replace(" ", "+"),
    "password reversed": PASSWORD[::-1],
    "password in base32": base32_after(b"pw", PASSWORD),
}


@pytest.mark.parametrize("disguise", list(DISGUISES.values()), ids=list(DISGUISES))
def test_a_disguised_secret_is_masked(disguise: str) -> None:
    redactor = Redactor(SECRETS)
    text = f'{{"reason": "paid with {disguise} today"}}'
    assert leaks(text, SECRETS) != []  # the scanner sees through the disguise
    masked = redactor.mask_values(text)
    assert leaks(masked, SECRETS) == []
    assert REDACTED in masked
    assert masked.startswith('{"reason": "paid with ')
    assert masked.endswith(' today"}')
    # the store decides a whole write in one scan: the disguise is seen among other texts
    write = ["price 187.30", text, "2025-09-01"]
    assert redactor.may_mask("\x00".join(write))


@pytest.mark.parametrize("disguise", list(DISGUISES.values()), ids=list(DISGUISES))
def test_a_disguised_secret_is_masked_inside_json_written_by_a_program(disguise: str) -> None:
    redactor = Redactor(SECRETS)
    document = json.dumps({"note": f"x {disguise} y", "shares": 5})
    masked = json.loads(redactor.mask_values(document))
    assert masked["shares"] == 5
    assert leaks(masked["note"], SECRETS) == []


ORDINARY = [
    f"sha256 {hashlib.sha256(b'a report').hexdigest()} of the report",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 and uuid 123e4567-e89b-12d3-a456-426614174000",
    f"a TOTP secret {base64.b32encode(b'not a key at all').decode()} and JBSWY3DPEHPK3PXP",
    f"{base64.b32encode(b'sk-proj-Abc123').decode()} is only the start",
    "reversed words: sdrawer, tnemucod; rot13: uryyb jbeyq, fx-cebw- prefixes",
    "s p a c e d  o u t words and a table:\n| 187.30 | 188.10 |\n| 2025-09-01 | 2025-09-02 |",
    "a family emoji \U0001f468\u200d\U0001f469\u200d\U0001f467 and a flag \U0001f3f3\ufe0f",
    "proj-Abc1 and 23def are short pieces, G0aZ too",
    "hex of part of the key: " + hex_of("Abc123d"),
    '{"bars":[{"open":"187.50","volume":"89457561.00"}],"as_of":"2025-10-30T07:00:00Z"}',
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_that_looks_alike_is_left_alone(text: str) -> None:
    redactor = Redactor(SECRETS)
    assert redactor.mask_values(text) == text
    assert redactor.mask_together([text, text]) == [text, text]


def test_a_secret_cut_into_pieces_across_the_texts_of_one_write_is_masked() -> None:
    redactor = Redactor([KEY])
    halves = [f"my key, part one: {KEY[:16]}", f"and part two is {KEY[16:]}!"]
    masked = redactor.mask_together(halves)
    assert masked == ["my key, part one: [redacted]", "and part two is [redacted]!"]
    # three pieces, in another order, among other texts and inside words
    pieces = ["x" + KEY[20:] + "y", "ordinary text", f"({KEY[8:14]})", f"{KEY[:8]}|{KEY[14:20]}|"]
    masked = redactor.mask_together(pieces)
    assert leaks("".join(masked), [KEY]) == []
    assert masked[0] == f"x{REDACTED}y"
    assert masked[1] == "ordinary text"
    assert masked[2] == f"({REDACTED})"


def test_a_secret_cut_into_pieces_within_one_text_is_masked() -> None:
    redactor = Redactor([KEY])
    text = f"first {KEY[14:]} then {KEY[:14]} and no more"
    masked = redactor.mask_values(text)
    assert masked == f"first {REDACTED} then {REDACTED} and no more"


def test_pieces_that_do_not_make_the_secret_whole_are_left_alone() -> None:
    redactor = Redactor([KEY])
    texts = [f"a {KEY[8:16]} b", f"c {KEY[20:]} d"]  # a gap: KEY[16:20] is nowhere
    assert redactor.mask_together(texts) == texts


def test_a_piece_a_text_holds_by_chance_is_left_alone_beside_the_whole_secret() -> None:
    password = "db-pa55word-4242"  # noqa: S105  (a test value)
    redactor = Redactor([password])
    assert redactor.mask_values(f"password {password}") == f"password {REDACTED}"
    assert redactor.mask_together(["a password", password]) == ["a password", REDACTED]


def test_a_hex_key_is_cut_into_pieces_no_shorter_than_its_alphabet_allows() -> None:
    redactor = Redactor([HEX_KEY])
    body = HEX_KEY.removeprefix("sk-")
    five = [body[i : i + 5] for i in range(0, len(body), 5)]
    # five hex digits (20 bits) make a piece: found, in separate texts
    assert leaks(" ".join(redactor.mask_together([f"[{p}]" for p in five])), [HEX_KEY]) == []
    # four digits do not: a number such as 2025 holds four by chance
    four = [f"[{body[i : i + 4]}]" for i in range(0, len(body), 4)]
    assert redactor.mask_together(four) == four


def test_the_cheap_checks_decide_ordinary_texts_fast() -> None:
    redactor = Redactor(SECRETS)
    text = ("ordinary tool result text, prices 187.30 and 2025-09-01T00:00:00Z; " * 60) + "end"
    redactor.mask_values(text)
    started = time.perf_counter()
    for _ in range(200):
        assert redactor.mask_values(text) == text
    per_text_s = (time.perf_counter() - started) / 200
    assert per_text_s < 0.002, per_text_s  # about 0.05 ms here; a pattern pass is 10x that
    assert redactor.may_mask(text) is False
