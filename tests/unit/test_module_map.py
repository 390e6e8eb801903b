"""docs/design.md's module map lists every module, and no name means two things in two layers."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("markets", "store", "agents", "daemon", "ops")
MIGRATIONS = "store/migrations/"

#: Names that stand in two layers because they are one concept there, seen from each layer.
SAME_CONCEPT = {
    "cache": "the bar and news cache: its port (markets) and its SQL implementation (store)",
    "seasons": "a season: its row written and read (store), opened from a config (ops)",
}


def _modules() -> set[str]:
    """Every module of the five layers, relative to the root; the migrations as one folder."""
    found = set()
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(MIGRATIONS):
                found.add(MIGRATIONS)
            elif path.name != "__init__.py" or path.read_text(encoding="utf-8").count("\n") > 4:
                found.add(relative)
    return found


def _module_map() -> dict[str, str]:
    """The rows of the design page's module map: module path -> what it owns."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z_/.]+)` \| (.*?) \|$", text, flags=re.MULTILINE)
    return dict(rows)


def test_the_module_map_lists_every_module_and_no_other() -> None:
    listed = _module_map()
    modules = _modules()
    assert sorted(modules - listed.keys()) == [], "modules the design page does not list"
    assert sorted(listed.keys() - modules) == [], "rows naming a module that does not exist"


def test_every_row_of_the_module_map_says_what_the_module_owns() -> None:
    assert [module for module, owns in _module_map().items() if len(owns.split()) < 4] == []


def test_no_name_stands_in_two_layers_unless_it_is_one_concept() -> None:
    layers_of: dict[str, set[str]] = defaultdict(set)
    for module in _modules():
        name = Path(module).stem if module.endswith(".py") else Path(module).name
        if name != "__init__":
            layers_of[name].add(module.split("/")[0])
    shared = sorted(name for name, layers in layers_of.items() if len(layers) > 1)
    assert [name for name in shared if name not in SAME_CONCEPT] == []
