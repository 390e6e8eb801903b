"""`openbell experiment` through the real console script, against two scripted models on
127.0.0.1: a grid of two models x two prompts x three seeds runs as one replay and prints its
paired differences.

Model `rising` buys 601288.SH (Agricultural Bank of China, +25 % from 2025-09-30 through
2025-10-28 in the bundled bars, up most sessions) with most of its cash and holds it; model
`idle` holds cash. Neither reads its instructions, so the prompt axis is a pair of identical
variants. The model comparison must be distinguishable from zero (the better variant), the
prompt comparison must not (its interval covers 0), and every run's request must carry its seed
and its prompt's text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openbell_testkit.cli import clean_env, openbell
from openbell_testkit.llm import Body, ScriptedModel, finish, serve_script, tool_turn

START, END = "2025-09-30", "2025-10-28"
STOCK = "601288.SH"
SEEDS = (1, 2, 3)
CAREFUL = "Be careful: trade only what you understand."
BOLD = "Be bold: size up when a trend is clear."


def rising(body: Body) -> Body:
    """Buys `STOCK` at 90 % of NAV when it holds nothing, then finishes."""
    messages = body["messages"]
    if any(m["role"] == "tool" for m in messages) or "positions none" not in messages[1]["content"]:
        return finish("holding")
    return tool_turn(
        ("place_order", {"symbol": STOCK, "side": "buy", "target_weight": "0.9",
                         "reason": "trend", "confidence": 0.8})
    )  # fmt: skip


def idle(body: Body) -> Body:
    """Holds cash."""
    return finish("cash")


def _config(workdir: Path, rising_url: str, idle_url: str) -> Path:
    (workdir / "prompts").mkdir()
    (workdir / "prompts" / "careful.md").write_text(CAREFUL + "\n", encoding="utf-8")
    (workdir / "prompts" / "bold.md").write_text(BOLD + "\n", encoding="utf-8")
    path = workdir / "experiment.toml"
    agents = "".join(
        f'[[agents]]\nname = "{name}"\nkind = "llm"\nmarkets = ["cn"]\nbase_url = "{url}"\n'
        f'model = "scripted-{name}"\n\n'
        for name, url in (("rising", rising_url), ("idle", idle_url))
    )
    path.write_text(
        f'[store]\nurl = "sqlite:///{(workdir / "exp.db").as_posix()}"\n\n'
        '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
        'initial_cash = "100000"\nallow_partial_coverage = true\n\n'
        + agents
        + f'[experiment]\nmarket = "cn"\nstart = {START}\nend = {END}\n'
        'models = ["idle", "rising"]\nprompts = ["prompts/careful.md", "prompts/bold.md"]\n'
        f"seeds = {list(SEEDS)}\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, list[Body]]:
    workdir = tmp_path_factory.mktemp("experiment")
    buyer = ScriptedModel([rising] * 1000)
    holder = ScriptedModel([idle] * 1000)
    with serve_script(buyer) as rising_url, serve_script(holder) as idle_url:
        config = _config(workdir, rising_url, idle_url)
        shown = openbell(workdir, "experiment", "--config", str(config), "--no-progress",
                         env=clean_env(), timeout_s=300)  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        as_json = openbell(workdir, "experiment", "--config", str(config), "--resume",
                           "--json", "--no-progress", env=clean_env(), timeout_s=300)  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    assert "0 failed" in shown.stderr
    return json.loads(as_json.stdout), shown.stdout, buyer.requests + holder.requests


def test_the_grid_ran_as_one_replay_of_every_cell_and_seed(
    ran: tuple[dict[str, Any], str, list[Body]],
) -> None:
    record, _table, _requests = ran
    cells = {cell["cell"]: cell for cell in record["cells"]}
    assert sorted(cells) == sorted(
        f"{model}.{prompt}.open-research"
        for model in ("idle", "rising")
        for prompt in ("careful", "bold")
    )
    for name, cell in cells.items():
        assert cell["runs"] == {str(seed): f"{name}.seed{seed}" for seed in SEEDS}
    for prompt in ("careful", "bold"):
        held = cells[f"idle.{prompt}.open-research"]["cumulative_returns"]
        assert set(held.values()) == {0.0}
        bought = cells[f"rising.{prompt}.open-research"]["cumulative_returns"]
        assert all(value > 0.1 for value in bought.values())  # 90 % of a +25 % move, less fees


def test_the_better_model_is_distinguishable_and_identical_prompts_are_not(
    ran: tuple[dict[str, Any], str, list[Body]],
) -> None:
    record, _table, _requests = ran
    found = {(d["axis"], d["variant"]): d for d in record["differences"]}
    assert len(found) == 4  # model for each prompt, prompt for each model
    for prompt in ("careful", "bold"):
        model = found[("model", f"rising.{prompt}.open-research")]
        assert model["reference"] == f"idle.{prompt}.open-research"
        assert model["seeds"] == list(SEEDS)
        assert model["periods"] >= 10
        assert 0 < model["low"] <= model["mean_slot_return_difference"] <= model["high"]
        assert model["distinguishable"] is True
        assert model["verdict"] == "variant better"
        assert model["wins"] == 3
        assert model["adjusted_p_value"] <= 0.05
        cells = {c["cell"]: c for c in record["cells"]}
        assert model["mean_cumulative_return_difference"] == pytest.approx(
            cells[f"rising.{prompt}.open-research"]["mean_cumulative_return"]
        )
    for model_name in ("idle", "rising"):
        prompt = found[("prompt", f"{model_name}.bold.open-research")]
        assert prompt["reference"] == f"{model_name}.careful.open-research"
        assert prompt["low"] <= 0.0 <= prompt["high"]
        assert prompt["distinguishable"] is False
        assert prompt["verdict"] == "not distinguishable from 0"
        assert prompt["wins"] == 0


def test_the_table_prints_the_paired_differences(
    ran: tuple[dict[str, Any], str, list[Body]],
) -> None:
    _record, table, _requests = ran
    assert "paired differences" in table
    assert "model: rising - idle" in table
    assert "prompt: bold - careful" in table
    assert "variant better" in table
    assert "not distinguishable from 0" in table


def test_each_request_carries_its_seed_and_its_prompt(
    ran: tuple[dict[str, Any], str, list[Body]],
) -> None:
    _record, _table, requests = ran
    assert {body.get("seed") for body in requests} == set(SEEDS)
    systems = [body["messages"][0]["content"] for body in requests]
    assert any(CAREFUL in text and BOLD not in text for text in systems)
    assert any(BOLD in text and CAREFUL not in text for text in systems)
    assert all((CAREFUL in text) != (BOLD in text) for text in systems)


def test_a_config_without_an_experiment_is_one_error_line(tmp_path: Path) -> None:
    config = tmp_path / "openbell.toml"
    config.write_text(
        f'[store]\nurl = "sqlite:///{(tmp_path / "x.db").as_posix()}"\n\n'
        '[markets.cn]\nuniverse = "sse50"\ncadence = "daily"\nsource = "akshare"\n'
        'initial_cash = "100000"\n',
        encoding="utf-8",
    )
    result = openbell(tmp_path, "experiment", "--config", str(config), env=clean_env())
    assert result.returncode == 2
    assert "no [experiment] section" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_example_runs_against_the_fake_model_and_its_seeds_differ(tmp_path: Path) -> None:
    """`examples/experiment.toml` as written, but for the fake model's port: the fake model draws
    each run's trades from its request's seed, so a cell's three runs differ, and two prompts it
    does not read are not told apart."""
    from openbell.ops.wiring.fake_llm import FakeModel, serve_fake_model

    examples = Path(__file__).resolve().parents[2] / "examples"
    (tmp_path / "prompts").mkdir()
    for name in ("patient.md", "eager.md"):
        text = (examples / "prompts" / name).read_text(encoding="utf-8")
        (tmp_path / "prompts" / name).write_text(text, encoding="utf-8")
    server = serve_fake_model(FakeModel())
    try:
        written = (examples / "experiment.toml").read_text(encoding="utf-8")
        assert "http://127.0.0.1:8790/v1" in written
        config = tmp_path / "experiment.toml"
        config.write_text(written.replace("http://127.0.0.1:8790/v1", server.url), encoding="utf-8")
        result = openbell(tmp_path, "experiment", "--config", str(config), "--json",
                          "--no-progress", env=clean_env(), timeout_s=300)  # fmt: skip
    finally:
        server.close()
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    for cell in record["cells"]:
        assert len(set(cell["cumulative_returns"].values())) == 3, cell["cell"]
    (difference,) = record["differences"]
    assert difference["comparison"] == "prompt: eager - patient"
    assert difference["low"] < difference["high"]
    assert difference["distinguishable"] is False
    assert (tmp_path / "var" / "experiment.db").exists()
