"""MkDocs hooks of the docs site (mkdocs.yml `hooks:`): the nav's folder entries and the CLI
reference.

- A nav entry whose value is a folder (`Guides: guide/`) becomes that folder's pages, `index.md`
  first, then in file-name order, so a page added under `docs/guide/` is in the nav without an
  edit to mkdocs.yml (MkDocs itself takes only files in a nav).
- A page that no nav entry names is listed under "More" at the end, so every page is reachable
  from the nav, and a page added anywhere by a branch that did not edit mkdocs.yml is there too.
- The placeholder `<!-- cli-reference -->` in a page becomes the help of every `openbell`
  command, taken from the command line itself (the typer app of `openbell.ops.cli.app`, as click
  commands), so the reference cannot drift from what `openbell COMMAND --help` prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CLI_PLACEHOLDER = "<!-- cli-reference -->"


def folder_pages(docs_dir: Path, folder: str) -> list[str]:
    """The Markdown pages under `docs_dir/folder`, relative to docs_dir, index first."""
    root = docs_dir / folder
    pages = sorted(root.rglob("*.md")) if root.is_dir() else []
    pages.sort(key=lambda page: (page.name != "index.md", page.relative_to(root).as_posix()))
    return [page.relative_to(docs_dir).as_posix() for page in pages]


def expand_folders(nav: list[Any], docs_dir: Path) -> list[Any]:
    """The nav with each folder entry (a value ending in "/") replaced by its pages."""
    expanded: list[Any] = []
    for item in nav:
        if isinstance(item, dict):
            ((title, value),) = item.items()
            if isinstance(value, str) and value.endswith("/"):
                pages = folder_pages(docs_dir, value)
                if pages:
                    expanded.append({title: pages})
                continue
            if isinstance(value, list):
                expanded.append({title: expand_folders(value, docs_dir)})
                continue
        expanded.append(item)
    return expanded


def nav_pages(nav: list[Any]) -> list[str]:
    """Every page a nav names, in order."""
    pages: list[str] = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages.extend(nav_pages(value) if isinstance(value, list) else [str(value)])
    return pages


def with_every_page(nav: list[Any], docs_dir: Path) -> list[Any]:
    """The nav with its folders expanded and a "More" section of the pages it does not name."""
    expanded = expand_folders(nav, docs_dir)
    named = set(nav_pages(expanded))
    more = [page for page in folder_pages(docs_dir, ".") if page not in named]
    return [*expanded, {"More": more}] if more else expanded


def cli_reference() -> str:
    """Every command's help, as `openbell COMMAND --help` prints it, one section a command."""
    import typer.main

    from openbell.ops.cli.app import app

    sections: list[str] = []

    # typer's commands are click commands of the click typer bundles, not necessarily the `click`
    # package installed beside it: each builds its own context, and a group lists its commands.
    def walk(command: Any, parent: Any, name: str) -> None:
        context = command.context_class(
            command, info_name=name, parent=parent, terminal_width=100, max_content_width=100
        )
        path = context.command_path
        level = "#" * min(path.count(" ") + 2, 4)
        sections.append(f"{level} `{path}`\n\n```text\n{command.get_help(context).rstrip()}\n```\n")
        for sub_name in getattr(command, "list_commands", lambda _: [])(context):
            sub = command.get_command(context, sub_name)
            if sub is not None and not sub.hidden:
                walk(sub, context, sub_name)

    walk(typer.main.get_command(app), None, "openbell")
    return "\n".join(sections)


def on_config(config: Any) -> Any:
    config["nav"] = with_every_page(config["nav"], Path(config["docs_dir"]))
    return config


def on_page_markdown(markdown: str, **_: Any) -> str:
    if CLI_PLACEHOLDER in markdown:
        return markdown.replace(CLI_PLACEHOLDER, cli_reference())
    return markdown
