"""The `openbell` command has structlog imported without rich (`ops/entry.py`): structlog would
import rich and pygments at its own import; openbell's logging uses neither, and a command that
prints tables still imports rich when it prints them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent(
    """
    import sys
    from openbell.ops.entry import StructlogWithoutRich
    if sys.argv[1] == "hide":
        StructlogWithoutRich.install()
    import structlog, structlog.dev, structlog.tracebacks
    before = sorted(name for name in ("rich", "pygments") if name in sys.modules)
    import rich.console
    print(before, structlog.dev.rich is None, structlog.tracebacks.rich is None)
    print(type(structlog.dev.ConsoleRenderer().__dict__), "rich" in sys.modules)
    print(any(type(finder).__name__ == "StructlogWithoutRich" for finder in sys.meta_path))
    """
)


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("hide", "[] True True\n<class 'dict'> True\nFalse\n"),
        ("plain", "['pygments', 'rich'] False False\n<class 'dict'> True\nFalse\n"),
    ],
)
def test_structlog_is_imported_without_rich_and_rich_still_imports(how: str, expected: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, how],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout == expected
