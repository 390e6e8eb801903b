"""Redirects stay on this site: the one rule for every `Location` the daemon's server sends.

This module owns `on_site`, `on_site_location` and `OnSiteRedirects`. A `Location` is on site when
it starts with exactly one `/`, followed by neither `/` nor `\\`, and still does in every form a
browser, a proxy or a later decoding may turn it into: percent-decoded again and again, with the
tabs and newlines browsers drop removed, the controls and spaces before it stripped, backslashes
read as slashes (as browsers do), and Unicode compatibility forms (a full-width solidus) folded.
Anything else, `//evil.example`, `/\\evil`, `/%2F%2Fevil`, `/%09/evil`, `https://...`, would send
the browser to another host. `on_site_location` builds a redirect target from a request's decoded
path and query, and gives `/` (the front page) when that target would not be on site.
`OnSiteRedirects` is the server's outermost middleware: a response's `Location` that is not on site
is rewritten, an absolute URL to its path and query (the server never means to send a browser
elsewhere; Starlette's trailing-slash redirects name the Host header the client chose), and what
is still not on site to `/`.
"""

from __future__ import annotations

import unicodedata
from typing import Final
from urllib.parse import quote, unquote, urlsplit

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

FRONT_PAGE: Final = "/"
#: How many rounds of percent-decoding a location is followed through; one still changing after
#: them is not on site.
MAX_DECODINGS: Final = 8
#: What Starlette's `RedirectResponse` leaves unquoted in a location.
_SAFE: Final = ":/%#?=@[]!$&'()*+,;"
#: Characters browsers remove from anywhere in a URL.
_DROPPED: Final = dict.fromkeys(map(ord, "\t\n\r"))
#: Look-alikes of the slash and the backslash that compatibility folding leaves alone.
_SLASHES: Final = dict.fromkeys(map(ord, "\\\u2044\u2215\u29f5\u29f8\u29f9\ufe68\uff3c"), "/")
#: What browsers strip from the start of a URL: C0 controls and the space.
_LEADING: Final = "".join(map(chr, range(0x21)))


def _one_slash(text: str) -> bool:
    return text.startswith("/") and not text.startswith("//")


def _forms(location: str) -> list[str] | None:
    """The location as given and after each round of percent-decoding (None: still changing after
    `MAX_DECODINGS` rounds)."""
    forms = [location]
    for _ in range(MAX_DECODINGS):
        decoded = unquote(forms[-1], errors="surrogateescape")
        if decoded == forms[-1]:
            return forms
        forms.append(decoded)
    return None


def on_site(location: str) -> bool:
    """Whether a browser sent to `location` stays on this site (see the module)."""
    if not _one_slash(location):
        return False
    forms = _forms(location)
    if forms is None:
        return False
    for form in forms:
        cleaned = form.translate(_DROPPED).lstrip(_LEADING)
        for seen in (cleaned, unicodedata.normalize("NFKC", cleaned)):
            if not _one_slash(seen.translate(_SLASHES)):
                return False
    return True


def on_site_location(path: str, query: str = "") -> str:
    """The `Location` of a redirect to decoded `path` with `query` (already encoded), quoted as
    a redirect quotes it; `/` when that would not be on site."""
    location = quote(path, safe=_SAFE) + (f"?{query}" if query else "")
    return location if on_site(location) else FRONT_PAGE


def kept_on_site(location: str) -> str:
    """`location` if it is on site; else an absolute URL's path and query if they are; else `/`."""
    if on_site(location):
        return location
    parts = urlsplit(location)
    if parts.scheme or parts.netloc:
        relative = parts.path + (f"?{parts.query}" if parts.query else "")
        if on_site(relative):
            return relative
    return FRONT_PAGE


class OnSiteRedirects:
    """ASGI middleware: every response's `Location` is kept on site (`kept_on_site`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                location = headers.get("location")
                if location is not None:
                    headers["location"] = kept_on_site(location)
            await send(message)

        await self.app(scope, receive, guarded)
