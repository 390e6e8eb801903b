"""The pages' templates keep agent text inert: autoescape is on for every template, and none of
them turns it off or marks a value safe; the only markup a page receives is our own SVG."""

from __future__ import annotations

import re
from importlib import resources

from markupsafe import Markup

from openbell.ops.web import views
from openbell.ops.web.charts import sparkline
from openbell.ops.web.pages import template_environment

TEMPLATES = resources.files("openbell.ops.web").joinpath("templates")


def test_every_template_is_autoescaped() -> None:
    environment = template_environment()
    assert environment.autoescape is True  # for every template, whatever its name
    names = environment.list_templates()
    assert {"base.html", "arena.html", "agent.html", "cycle.html", "missing.html"} <= set(names)
    for name in names:
        text = TEMPLATES.joinpath(name).read_text(encoding="utf-8")
        assert not re.search(r"\|\s*safe|autoescape\s+false|Markup", text), name
    missing = environment.get_template("missing.html")
    html = missing.render(stamp="1", poll_ms=5000, message="<script>x()</script>")
    assert "&lt;script&gt;x()&lt;/script&gt;" in html


def test_only_charts_are_markup_in_a_view() -> None:
    markup_fields = {
        (cls.__name__, name)
        for cls in (views.ArenaRow, views.AgentView, views.CycleView, views.OrderLine)
        for name, kind in cls.__annotations__.items()
        if "Markup" in str(kind)
    }
    assert markup_fields == {("ArenaRow", "spark"), ("AgentView", "chart")}
    assert isinstance(sparkline([], label="<x>"), Markup)


def test_links_are_built_from_ids_and_names_only() -> None:
    assert views.agent_href("us", "a.b-c_1") == "/markets/us/agents/a.b-c_1"
    assert views.agent_href("us", "javascript:x") == "/markets/us/agents/javascript%3Ax"
    assert views.cycle_href(42) == "/cycles/42"
