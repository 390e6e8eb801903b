"""Redirects of the daemon's real HTTP server stay on site, attacked byte for byte.

The read-token login (`?token=`) answers with a redirect to the same URL without the token. A
path such as `//evil.example/x` (or `///`, `/%2F%2F`, `/\\`, `/%5C`, `/%09/`, a full-width slash)
must not make that redirect leave the site: each variant is sent as a raw request line to the real
server, and the `Location` it answers must start with exactly one `/` followed by neither `/` nor
`\\` in every decoded reading (`openbell_testkit.http.leaves_site`). A property test sends random
paths. Starlette's own trailing-slash redirects, which name the Host header the client chose, are
kept on site too.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from openbell.daemon.http import TOKEN_COOKIE
from openbell_testkit.http import exchange, get, leaves_site, parse, served_http

TOKEN = "a-read-token-of-some-length"  # noqa: S105 (a test token)
BEARER = f"Authorization: Bearer {TOKEN}".encode()


async def hello(_request: Request) -> Response:
    return PlainTextResponse("hello\n")


ROUTES = [Route("/api/v1/hello", hello)]

VARIANTS = [
    b"//evil.example/x",
    b"///evil.example/x",
    b"////evil.example/x",
    b"/%2F%2Fevil.example/x",
    b"/%2f%2fevil.example/x",
    b"/%2F/evil.example/x",
    b"/%252F%252Fevil.example/x",
    b"/\\evil.example/x",
    b"/%5Cevil.example/x",
    b"/%5C%5Cevil.example/x",
    b"/%09/evil.example/x",
    b"/%0D/evil.example/x",
    b"/%EF%BC%8Fevil.example/x",
    b"/%EF%BC%BCevil.example/x",
]
#: A decoded newline matches no route (Starlette's path patterns stop at it): no redirect at all.
NEWLINES = [b"/%0A/evil.example/x", b"/%0D%0A/evil.example/x"]


@pytest.fixture(scope="module")
def port() -> object:
    with served_http(routes=ROUTES, read_token=TOKEN) as server:
        yield server.port


@pytest.mark.parametrize("path", VARIANTS, ids=[v.decode() for v in VARIANTS])
def test_the_token_login_never_redirects_off_site(port: int, path: bytes) -> None:
    status, headers = get(port, path + f"?x=1&token={TOKEN}".encode())
    assert status == 303
    location = headers["location"]
    assert not leaves_site(location), location
    assert location == "/"
    # The login still happens: the cookie is set for this site.
    assert headers["set-cookie"].startswith(f"{TOKEN_COOKIE}={TOKEN};")


@pytest.mark.parametrize("path", NEWLINES, ids=[v.decode() for v in NEWLINES])
def test_a_newline_in_the_path_answers_no_redirect(port: int, path: bytes) -> None:
    status, headers = get(port, path + f"?token={TOKEN}".encode())
    assert status == 404
    assert "location" not in headers


def test_an_ordinary_login_keeps_its_path_and_query(port: int) -> None:
    status, headers = get(port, f"/api/v1/hello?x=1&token={TOKEN}&y=%2F%2F".encode())
    assert status == 303
    assert headers["location"] == "/api/v1/hello?x=1&y=%2F%2F"


def test_a_trailing_slash_redirect_does_not_name_the_clients_host(port: int) -> None:
    status, headers = get(port, b"/api/v1/hello/", BEARER, b"X-Forwarded-Host: evil.example")
    assert status == 307
    assert headers["location"] == "/api/v1/hello"
    status, headers = get(port, b"/api/v1/hello/?x=1", BEARER)
    assert (status, headers["location"]) == (307, "/api/v1/hello?x=1")


def test_a_trailing_slash_redirect_under_a_chosen_host_stays_on_site(port: int) -> None:
    request = b"GET /api/v1/hello/ HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n"
    status, headers = parse(exchange(port, request + BEARER + b"\r\n\r\n"))
    assert status == 307
    assert headers["location"] == "/api/v1/hello"


PIECES = st.sampled_from(
    [
        *("/", "//", "\\", "%2F", "%2f", "%5C", "%25", "%252F", "%09", "%0A", "%0D", "%20", "a"),
        *("evil.example", "%EF%BC%8F", "%EF%BC%BC", "%EF%B9%A8", ".", "..", "@", ":", ";", "~"),
    ]
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(pieces=st.lists(st.one_of(PIECES, st.text(max_size=3)), min_size=1, max_size=8))
def test_every_location_the_login_answers_stays_on_site(port: int, pieces: list[str]) -> None:
    # Any text, sent as a valid request line: characters outside the URL alphabet go
    # percent-encoded (as a browser sends them); slashes, backslashes and escapes as they are.
    path = "/" + quote("".join(pieces), safe="/\\%:@;~.")
    status, headers = get(port, path.encode() + f"?token={TOKEN}".encode())
    if "\n" in unquote(path):  # Starlette's path patterns stop at a newline (but a last one)
        assert status in {303, 307, 404}, path
    else:
        assert status == 303, path
    if status != 404:
        assert not leaves_site(headers["location"]), (path, headers["location"])
