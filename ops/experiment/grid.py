"""The grid of an experiment: `[experiment]` expanded into cells, runs and comparisons.

This module owns what `openbell experiment` runs and compares. A **cell** is one variant: an LLM
`[[agents]]` entry named in `models`, one prompt of `prompts` and one decision mode of `modes`
(the entry's own when `modes` is empty). Each cell runs once per seed of `seeds`, as its own
agent named `MODEL.PROMPT.MODE.seedK` (`ops.wiring.seeds.seeded_agent`: the seed reaches the model
as the request's `seed`), enrolled in the experiment's market only; PROMPT is the prompt file's stem
(`none` for `""`, no instructions). A prompt file is read once, as UTF-8 text, relative to the
config file's directory, and becomes the entry's `instructions`. Every other key of the entry
(endpoint, temperature, budgets, masking) is the same in all its cells.

A **comparison** pairs two cells that differ in one axis: each other value of the axis against
the axis's first value (its reference), for every combination of the other axes. Pure but for
reading the prompt files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from openbell.markets.errors import ConfigError
from openbell.ops.config.schema import (
    MAX_INSTRUCTIONS_CHARS,
    ExperimentConfig,
    LlmAgentConfig,
    OpenbellConfig,
)
from openbell.ops.wiring.seeds import seeded_agent

#: The axes of a grid, in the order a cell's name gives them.
AXES: tuple[str, ...] = ("model", "prompt", "mode")
#: The label of the prompt `""`: the entry's own instructions (none).
NO_PROMPT = "none"
_LABEL = re.compile(r"[^A-Za-z0-9_-]+")
_MAX_NAME = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One variant of the grid: its name and its value on each axis (`prompt` is a label)."""

    name: str
    model: str
    prompt: str
    mode: str

    def value(self, axis: str) -> str:
        """The cell's value on `axis` (one of `AXES`)."""
        value: str = getattr(self, axis)
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """`variant` against `reference`: two cells that differ on `axis` only."""

    axis: str
    variant: Cell
    reference: Cell

    @property
    def label(self) -> str:
        """`axis: variant value - reference value`, with the axes held."""
        return f"{self.axis}: {self.variant.value(self.axis)} - {self.reference.value(self.axis)}"

    @property
    def held(self) -> dict[str, str]:
        """The other axes' values, which both cells share."""
        return {axis: self.variant.value(axis) for axis in AXES if axis != self.axis}


@dataclass(frozen=True, slots=True, kw_only=True)
class Grid:
    """An expanded experiment: its settings, cells, seeds, the run of each (cell, seed) and the
    comparisons."""

    settings: ExperimentConfig
    cells: tuple[Cell, ...]
    seeds: tuple[int, ...]
    runs: Mapping[tuple[str, int], str]
    agents: tuple[LlmAgentConfig, ...]
    comparisons: tuple[Comparison, ...]
    #: The prompt labels by prompt as configured (a path, or `""`).
    prompt_labels: Mapping[str, str]

    def run_name(self, cell: Cell, seed: int) -> str:
        """The agent name of `cell`'s run with `seed`."""
        return self.runs[(cell.name, seed)]


def expand(config: OpenbellConfig, base: Path) -> Grid:
    """The grid of `config`'s `[experiment]`, prompt files read relative to `base` (the config
    file's directory); `ConfigError` for a config without one, an unreadable prompt file, a
    variant its entry's keys refuse, or a name past 64 characters."""
    settings = config.experiment
    if settings is None:
        raise ConfigError("the config has no [experiment] section (see docs/guide/experiment.md)")
    entries = {
        a.name: a for a in config.agents_in(settings.market) if isinstance(a, LlmAgentConfig)
    }
    labels = _prompt_labels(settings.prompts)
    texts = {prompt: _prompt_text(prompt, base) for prompt in settings.prompts}
    cells: list[Cell] = []
    agents: list[LlmAgentConfig] = []
    runs: dict[tuple[str, int], str] = {}
    for model, prompt, mode in _combinations(settings, entries):
        entry = entries[model]
        name = f"{model}.{labels[prompt]}.{mode}"
        cell = Cell(name=name, model=model, prompt=labels[prompt], mode=mode)
        variant = _variant(entry, name, mode, texts[prompt], settings.market)
        cells.append(cell)
        for seed in settings.seeds:
            run = seeded_agent(variant, seed)
            if len(run.name) > _MAX_NAME:
                raise ConfigError(
                    f"experiment: the run name {run.name!r} is longer than {_MAX_NAME} "
                    "characters: shorten the agent's name or the prompt file's"
                )
            assert isinstance(run, LlmAgentConfig)  # noqa: S101  (seeded_agent keeps the kind)
            agents.append(run)
            runs[(name, seed)] = run.name
    return Grid(
        settings=settings,
        cells=tuple(cells),
        seeds=settings.seeds,
        runs=runs,
        agents=tuple(agents),
        comparisons=tuple(_comparisons(cells)),
        prompt_labels=labels,
    )


def experiment_config(config: OpenbellConfig, grid: Grid) -> OpenbellConfig:
    """`config` with its agents replaced by the grid's runs (the experiment runs nothing else)."""
    return config.model_copy(update={"agents": grid.agents})


def _combinations(
    settings: ExperimentConfig, entries: Mapping[str, LlmAgentConfig]
) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for model in settings.models:
        entry = entries.get(model)
        if entry is None:
            raise ConfigError(
                f'experiment: {model!r} names no [[agents]] entry of kind = "llm" trading '
                f"{settings.market!r}"
            )
        modes = settings.modes or (entry.mode,)
        out.extend((model, prompt, mode) for prompt in settings.prompts for mode in modes)
    if not settings.modes and len({entries[model].mode for model in settings.models}) > 1:
        raise ConfigError(
            "experiment: the models' entries have different modes: list the modes to run in "
            "modes = [...], so each model runs each of them"
        )
    return out


def _variant(
    entry: LlmAgentConfig, name: str, mode: str, instructions: str, market: str
) -> LlmAgentConfig:
    """`entry` as the cell `name` runs it, validated again (a mode may need keys it lacks)."""
    raw = entry.model_dump(mode="json", exclude_unset=True)
    raw.update(name=name, mode=mode, instructions=instructions, markets=(market,))
    try:
        return LlmAgentConfig.model_validate(raw)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise ConfigError(
            f"experiment: agent {entry.name!r} cannot run mode {mode!r}: {where}: {problem['msg']}"
        ) from None


def _prompt_labels(prompts: tuple[str, ...]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for prompt in prompts:
        label = NO_PROMPT if not prompt else _LABEL.sub("-", Path(prompt).stem).strip("-")
        if not label:
            raise ConfigError(f"experiment: prompt file {prompt!r} has no usable name")
        if label in labels.values():
            raise ConfigError(
                f"experiment: two prompts are both labelled {label!r}: give the files distinct "
                "names"
            )
        labels[prompt] = label
    return labels


def _prompt_text(prompt: str, base: Path) -> str:
    if not prompt:
        return ""
    path = Path(prompt) if Path(prompt).is_absolute() else base / prompt
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"experiment: prompt file {prompt!r}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"experiment: prompt file {prompt!r}: cannot read: {exc}") from None
    text = text.strip()
    if not text:
        raise ConfigError(f'experiment: prompt file {prompt!r} is empty (use "" for none)')
    if len(text) > MAX_INSTRUCTIONS_CHARS:
        raise ConfigError(
            f"experiment: prompt file {prompt!r} is longer than {MAX_INSTRUCTIONS_CHARS} characters"
        )
    return text


def _comparisons(cells: list[Cell]) -> list[Comparison]:
    out: list[Comparison] = []
    for axis in AXES:
        others = [a for a in AXES if a != axis]
        groups: dict[tuple[str, ...], list[Cell]] = {}
        for cell in cells:
            groups.setdefault(tuple(cell.value(a) for a in others), []).append(cell)
        for group in groups.values():
            values = list(dict.fromkeys(cell.value(axis) for cell in group))
            if len(values) < 2:
                continue
            first = next(cell for cell in group if cell.value(axis) == values[0])
            out.extend(
                Comparison(axis=axis, variant=cell, reference=first)
                for cell in group
                if cell is not first
            )
    return out
