"""The HTTP listener's address check: which hosts are loopback."""

from __future__ import annotations

import pytest

from openbell.daemon.http import is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),  # noqa: S104
        ("10.0.0.1", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
