"""The model registry of training cutoffs: which model was trained on data up to when, and who
says so.

This module owns `CutoffRegistry`: each entry a model name, its stated training cutoff and the
source of the date (a URL or a document's name), the entries bundled with openbell
(`model_cutoffs.toml` beside this module) overridden and extended by a config's
`[cutoffs."MODEL"]` tables (`ops.config.schema.ModelCutoffConfig`). A cutoff is written as the
provider states it: `YYYY-MM-DD` covers that whole day, `YYYY-MM` that whole month;
`ModelCutoff.clean_from` is the first instant past it (UTC), and a slot at or after it is the only
kind a model cannot have read about.

A model name is matched (`CutoffRegistry.find`) by these rules, in order, on the name lowered and
stripped of blanks:

1. a provider or organisation path is dropped (`openai/gpt-4o`, `meta-llama/Llama-3.1-8B`: the
   part after the last `/`), and so is an Ollama tag (`llama3.1:70b`: the part before `:`);
2. the name, or one of an entry's `aliases`, exactly;
3. the name without a dated suffix (`-2024-08-06`, `-20241022`, `-0613`) or a `-latest`, exactly;
4. an entry with `prefix = true` whose name or alias, followed by `-`, begins the name
   (`llama-3.1-70b-instruct`); the longest such entry wins.

Nothing else matches: `o3-mini` is not `o3`, and a name the registry does not know has no cutoff
(the caller says "cutoff unknown"; it is never taken as clean).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from typing import Any, Final

#: The bundled registry's file, beside this module.
BUNDLED_FILE: Final = "model_cutoffs.toml"
_STATED: Final = re.compile(r"(\d{4})-(\d{2})(?:-(\d{2}))?")
_DATED_SUFFIX: Final = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest)$")
_ENTRY_KEYS: Final = frozenset({"cutoff", "source", "aliases", "prefix"})


def parse_stated(stated: str) -> tuple[date, date]:
    """The first and the last day a stated cutoff (`YYYY-MM-DD` or `YYYY-MM`) covers through;
    `ValueError` for anything else."""
    found = _STATED.fullmatch(stated.strip())
    if found is None:
        raise ValueError(f'a cutoff is "YYYY-MM-DD" or "YYYY-MM", got {stated!r}')
    year, month, day = found.groups()
    if day is not None:
        last = date(int(year), int(month), int(day))
        return last, last
    first = date(int(year), int(month), 1)
    following = (first.replace(day=28) + timedelta(days=4)).replace(day=1)
    return first, following - timedelta(days=1)


def normalised(name: str) -> str:
    """A model name as the rules compare it: lowered, stripped, without a provider path or an
    Ollama tag (rule 1)."""
    lowered = name.strip().lower()
    lowered = lowered.rsplit("/", 1)[-1]
    return lowered.split(":", 1)[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCutoff:
    """One registry entry: `model`'s training data ends with `stated` (as the provider writes
    it), which `source` says."""

    model: str
    stated: str
    source: str
    aliases: tuple[str, ...] = ()
    prefix: bool = False

    def __post_init__(self) -> None:
        parse_stated(self.stated)
        if not self.model.strip() or not self.source.strip():
            raise ValueError("a cutoff entry needs a model name and a source")

    @property
    def last_day(self) -> date:
        """The last day the stated cutoff covers."""
        return parse_stated(self.stated)[1]

    @property
    def clean_from(self) -> datetime:
        """The first instant (UTC) past the cutoff: a slot before it is inside the model's
        training window."""
        return datetime.combine(self.last_day + timedelta(days=1), datetime.min.time(), UTC)

    def names(self) -> tuple[str, ...]:
        """The entry's name and aliases, as the rules compare them."""
        return tuple(dict.fromkeys(normalised(n) for n in (self.model, *self.aliases)))


def entry_of(model: str, table: Mapping[str, Any]) -> ModelCutoff:
    """The entry of a `[cutoffs."MODEL"]` table (`ValueError` for an unknown key or a bad
    value)."""
    unknown = sorted(set(table) - _ENTRY_KEYS)
    if unknown:
        raise ValueError(f"cutoff {model!r}: unknown keys {unknown}")
    aliases = table.get("aliases", ())
    prefix = table.get("prefix", False)
    cutoff, source = table.get("cutoff"), table.get("source")
    if not isinstance(cutoff, str) or not isinstance(source, str):
        raise TypeError(f"cutoff {model!r}: cutoff and source are strings")
    if not isinstance(aliases, list | tuple) or not all(isinstance(a, str) for a in aliases):
        raise TypeError(f"cutoff {model!r}: aliases is a list of strings")
    if not isinstance(prefix, bool):
        raise TypeError(f"cutoff {model!r}: prefix is true or false")
    return ModelCutoff(
        model=model, stated=cutoff, source=source, aliases=tuple(aliases), prefix=prefix
    )


@dataclass(frozen=True, slots=True)
class CutoffRegistry:
    """The known models' cutoffs (see the module docstring for how a name is matched)."""

    entries: tuple[ModelCutoff, ...]

    def find(self, model: str | None) -> ModelCutoff | None:
        """The entry of `model` by the module's rules, or None (cutoff unknown)."""
        if model is None or not model.strip():
            return None
        name = normalised(model)
        by_name = {n: entry for entry in self.entries for n in entry.names()}
        for candidate in (name, _DATED_SUFFIX.sub("", name)):
            if candidate in by_name:
                return by_name[candidate]
        prefixed = [
            (len(n), entry)
            for entry in self.entries
            if entry.prefix
            for n in entry.names()
            if name.startswith(f"{n}-")
        ]
        return max(prefixed, key=lambda found: found[0])[1] if prefixed else None

    def with_entries(self, entries: Iterable[ModelCutoff]) -> CutoffRegistry:
        """This registry with `entries` added, each replacing an entry of the same model
        name."""
        added = {normalised(entry.model): entry for entry in entries}
        kept = tuple(e for e in self.entries if normalised(e.model) not in added)
        return CutoffRegistry((*kept, *added.values()))


def bundled_registry() -> CutoffRegistry:
    """The registry bundled with openbell (`model_cutoffs.toml`)."""
    text = resources.files(__package__).joinpath(BUNDLED_FILE).read_text(encoding="utf-8")
    tables = tomllib.loads(text).get("cutoffs", {})
    return CutoffRegistry(tuple(entry_of(model, table) for model, table in tables.items()))
