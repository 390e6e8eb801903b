"""The model registry of training cutoffs (`ops.config.cutoffs`) and the exact binomial statistics
of the recall probe (`ops.evaluation.stats`)."""

from __future__ import annotations

import tomllib
from datetime import UTC, date, datetime

import pytest

from openbell.ops.config.cutoffs import ModelCutoff, bundled_registry, parse_stated
from openbell.ops.config.schema import OpenbellConfig
from openbell.ops.evaluation.probes.recall import read_reply
from openbell.ops.evaluation.stats import binomial_upper_tail, clopper_pearson


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("openai/gpt-4o", "gpt-4o"),
        ("GPT-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("o3-2025-04-16", "o3"),
        ("o3-mini", None),  # not o3: another model
        ("o4-mini", "o4-mini"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("gpt-4.1-mini", None),
        ("claude-3-5-sonnet-20241022", "claude-3.5-sonnet"),
        ("claude-3-7-sonnet-20250219", "claude-3.7-sonnet"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-opus-4-1-20250805", None),  # Opus 4.1 is not Opus 4
        ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1"),
        ("llama3.3:70b", "llama-3.3"),
        ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("gemini-2.0-flash-001", "gemini-2.0-flash"),
        ("deepseek-chat", None),
        ("Qwen/Qwen2.5-72B-Instruct", None),
        ("scripted-1", None),
        ("", None),
    ],
)
def test_a_name_matches_by_the_documented_rules(name: str, entry: str | None) -> None:
    found = bundled_registry().find(name)
    assert (None if found is None else found.model) == entry


def test_every_bundled_entry_names_its_source() -> None:
    entries = bundled_registry().entries
    assert len(entries) >= 10
    assert all(entry.source.startswith("https://") for entry in entries)


@pytest.mark.parametrize(
    ("stated", "first", "last"),
    [
        ("2023-10-01", date(2023, 10, 1), date(2023, 10, 1)),
        ("2024-04", date(2024, 4, 1), date(2024, 4, 30)),
        ("2023-12", date(2023, 12, 1), date(2023, 12, 31)),
        ("2024-02", date(2024, 2, 1), date(2024, 2, 29)),
    ],
)
def test_a_stated_cutoff_covers_its_day_or_its_month(stated: str, first: date, last: date) -> None:
    assert parse_stated(stated) == (first, last)


@pytest.mark.parametrize("stated", ["2024", "2024-13", "Oct 2023", "2024-02-30"])
def test_a_bad_cutoff_is_refused(stated: str) -> None:
    with pytest.raises(ValueError, match=r".+"):
        parse_stated(stated)


def test_the_clean_instant_is_the_day_after_the_cutoff() -> None:
    month = ModelCutoff(model="m", stated="2024-04", source="s")
    day = ModelCutoff(model="m", stated="2023-10-01", source="s")
    assert month.clean_from == datetime(2024, 5, 1, tzinfo=UTC)
    assert day.clean_from == datetime(2023, 10, 2, tzinfo=UTC)


def test_the_config_overrides_and_extends_the_bundled_registry() -> None:
    config = OpenbellConfig.model_validate(
        tomllib.loads(
            '[cutoffs."gpt-4o"]\ncutoff = "2024-01"\nsource = "my notes"\n\n'
            '[cutoffs."house-model"]\ncutoff = "2025-02-03"\nsource = "the card"\n'
            'aliases = ["house"]\nprefix = true\n\n'
            '[markets.us]\nuniverse = ["AAPL"]\ncadence = "daily"\nsource = "bundled"\n'
            'initial_cash = "1000"\n'
        )
    )
    registry = config.cutoff_registry()
    replaced = registry.find("gpt-4o-2024-08-06")
    assert replaced is not None
    assert (replaced.stated, replaced.source) == ("2024-01", "my notes")
    added = registry.find("house-7b")
    assert added is not None
    assert added.model == "house-model"
    kept = registry.find("o3")
    assert kept is not None
    assert kept.stated == "2024-06-01"
    assert len(registry.entries) == len(bundled_registry().entries) + 1


@pytest.mark.parametrize(
    ("hits", "n", "low", "high"),
    [
        # References: R's binom.test(x, n)$conf.int, and the closed forms at 0 and n hits.
        (7, 20, 0.1539092, 0.5921885),
        (0, 10, 0.0, 1 - 0.025 ** (1 / 10)),
        (10, 10, 0.025 ** (1 / 10), 1.0),
        (50, 100, 0.3983211, 0.6016789),
        (1, 40, 0.0006327, 0.1315851),
    ],
)
def test_clopper_pearson_matches_the_reference(hits: int, n: int, low: float, high: float) -> None:
    assert clopper_pearson(hits, n) == pytest.approx((low, high), abs=1e-6)


def test_the_binomial_tail_matches_the_sum_of_its_terms() -> None:
    from math import comb

    for hits in range(21):
        expected = sum(comb(20, k) * 0.3**k * 0.7 ** (20 - k) for k in range(hits, 21))
        assert binomial_upper_tail(hits, 20, 0.3) == pytest.approx(expected, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(
    ("reply", "read"),
    [
        ('{"direction": "up", "size": "1-2%"}', ("up", "1-2%")),
        ('Thinking... {"direction": "DOWN", "size": "> 5%"}', ("down", ">5%")),
        ('{"direction": "sideways", "size": "huge"}', (None, None)),
        ("no json here", (None, None)),
        ('{"direction": "up"}', ("up", None)),
    ],
)
def test_a_reply_is_read_for_its_two_known_fields(reply: str, read: tuple[str | None, ...]) -> None:
    assert read_reply(reply) == read
