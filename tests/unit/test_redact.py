"""The redactor: a configured secret is masked in every form it can take in text (raw, JSON
escaped, percent-encoded, HTML references, Base64, without its `sk-` prefix, cut short), a secret
too short to mask is left alone, credential-looking text is masked whatever its value, and the
redactor never shows its secrets."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest

from openbell.store.redact import (
    CREDENTIAL_PATTERNS,
    MIN_SECRET_CHARS,
    REDACTED,
    Redactor,
    mask_credentials,
)
from openbell_testkit.secrets import leaks

KEY = "sk-proj-Abc123def456GHI789xyz"
PASSWORD = "pa55/w0rd:with@odd chars"  # noqa: S105  (a test value)


def escaped_all(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def percent_all(text: str, upper: bool = True) -> str:
    return "".join((f"%{b:02X}" if upper else f"%{b:02x}") for b in text.encode())


FORMS = {
    "raw": KEY,
    "json dash escaped": KEY.replace("-", "\\u002d"),
    "json dash escaped upper hex": KEY.replace("-", "\\u002D"),
    "json every char escaped": escaped_all(KEY),
    "json escaped twice": KEY.replace("-", "\\\\u002d"),
    "json mixed": "s\\u006b-proj\\u002dAbc123def456GHI789xyz",
    "percent encoded": percent_all(KEY),
    "percent encoded lower": percent_all(KEY, upper=False),
    "percent encoded twice": KEY.replace("-", "%252D"),
    "percent partial": "sk%2Dproj%2dAbc123def456GHI789xyz",
    "html references": KEY.replace("-", "&#45;").replace("A", "&#x41;"),
    "without sk-": KEY.removeprefix("sk-"),
    "without sk-proj-": KEY.removeprefix("sk-proj-"),
    "base64": base64.b64encode(KEY.encode()).decode(),
    "base64 after one byte": base64.b64encode(b"x" + KEY.encode()).decode(),
    "base64 after two bytes": base64.b64encode(b"xy" + KEY.encode()).decode(),
    "base64 url-safe": base64.urlsafe_b64encode(b"\xff" + KEY.encode()).decode(),
}


@pytest.mark.parametrize("form", list(FORMS.values()), ids=list(FORMS))
def test_a_secret_is_masked_in_every_form(form: str) -> None:
    redactor = Redactor([KEY])
    text = f'{{"reason": "paid with {form} today"}}'
    masked = redactor.mask(text)
    assert REDACTED in masked
    assert leaks(masked, [KEY]) == []
    assert masked.startswith('{"reason": "paid with ')
    assert masked.endswith(' today"}')


def test_masking_keeps_json_valid_and_the_rest_of_the_text() -> None:
    redactor = Redactor([KEY])
    document = json.dumps({"reason": f"mine: {KEY}", "shares": 5}).replace("-", "\\u002d")
    masked = json.loads(redactor.mask(document))
    assert masked == {"reason": f"mine: {REDACTED}", "shares": 5}


def test_a_password_with_odd_characters_is_masked_raw_and_url_encoded() -> None:
    redactor = Redactor([PASSWORD])
    url = f"postgresql+psycopg://openbell:{quote(PASSWORD, safe='')}@db/openbell"
    assert PASSWORD not in redactor.mask(f"it is {PASSWORD}.")
    assert quote(PASSWORD, safe="") not in redactor.mask(url)
    assert redactor.mask_values(json.dumps(PASSWORD)) == json.dumps(REDACTED)


def test_a_secret_cut_short_is_masked_where_it_was_cut() -> None:
    redactor = Redactor([KEY])
    assert redactor.mask_values(f"error: {KEY[:14]}...") == f"error: {REDACTED}..."
    assert redactor.mask_values(f"error: {KEY[:12]}") == f"error: {REDACTED}"
    assert redactor.mask_values(f"error: {KEY[:12]}\u2026") == f"error: {REDACTED}\u2026"
    # A secret's start in the middle of a text is ordinary text.
    assert redactor.mask_values(f"{KEY[:12]} and more") == f"{KEY[:12]} and more"


def test_a_secret_too_short_to_mask_is_left_alone() -> None:
    short = "x" * (MIN_SECRET_CHARS - 1)
    redactor = Redactor([short, "", "sk-" + "a" * (MIN_SECRET_CHARS - 4)])
    assert redactor.mask_values(f"{short} and {short}") == f"{short} and {short}"
    assert redactor.mask_values("a cash-bound text, 2025-09-01") == "a cash-bound text, 2025-09-01"
    assert redactor.secret_count == 0


def test_the_key_without_its_prefix_is_masked_while_it_is_long_enough() -> None:
    redactor = Redactor(["sk-abcdefgh"])
    assert redactor.mask_values("abcdefgh") == REDACTED
    assert redactor.mask_values("bcdefgh is fine") == "bcdefgh is fine"


def test_credential_looking_text_is_masked_whatever_its_value() -> None:
    redactor = Redactor()
    masked = redactor.mask("sk-other0123456789 Bearer eyJhbGciOi.x.y postgresql://u:hunter22@h/d")
    assert masked == f"{REDACTED} Bearer {REDACTED} postgresql://u:{REDACTED}@h/d"
    # ...but only `mask`: stored identifiers go through `mask_values`, which leaves them alone.
    assert redactor.mask_values("sk-other0123456789") == "sk-other0123456789"


@pytest.mark.parametrize(
    "text",
    [
        "Bearer abcdefgh1234",
        "BASIC dXNlcjpwYXNz and more",
        "authorization: bearer\tabc.def.ghi",
        "Ba\u017fic abcdefgh1234",  # a long s matches `s` case-insensitively
        "bearer \u0131s not \u0130t, baS\u0130c abcdefgh1234",  # dotless and dotted i match `i`
        "\u017fk-abcdefgh1234 sk-abcdefgh1234 pk-zzzzzzzz rk-12345678",
        "wss://u:pw1234@h/x, https://h/x and ://:@",
        '{"bars":[{"open":"187.5"}],"reason":"basics"}',  # `basic` without a token: kept
        "sk-abc ftp://a@b bearer",
        "",
    ],
)
def test_masking_credentials_skips_only_scans_that_cannot_match(text: str) -> None:
    expected = text
    for pattern, replacement in CREDENTIAL_PATTERNS:
        expected = pattern.sub(replacement, expected)
    assert mask_credentials(text) == expected
    assert Redactor().mask(text) == expected


@pytest.mark.parametrize("prefix", ["obt_", "obc_"])
def test_openbell_tokens_are_masked_whatever_their_value(prefix: str) -> None:
    token = prefix + "Zq3_x-9AbCdEfGhIjKlMnOpQrStUvWxYz0123456789a"
    redactor = Redactor()
    for text in (token, f"Authorization: {token}", f'{{"token":"{token}"}}', f"env T={token}"):
        masked = redactor.mask_values(text)
        assert leaks(masked, [token]) == []
        assert masked == text.replace(token, REDACTED)
    assert redactor.mask(f"x {token} y") == f"x {REDACTED} y"


@pytest.mark.parametrize(
    "text", ["obtain_this_result", "knobt_abcdefghij", "obt_short", "robc_0123456789abcdef"]
)
def test_words_that_only_resemble_a_token_are_kept(text: str) -> None:
    assert Redactor().mask_values(text) == text


def test_the_redactor_never_shows_its_secrets() -> None:
    redactor = Redactor([KEY])
    assert KEY not in repr(redactor)
    assert KEY not in str(redactor)
    assert redactor.secret_count == 1


def test_redactors_combine() -> None:
    combined = Redactor([KEY]).with_secrets([PASSWORD, None])
    assert combined.mask_values(f"{KEY} {PASSWORD}") == f"{REDACTED} {REDACTED}"
    assert combined.secret_count == 2


def test_long_text_is_masked_quickly() -> None:
    import time

    redactor = Redactor([KEY, PASSWORD, "0123456789abcdef0123456789abcdef"])
    text = ("ordinary tool result text, prices 187.30 and 2025-09-01T00:00:00Z; " * 2000) + KEY
    started = time.perf_counter()
    masked = redactor.mask(text)
    elapsed_s = time.perf_counter() - started
    assert masked.endswith(REDACTED)
    assert elapsed_s < 0.5, elapsed_s


@pytest.mark.parametrize("form", list(FORMS.values()), ids=list(FORMS))
def test_may_mask_is_true_for_every_form_even_among_other_texts(form: str) -> None:
    redactor = Redactor([KEY])
    assert redactor.may_mask(form)
    assert redactor.may_mask("\x00".join(["price 187.30", f"paid with {form}", "2025-09-01"]))


def test_may_mask_is_false_only_where_mask_values_changes_nothing() -> None:
    texts = ["ordinary text", "5% of NAV", "obtain_this_result", "2025-09-01T00:00:00", KEY[:7]]
    for redactor in (Redactor(), Redactor([KEY, PASSWORD])):
        assert not redactor.may_mask("\x00".join(texts))
        assert [redactor.mask_values(text) for text in texts] == texts
        assert redactor.may_mask("x obt_Zq3_x-9AbCdEfGhIjKlMn y")
    assert not Redactor().may_mask(KEY)  # no secrets: only openbell's tokens are masked by value
