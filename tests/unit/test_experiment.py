"""`openbell experiment`'s grid (`ops.experiment.grid`) and paired differences
(`ops.experiment.paired`), the latter against a reference computation written here: the slot
means by explicit sums, the stationary bootstrap by its documented rule replayed on the same
generator, the percentile interval by sorting, and a pure-noise grid whose differences must not
be distinguishable from zero much more often than the level allows."""

from __future__ import annotations

import math
import zlib
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from openbell.markets.errors import ConfigError, InvalidConfig
from openbell.ops.config.schema import LlmAgentConfig, load_config
from openbell.ops.evaluation.return_metrics import NavPoint
from openbell.ops.evaluation.significance import holm
from openbell.ops.experiment.grid import expand, experiment_config
from openbell.ops.experiment.paired import paired_board, paired_difference

START = datetime(2025, 1, 1, tzinfo=UTC)


def _navs(returns: list[float] | np.ndarray) -> list[NavPoint]:
    values = [1000.0]
    for r in returns:
        values.append(values[-1] * (1.0 + float(r)))
    return [
        NavPoint(at=START + timedelta(days=i), nav=Decimal(f"{v:.8f}"))
        for i, v in enumerate(values)
    ]


def _reference_interval(
    slot_means: list[float], draws: int, entropy: tuple[int, int, int], confidence: float
) -> tuple[float, float]:
    n = len(slot_means)
    block = math.ceil(n ** (1 / 3))
    while (block - 1) ** 3 >= n:
        block -= 1
    rng = np.random.default_rng(entropy)
    stats = []
    for _ in range(draws):
        starts = rng.integers(0, n, size=n)
        breaks = rng.random(n)
        index = int(starts[0])
        total = slot_means[index]
        for i in range(1, n):
            index = int(starts[i]) if breaks[i] < 1.0 / block else (index + 1) % n
            total += slot_means[index]
        stats.append(total / n)
    low, high = np.quantile(stats, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def test_the_paired_difference_matches_a_reference_computation() -> None:
    rng = np.random.default_rng(7)
    variant = {seed: _navs(rng.normal(0.002, 0.01, 20)) for seed in (1, 2, 3)}
    reference = {seed: _navs(rng.normal(0.0, 0.01, 20)) for seed in (1, 2, 3)}
    found = paired_difference("v", "r", variant, reference, confidence=0.9, draws=300, seed=5)
    per_seed = []
    for seed in (1, 2, 3):
        a = [float(p.nav) for p in variant[seed]]
        b = [float(p.nav) for p in reference[seed]]
        per_seed.append([a[t] / a[t - 1] - b[t] / b[t - 1] for t in range(1, len(a))])
    slot_means = [sum(column) / 3 for column in zip(*per_seed, strict=True)]
    assert found.periods == 20
    assert found.seeds == (1, 2, 3)
    assert found.mean_difference == pytest.approx(sum(slot_means) / 20)
    entropy = (5, zlib.crc32(b"v"), zlib.crc32(b"r"))
    low, high = _reference_interval(slot_means, 300, entropy, 0.9)
    assert found.low == pytest.approx(low)
    assert found.high == pytest.approx(high)
    assert found.block_length == 3
    for seed in (1, 2, 3):
        a, b = variant[seed], reference[seed]
        expected = float(a[-1].nav / a[0].nav - b[-1].nav / b[0].nav)
        assert found.return_differences[seed] == pytest.approx(expected)
    assert found.wins == sum(1 for v in found.return_differences.values() if v > 0)


def test_identical_variants_differ_by_nothing_and_are_not_distinguishable() -> None:
    runs = {seed: _navs(np.random.default_rng(seed).normal(0, 0.02, 30)) for seed in (1, 2)}
    found = paired_difference("a", "b", runs, runs, confidence=0.95, draws=200)
    assert (found.mean_difference, found.low, found.high) == (0.0, 0.0, 0.0)
    assert found.p_value == 1.0
    assert not found.distinguishable


def test_a_steady_edge_is_distinguishable_both_ways() -> None:
    rng = np.random.default_rng(3)
    up = {seed: _navs(rng.normal(0.01, 0.005, 25)) for seed in (1, 2, 3)}
    flat = {seed: _navs([0.0] * 25) for seed in (1, 2, 3)}
    better = paired_difference("up", "flat", up, flat, confidence=0.95, draws=500)
    worse = paired_difference("flat", "up", flat, up, confidence=0.95, draws=500)
    assert better.distinguishable
    assert better.low is not None
    assert better.low > 0
    assert worse.distinguishable
    assert worse.high is not None
    assert worse.high < 0
    assert better.p_value is not None
    assert better.p_value < 0.01


def test_pure_noise_is_rarely_distinguishable() -> None:
    rng = np.random.default_rng(2026)
    flagged = 0
    trials = 200
    for trial in range(trials):
        a = {seed: _navs(rng.normal(0, 0.01, 15)) for seed in (1, 2, 3)}
        b = {seed: _navs(rng.normal(0, 0.01, 15)) for seed in (1, 2, 3)}
        found = paired_difference("a", "b", a, b, confidence=0.95, draws=300, seed=trial)
        flagged += found.distinguishable
    # At most 5 % expected; on 15 slots the bootstrap interval alone excludes 0 in about 13 %
    # of these (28 of 200), which the verdict's second test (the sign flips) must bring down.
    assert flagged / trials <= 0.06


def test_the_board_holm_adjusts_across_comparisons() -> None:
    rng = np.random.default_rng(11)
    flat = {1: _navs([0.0] * 15)}
    found = [
        paired_difference(f"v{k}", "r", {1: _navs(rng.normal(0.003 * k, 0.01, 15))}, flat,
                          confidence=0.95, draws=400)
        for k in range(4)
    ]  # fmt: skip
    adjusted = paired_board(found)
    raw = [f.p_value for f in found]
    assert all(p is not None for p in raw)
    assert [a.adjusted_p_value for a in adjusted] == pytest.approx(holm(raw))  # type: ignore[arg-type]


def test_too_few_slots_have_no_interval() -> None:
    found = paired_difference("a", "b", {1: _navs([0.01, 0.01])[:2]}, {1: _navs([0.0])},
                              confidence=0.95, draws=100)  # fmt: skip
    assert found.low is None
    assert not found.distinguishable


BASE = """
[store]
url = "sqlite:///x.db"

[markets.us]
universe = "djia20"
cadence = "daily"
source = "yfinance"
initial_cash = "10000"

[[agents]]
name = "alpha"
kind = "llm"
markets = ["us"]
base_url = "http://127.0.0.1:9/v1"
model = "m-alpha"
temperature = 0.7
price_in_per_mtok = "1"
price_out_per_mtok = "2"

[[agents]]
name = "beta"
kind = "llm"
markets = ["us"]
base_url = "http://127.0.0.1:9/v1"
model = "m-beta"

[[agents]]
name = "hold"
kind = "buy_and_hold"
markets = ["us"]
"""


def _write(tmp_path: Path, experiment: str) -> Path:
    path = tmp_path / "openbell.toml"
    path.write_text(BASE + "\n[experiment]\n" + experiment, encoding="utf-8")
    return path


def test_the_grid_expands_every_cell_and_seed_with_its_prompt_and_mode(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "terse.md").write_text("Trade rarely.\n", encoding="utf-8")
    path = _write(
        tmp_path,
        'market = "us"\nstart = 2025-07-01\nend = 2025-07-10\nmodels = ["alpha", "beta"]\n'
        'prompts = ["", "p/terse.md"]\nmodes = ["open-research", "memory-only"]\n'
        "seeds = [4, 9]\n",
    )
    config = load_config(path)
    grid = expand(config, tmp_path)
    assert grid.settings.start == date(2025, 7, 1)
    assert [cell.name for cell in grid.cells][:4] == [
        "alpha.none.open-research", "alpha.none.memory-only",
        "alpha.terse.open-research", "alpha.terse.memory-only",
    ]  # fmt: skip
    assert len(grid.cells) == 8
    assert len(grid.agents) == 16
    run = next(a for a in grid.agents if a.name == "alpha.terse.memory-only.seed9")
    assert isinstance(run, LlmAgentConfig)
    assert (run.mode, run.instructions, run.extra_body["seed"]) == (
        "memory-only",
        "Trade rarely.",
        9,
    )
    assert (run.model, run.temperature, run.markets) == ("m-alpha", 0.7, ("us",))
    assert run.price_in_per_mtok == Decimal(1)
    plain = next(a for a in grid.agents if a.name == "beta.none.open-research.seed4")
    assert plain.instructions == ""
    # each axis against its first value, the others held: 4 pairs per axis
    axes = [c.axis for c in grid.comparisons]
    assert (axes.count("model"), axes.count("prompt"), axes.count("mode")) == (4, 4, 4)
    for c in grid.comparisons:
        assert c.reference.value(c.axis) == {"model": "alpha", "prompt": "none",
                                             "mode": "open-research"}[c.axis]  # fmt: skip
        assert c.held == {a: c.reference.value(a) for a in c.held}
    ran = experiment_config(config, grid)
    assert {a.name for a in ran.agents} == set(grid.runs.values())


@pytest.mark.parametrize(
    ("experiment", "words"),
    [
        ('models = ["gamma"]\n', "names no [[agents]] entry"),
        ('models = ["hold"]\n', "names no [[agents]] entry"),
        ('models = ["alpha", "alpha"]\n', "listed twice"),
        ('models = ["alpha"]\nseeds = [1, 1]\n', "listed twice"),
        ('models = ["alpha"]\nmodes = ["telepathy"]\n', "modes"),
    ],
)
def test_a_grid_the_file_cannot_run_is_refused_when_loading(
    tmp_path: Path, experiment: str, words: str
) -> None:
    path = _write(tmp_path, 'market = "us"\nstart = 2025-07-01\nend = 2025-07-10\n' + experiment)
    with pytest.raises(InvalidConfig) as caught:
        load_config(path)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("experiment", "words"),
    [
        ('models = ["alpha"]\nprompts = ["missing.md"]\n', "no such file"),
        ('models = ["alpha"]\nmodes = ["pair"]\n', "cannot run mode 'pair'"),
        ('models = ["alpha"]\nprompts = ["a/x.md", "b/x.md"]\n', "labelled 'x'"),
    ],
)
def test_a_grid_that_cannot_expand_is_one_config_error(
    tmp_path: Path, experiment: str, words: str
) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.md").write_text("text", encoding="utf-8")
    path = _write(tmp_path, 'market = "us"\nstart = 2025-07-01\nend = 2025-07-10\n' + experiment)
    with pytest.raises(ConfigError, match=None) as caught:
        expand(load_config(path), tmp_path)
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)
