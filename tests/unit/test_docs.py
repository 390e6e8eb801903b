"""The documents a reader follows lead somewhere: the README is a front page into the docs site,
the site's links and sections exist, every page is in its nav, the CLI reference covers every
command, the measured figures each carry their command and date, and the unit's pointers hold."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import typer.main
import yaml

from openbell.ops.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
UNIT = ROOT / "systemd" / "openbell.service"
#: The README is a front page: what openbell is, the set-up, the demo, links into the site.
README_MAX_LINES = 250


def _slug(heading: str) -> str:
    """The anchor of a heading, GitHub's and MkDocs' alike: lower case, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _headings(text: str) -> list[str]:
    """The Markdown headings of `text`, outside its fenced code blocks."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.append(line.lstrip("#").strip())
    return found


def _links(text: str) -> list[str]:
    """The targets of the Markdown links of `text`, outside its fenced code blocks."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    return re.findall(r"\]\(([^)\s]+)\)", prose)


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_a_front_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    headings = _headings(text)
    for section in ("Set up", "The demo", "Documentation"):
        assert section in headings, section
    assert "](docs/arena.png)" in text, "the screenshot"
    assert "openbell demo" in text


def test_every_file_the_readme_points_at_exists() -> None:
    targets = {t.split("#")[0] for t in _links(README.read_text(encoding="utf-8")) if ":" not in t}
    assert {"docs/design.md", "docs/index.md", "docs/tutorials/getting-started.md"} <= targets
    assert sorted(t for t in targets if not (ROOT / t).exists()) == []


def test_every_link_between_pages_names_a_page_and_a_heading_that_exist() -> None:
    checked = 0
    for page in _pages():
        for target in _links(page.read_text(encoding="utf-8")):
            if ":" in target:  # http(s), mailto: outside the site
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.relative_to(ROOT)}: {target}"
            if anchor and linked.suffix == ".md":
                anchors = {_slug(h) for h in _headings(linked.read_text(encoding="utf-8"))}
                assert anchor in anchors, f"{page.relative_to(ROOT)}: {target}"
            checked += 1
    assert checked > 50


def test_no_page_cites_the_design_notes_the_repository_does_not_carry() -> None:
    # The generated openbell.toml too: `openbell init` writes ops/config/openbell.default.toml.
    texts = [README, *_pages(), ROOT / "ops" / "config" / "openbell.default.toml"]
    assert [str(t.relative_to(ROOT)) for t in texts if "DESIGN.md" in t.read_text("utf-8")] == []
    default_config = (ROOT / "ops" / "config" / "openbell.default.toml").read_text(encoding="utf-8")
    pointers = re.findall(r"docs/[\w/.-]+\.md", default_config)
    assert pointers
    assert [p for p in pointers if not (ROOT / p).is_file()] == []


def test_the_design_page_covers_what_an_engineer_needs() -> None:
    headings = " / ".join(_headings((DOCS / "design.md").read_text(encoding="utf-8")))
    for topic in ("Layers", "Time", "life of a cycle", "ledger", "Failure"):
        assert topic.lower() in headings.lower(), topic


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    hooks = _hooks()
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = hooks.nav_pages(hooks.with_every_page(config["nav"], DOCS))
    pages = {page.relative_to(DOCS).as_posix() for page in _pages()}
    assert sorted(pages - set(nav)) == []
    assert sorted(set(nav) - pages) == []
    named = hooks.nav_pages(hooks.expand_folders(config["nav"], DOCS))
    assert {"tutorials/getting-started.md", "tutorials/getting-started-zh.md"} <= set(named)
    assert "guide/index.md" in named


def test_a_page_added_under_a_nav_folder_joins_the_nav_index_first(tmp_path: Path) -> None:
    for name in ("zebra.md", "index.md", "alerts.md", "notes.txt"):
        (tmp_path / "guide" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "guide" / name).write_text("# x\n", encoding="utf-8")
    nav = [{"Home": "index.md"}, {"Guides": "guide/"}, {"Empty": "none/"}]
    assert _hooks().expand_folders(nav, tmp_path) == [
        {"Home": "index.md"},
        {"Guides": ["guide/index.md", "guide/alerts.md", "guide/zebra.md"]},
    ]


def test_a_page_no_nav_entry_names_is_listed_under_more(tmp_path: Path) -> None:
    for name in ("index.md", "how-to/named.md", "how-to/new.md", "notify.md", "guide/a.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("# x\n", encoding="utf-8")
    nav = [{"Home": "index.md"}, {"How-to": ["how-to/named.md"]}, {"Guides": "guide/"}]
    assert _hooks().with_every_page(nav, tmp_path) == [
        {"Home": "index.md"},
        {"How-to": ["how-to/named.md"]},
        {"Guides": ["guide/a.md"]},
        {"More": ["how-to/new.md", "notify.md"]},
    ]
    assert _hooks().with_every_page(nav[:2], tmp_path)[-1] == {
        "More": ["guide/a.md", "how-to/new.md", "notify.md"]
    }


def test_the_cli_reference_shows_every_command_as_its_help_prints_it() -> None:
    reference = _hooks().cli_reference()
    root = typer.main.get_command(app)
    paths: list[str] = []

    def walk(command: typer.core.TyperCommand, parent: object, name: str) -> None:
        context = command.context_class(command, info_name=name, parent=parent)
        paths.append(context.command_path)
        for sub in getattr(command, "list_commands", lambda _: [])(context):
            walk(command.get_command(context, sub), context, sub)

    walk(root, None, "openbell")
    assert {"openbell replay", "openbell data download", "openbell db upgrade"} <= set(paths)
    for path in paths:
        assert f"`{path}`\n\n```text\nUsage: {path} " in reference, path
    assert "<!-- cli-reference -->" in (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")


def test_each_measured_figure_has_its_command_and_date() -> None:
    text = (DOCS / "reference" / "benchmarks.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    rows = [row for row in rows if not row.startswith("| What") and not set(row) <= set("|- ")]
    assert len(rows) >= 10
    for row in rows:
        what, command, figure, measured = (cell.strip() for cell in row.strip("|").split(" | "))
        assert re.fullmatch(r"`(benchmarks/\S+\.py|openbell \w+)[^`]*`.*", command), row
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", measured), row
        assert what
        assert figure
    # Current figures only: no account of the rounds that led to them.
    assert not re.search(r"\b(round|issue \d+|before the)\b", text, flags=re.IGNORECASE)


def test_the_unit_names_a_docs_section_that_exists() -> None:
    unit = UNIT.read_text(encoding="utf-8")
    comments = " ".join(line.lstrip("# ") for line in unit.splitlines() if line.startswith("#"))
    named = re.findall(r'see (docs/\S+\.md), "([^"]+)"', comments)
    assert named, "the unit points its reader at a docs section"
    for page, heading in named:
        assert heading in _headings((ROOT / page).read_text(encoding="utf-8")), (page, heading)
    assert "README" not in unit


def test_the_units_documentation_is_where_its_install_steps_put_the_repository() -> None:
    unit = UNIT.read_text(encoding="utf-8")
    (clone_dir,) = re.findall(r"git clone \S+ (\S+)", unit)
    (line,) = [line for line in unit.splitlines() if line.startswith("Documentation=")]
    uris = line.removeprefix("Documentation=").split()
    assert uris
    for uri in uris:
        assert uri.startswith(f"file://{clone_dir}/"), uri
        assert (ROOT / uri.removeprefix(f"file://{clone_dir}/")).is_file(), uri
    # The systemd page's install steps clone to the same place.
    systemd_page = (DOCS / "how-to" / "systemd.md").read_text(encoding="utf-8")
    assert f"git clone OPENBELL_REPOSITORY {clone_dir}" in systemd_page
