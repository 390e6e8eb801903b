"""`openbell probe recall` against scripted models on 127.0.0.1 (issue 27, item 2).

The rememberer "remembers" the bundled US daily bars before 2025-09-01: shown a real symbol and a
last bar before that day, it looks up the true next bar and answers its direction and size; past
it, or shown a masked alias, it answers at random (seeded). The probe, told the model's cutoff is
2025-08-31, reports its before-cutoff unmasked direction hits far above chance and the
after-cutoff and masked ones at chance, and the verdict "contaminated". A model that answers at
random everywhere gets "no sign of recall".
"""

from __future__ import annotations

import itertools
import json
import random
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openbell.markets.replay_source import ReplaySource
from openbell_testkit.cli import openbell
from openbell_testkit.llm import ScriptedModel, completion, serve_script

UNIVERSE = ["AAPL", "MSFT", "NVDA", "AMZN", "GOOGL", "META"]
REMEMBERS_UNTIL = datetime(2025, 9, 1, tzinfo=UTC)
BUNDLED = ReplaySource.from_bundled("us")


def true_next(symbol: str, last_end: datetime) -> tuple[str, str] | None:
    """The direction and size bucket of the bundled bar after the one ending at `last_end`."""
    early, late = datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC)
    bars = BUNDLED.bars_between([symbol], "1d", early, late).get(symbol, ())
    for last, following in itertools.pairwise(bars):
        if last.end_at == last_end:
            move = (following.close - last.close) / last.close
            size = next(
                (name for edge, name in ((Decimal("0.01"), "<1%"), (Decimal("0.02"), "1-2%"),
                                         (Decimal("0.05"), "2-5%")) if abs(move) < edge),
                ">5%",
            )  # fmt: skip
            return ("up" if move > 0 else "down"), size
    return None


def shown_bars(body: dict[str, Any]) -> dict[str, Any]:
    text = body["messages"][-1]["content"]
    found: dict[str, Any] = json.loads(text[text.index("{") : text.rindex("}\n\nWhat") + 1])
    return found


def rememberer(rng: random.Random) -> Any:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        shown = shown_bars(body)
        try:
            last_end = datetime.fromisoformat(shown["bars"][-1]["end_at"])
        except ValueError:  # a masked day label ("day_+421T16:00"): nothing to look up
            last_end = None
        truth = (
            true_next(shown["symbol"], last_end)
            if last_end is not None and last_end < REMEMBERS_UNTIL
            else None
        )
        direction, size = truth or (rng.choice(["up", "down"]), rng.choice(["<1%", "1-2%"]))
        return completion(json.dumps({"direction": direction, "size": size}))

    return answer


def guesser(rng: random.Random) -> Any:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        shown_bars(body)  # a question with bars in it
        return completion(f'{{"direction": "{rng.choice(["up", "down"])}", "size": "<1%"}}')

    return answer


def probe(tmp_path: Path, step: Any) -> dict[str, Any]:
    model = ScriptedModel([step] * 1000)
    with serve_script(model) as url:
        config = tmp_path / "openbell.toml"
        config.write_text(
            f'[store]\nurl = "sqlite:///{(tmp_path / "ledger.db").as_posix()}"\n\n'
            '[cutoffs."scripted-1"]\ncutoff = "2025-08-31"\nsource = "the test"\n\n'
            f'[markets.us]\nuniverse = {json.dumps(UNIVERSE)}\ncadence = "daily"\n'
            'source = "bundled"\ninitial_cash = "100000"\n\n'
            f'[[agents]]\nname = "probed"\nkind = "llm"\nmarkets = ["us"]\n'
            f'base_url = "{url}"\nmodel = "scripted-1"\n',
            encoding="utf-8",
        )
        done = openbell(
            tmp_path, "probe", "recall", "--agent", "probed", "--market", "us", "--config",
            str(config), "--dates", "40", "--format", "json",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(model.requests) == 2 * 2 * 40  # two sides, masked and unmasked
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def cells(found: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(cell["side"], cell["masking"]): cell["direction"] for cell in found["cells"]}


def test_a_model_that_remembers_the_bars_is_found_out(tmp_path: Path) -> None:
    found = probe(tmp_path, rememberer(random.Random(7)))
    by = cells(found)
    recalled = by["before", "unmasked"]
    assert recalled["answered"] == 40
    assert recalled["hits"] == 40  # it remembers every one
    assert recalled["low"] > recalled["chance"]
    assert recalled["p_value"] < 1e-6
    for cell in (("after", "unmasked"), ("before", "masked"), ("after", "masked")):
        rate = by[cell]
        assert rate["answered"] == 40
        assert not rate["above_chance"], cell
        assert rate["low"] <= rate["chance"], cell
    assert found["verdict"].startswith("contaminated: before-cutoff hit rate above chance at 95%")
    assert found["cutoff"] == "2025-08-31"
    assert found["clean_from"] == "2025-09-01T00:00:00+00:00"


def test_a_model_that_guesses_shows_no_recall(tmp_path: Path) -> None:
    found = probe(tmp_path, guesser(random.Random(11)))
    assert not any(rate["above_chance"] for rate in cells(found).values())
    assert found["verdict"].startswith("no sign of recall")


def test_a_model_without_a_known_cutoff_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "openbell.toml"
    config.write_text(
        '[markets.us]\nuniverse = ["AAPL"]\ncadence = "daily"\nsource = "bundled"\n'
        'initial_cash = "1000"\n\n'
        '[[agents]]\nname = "probed"\nkind = "llm"\nmarkets = ["us"]\n'
        'base_url = "http://127.0.0.1:9/v1"\nmodel = "no-such-model"\n',
        encoding="utf-8",
    )
    done = openbell(tmp_path, "probe", "recall", "-a", "probed", "-m", "us", "-c", str(config))
    assert done.returncode != 0
    assert "the training cutoff of model 'no-such-model' is unknown" in done.stderr


@pytest.mark.parametrize("stated", ["2025-13", "last year"])
def test_a_bad_cutoff_is_refused(tmp_path: Path, stated: str) -> None:
    config = tmp_path / "openbell.toml"
    config.write_text(
        f'[cutoffs."m"]\ncutoff = "{stated}"\nsource = "x"\n\n'
        '[markets.us]\nuniverse = ["AAPL"]\ncadence = "daily"\nsource = "bundled"\n'
        'initial_cash = "1000"\n',
        encoding="utf-8",
    )
    done = openbell(tmp_path, "config", "check", "-c", str(config))
    assert done.returncode != 0
    assert "cutoffs" in done.stderr
