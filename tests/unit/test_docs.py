"""The documents a reader follows lead somewhere: README links and sections, the unit pointers."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
UNIT = ROOT / "systemd" / "openbell.service"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _headings(text: str) -> list[str]:
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]


def test_every_anchor_link_in_readme_names_a_heading() -> None:
    text = README.read_text(encoding="utf-8")
    anchors = {_slug(heading) for heading in _headings(text)}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links, "README links to its own sections"
    assert sorted(links - anchors) == []


def test_every_file_readme_points_at_exists() -> None:
    text = README.read_text(encoding="utf-8")
    targets = {t for t in re.findall(r"\]\(([^)#:]+)\)", text)}
    assert "docs/design.md" in targets
    assert sorted(t for t in targets if not (ROOT / t).exists()) == []
    # The design notes the repository does not carry are not cited as if it did.
    assert "DESIGN.md" not in text


def test_the_design_page_covers_what_an_engineer_needs() -> None:
    headings = " / ".join(_headings((ROOT / "docs" / "design.md").read_text(encoding="utf-8")))
    for topic in ("Layers", "Time", "life of a cycle", "ledger", "Failure"):
        assert topic.lower() in headings.lower(), topic


def test_the_unit_names_a_readme_section_that_exists() -> None:
    unit = UNIT.read_text(encoding="utf-8")
    comments = " ".join(line.lstrip("# ") for line in unit.splitlines() if line.startswith("#"))
    named = re.findall(r'see README\.md, "([^"]+)"', comments)
    assert named, "the unit points its reader at a README section"
    headings = _headings(README.read_text(encoding="utf-8"))
    assert [name for name in named if name not in headings] == []


def test_the_units_documentation_is_where_its_install_steps_put_the_repository() -> None:
    unit = UNIT.read_text(encoding="utf-8")
    (clone_dir,) = re.findall(r"git clone \S+ (\S+)", unit)
    (line,) = [line for line in unit.splitlines() if line.startswith("Documentation=")]
    uris = line.removeprefix("Documentation=").split()
    assert uris
    for uri in uris:
        assert uri.startswith(f"file://{clone_dir}/"), uri
        assert (ROOT / uri.removeprefix(f"file://{clone_dir}/")).is_file(), uri
    # README's install steps clone to the same place.
    assert f"git clone OPENBELL_REPOSITORY {clone_dir}" in README.read_text(encoding="utf-8")
