"""The on-site rule for a redirect's `Location` (`daemon/redirects.py`), against the tests' own
oracle (`openbell_testkit.http.leaves_site`): a browser at `http://site.example/here` that follows
the location, after the decodings and clean-ups a browser or a proxy may apply, is still on
`site.example`.

Every way off site that is known (scheme-relative, backslashes, encoded slashes, tabs and newlines
that browsers drop, full-width slashes, absolute URLs) is refused; ordinary paths are kept as they
are; and for any path at all, what `on_site_location` emits satisfies the oracle.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openbell.daemon.redirects import kept_on_site, on_site, on_site_location
from openbell_testkit.http import leaves_site

OFF_SITE = [
    "//evil.example/x",
    "///evil.example/x",
    "////evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "/%2F%2Fevil.example/x",
    "/%2f/evil.example",
    "/%5Cevil.example",
    "/%5cevil.example",
    "/%252F%252Fevil.example",  # twice encoded
    "/%25252F%25252Fevil.example",  # three times
    "/%09/evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "/%0D%0A/evil.example",
    "/%EF%BC%8Fevil.example",  # a full-width solidus, encoded
    "/\uff0fevil.example",  # a full-width solidus
    "/\uff3cevil.example",  # a full-width reverse solidus
    "/\ufe68evil.example",  # a small reverse solidus
    "https://evil.example/x",
    "http:evil.example",
    "javascript:alert(1)",
    "evil.example",
    " /x",
    "",
]

ON_SITE = [
    "/",
    "/api/v1/hello?x=1",
    "/markets/us/agents/claude",
    "/a//b",  # a double slash later in the path stays on site
    "/a%2Fb",
    "/cycles/12?tab=trace&x=%2F%2F",
    "/caf%C3%A9",
]


@pytest.mark.parametrize("location", OFF_SITE)
def test_every_known_way_off_site_is_refused(location: str) -> None:
    assert leaves_site(location)
    assert not on_site(location)
    assert kept_on_site(location) in {"/", "/x"}


@pytest.mark.parametrize("location", ON_SITE)
def test_ordinary_paths_are_kept(location: str) -> None:
    assert not leaves_site(location)
    assert on_site(location)
    assert kept_on_site(location) == location


def test_an_absolute_url_keeps_its_path_when_that_is_on_site() -> None:
    assert kept_on_site("http://evil.example/api/v1/hello?x=1") == "/api/v1/hello?x=1"
    assert kept_on_site("http://127.0.0.1:8787//evil.example/x") == "/"


def test_a_redirect_target_is_quoted_like_a_redirect_and_falls_back_to_the_front_page() -> None:
    assert on_site_location("/api/v1/hello", "x=1") == "/api/v1/hello?x=1"
    assert on_site_location("/a b") == "/a%20b"
    assert on_site_location("//evil.example/x", "x=1") == "/"
    assert on_site_location("/\\evil.example") == "/"
    assert on_site_location("/\t/evil.example") == "/"


PATH_PIECES = st.sampled_from(
    [
        *("/", "//", "\\", "%2F", "%2f", "%5C", "%25", "%09", "\t", "\n", "%0A", "evil.example"),
        *("a", "\uff0f", "\uff3c", "\ufe68", "%EF%BC%8F", "?", "#", " ", ".", "..", "@", ":"),
    ]
)


@settings(max_examples=400)
@given(
    pieces=st.lists(st.one_of(PATH_PIECES, st.text(max_size=3)), max_size=8),
    query=st.sampled_from(["", "x=1", "next=//evil.example"]),
)
def test_every_emitted_location_stays_on_site(pieces: list[str], query: str) -> None:
    location = on_site_location("/" + "".join(pieces), query)
    assert not leaves_site(location), location
    assert on_site(location)
    assert location.isascii()


@settings(max_examples=400)
@given(st.text(max_size=30))
def test_what_the_middleware_keeps_stays_on_site(location: str) -> None:
    assert not leaves_site(kept_on_site(location))
