"""Loading a Python plug-in agent: a class named `package.module:Class` or by an installed entry
point is made as `Class(name=NAME, **options)` and checked against the agent protocol; every way
it can go wrong is one `ConfigError` line naming the agent and the entry."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from openbell.agents.plugins import ENTRY_POINT_GROUP, load_plugin
from openbell.markets.errors import ConfigError

PLUGINS = """
class Good:
    kind = "good"

    def __init__(self, name, threshold=1):
        self.name, self.threshold = name, threshold

    async def decide(self, ctx):
        await ctx.tools.finish("nothing to do")


class Outer:
    Inner = Good


class SyncDecide(Good):
    def decide(self, ctx):
        pass


class NoDecide:
    kind = "none"

    def __init__(self, name):
        self.name = name


class Renamed(Good):
    def __init__(self, name):
        self.name = "someone-else"


class Kindless(Good):
    kind = ""


class Refuses(Good):
    def __init__(self, name, **options):
        raise ValueError("threshold must be positive")


good_instance = Good(name="x")
"""


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module of plug-in classes, importable from `sys.path`; its name."""
    package = tmp_path / "userpkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "strategies.py").write_text(textwrap.dedent(PLUGINS), encoding="utf-8")
    (package / "broken.py").write_text("import not_installed_anywhere\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "userpkg.strategies"
    for name in [name for name in sys.modules if name.partition(".")[0] == "userpkg"]:
        del sys.modules[name]


def error(name: str, entry: str, **options: object) -> str:
    with pytest.raises(ConfigError) as caught:
        load_plugin(name, entry, options)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"agent {name!r}: entry {entry!r}: ")
    return message


def test_a_class_is_made_with_its_name_and_options(plugins: str) -> None:
    agent = load_plugin("mine", f"{plugins}:Good", {"threshold": 3})
    assert (agent.name, agent.kind, type(agent).__name__) == ("mine", "good", "Good")
    assert agent.threshold == 3  # type: ignore[attr-defined]
    assert load_plugin("nested", f"{plugins}:Outer.Inner", {}).name == "nested"


def test_an_installed_entry_point_names_the_class(
    plugins: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "userpkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: userpkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\ngood-one = {plugins}:Good\n", encoding="utf-8"
    )
    agent = load_plugin("mine", "good-one", {"threshold": 2})
    assert (agent.name, agent.kind, agent.threshold) == ("mine", "good", 2)  # type: ignore[attr-defined]
    assert "offered: good-one" in error("mine", "bad-one")


@pytest.mark.parametrize(
    ("entry", "options", "words"),
    [
        ("nowhere.at_all:Agent", {}, "no module named 'nowhere'"),
        ("userpkg.missing:Agent", {}, "no module named 'userpkg.missing'"),
        ("userpkg.broken:Agent", {}, "importing userpkg.broken failed: ModuleNotFoundError"),
        ("userpkg.strategies:Absent", {}, "userpkg.strategies has no attribute 'Absent'"),
        ("userpkg.strategies:good_instance", {}, "is not a class"),
        ("userpkg.strategies:NoDecide", {}, "NoDecide has no `async def decide(self, ctx)`"),
        ("userpkg.strategies:SyncDecide", {}, "SyncDecide has no `async def decide"),
        ("userpkg.strategies:Good", {"colour": "red"}, "unexpected keyword argument 'colour'"),
        ("userpkg.strategies:Refuses", {}, "ValueError: threshold must be positive"),
        ("userpkg.strategies:Renamed", {}, "has name 'someone-else', not the configured 'mine'"),
        ("userpkg.strategies:Kindless", {}, "has no `kind`"),
        ("userpkg.strategies:", {}, "is not of the form `package.module:Class`"),
        ("no-such-entry-point", {}, "no installed package offers an entry point of that name"),
    ],
)
def test_a_plugin_that_cannot_be_made_is_one_config_error(
    plugins: str, entry: str, options: dict[str, object], words: str
) -> None:
    assert words in error("mine", entry, **options)
