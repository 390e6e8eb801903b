"""Aliases (KTD-Fin masking): an account's masking key, and the map that writes and reads it.

This module owns `derive_key`, which makes or extends an account's `MaskingKey` (its aliases, day
epoch and money unit), `AliasMap`, the key as the masker uses it (spellings of each instrument,
`day_+N` labels), and `unmask_text`, which turns a masked text back with the key (for reports).
A new key is seeded from the account id and the config seed: each instrument of the universe
(sorted, with the benchmark) gets `asset_NNNN`, NNNN drawn without replacement from 0001..9999,
and the day epoch is the universe file's date (or the one given) moved back by a seeded 100..999
days, so a day label says nothing about the calendar or the account's age. A stored key is only
ever extended: a member it lacks gets an alias drawn from the aliases still free, and nothing
else changes. Spellings: the symbol, the code without its exchange suffix (`600519` of
`600519.SH`), a pair's base (`BTC` of `BTC/USDT`) and the company name of the universe file, also
without a bracketed part and the bracket's content ("Strategy (MicroStrategy)": both).
"""

from __future__ import annotations

import hashlib
import random
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Final
from zoneinfo import ZoneInfo

from openbell.agents.rebasing import MoneyUnit
from openbell.markets.universes import Universe
from openbell.store.masking_keys import MaskingKey

#: The numbers an alias `asset_NNNN` may take.
_ALIASES: Final = range(1, 10_000)
#: A day label, `day_+N` with an optional market-local time, as the masker writes them.
LABEL_RE: Final = re.compile(
    r"\bday_([+-]\d{1,6})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?(?![\w:])"
)
#: An alias as the masker writes it.
ALIAS_RE: Final = re.compile(r"\basset_\d{4}\b")


#: The seed of the keys of accounts whose agent sets no `masking_seed`: drawn once per process
#: from the operating system's randomness. A key is stored at its account's first masked cycle and
#: read back ever after, so this seed is never needed again and cannot be rebuilt from openbell's
#: source and an account id (which a configured seed, like the old default 0, can).
SECRET_SEED: Final = secrets.token_hex(16)


def seed_of(configured: int | None) -> str | int:
    """The seed of an agent's masking keys: the configured one, or `SECRET_SEED`."""
    return SECRET_SEED if configured is None else configured


def _rng(seed: str | int, account_id: int) -> random.Random:
    digest = hashlib.sha256(f"openbell-masking|{seed}|{account_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))  # noqa: S311  (not for secrets)


def _spellings(symbol: str, name: str) -> list[str]:
    """Every way `symbol` is written: itself, its code without a suffix, a pair's base, its name."""
    out = [symbol]
    if "." in symbol:
        out.append(symbol.split(".", 1)[0])
    if "/" in symbol:
        out.append(symbol.split("/", 1)[0])
    name = name.strip()
    if name:
        out.append(name)
        short = re.sub(r"\s*\(([^)]*)\)", "", name).strip()  # "Alphabet (Class A)"
        inner = [part for part in re.findall(r"\(([^)]*)\)", name) if not part.startswith("Class")]
        out.extend(part for part in (short, *inner) if part)
        if short.startswith("The "):
            out.append(short.removeprefix("The "))
    return out


def _members(universe: Universe) -> dict[str, str]:
    """Symbol -> company name of the universe's instruments and its benchmark, by symbol."""
    named = {instrument.symbol: instrument.name for instrument in universe.instruments}
    if universe.benchmark is not None:
        named.setdefault(universe.benchmark, "")
    return dict(sorted(named.items()))


def derive_key(
    universe: Universe,
    *,
    account_id: int,
    seed: str | int,
    epoch: date | None = None,
    stored: MaskingKey | None = None,
) -> MaskingKey:
    """The key of `account_id` over `universe` (with its benchmark): `stored` with an alias added
    for each member it lacks (`stored` itself when none), or a new key seeded by `seed`, whose day
    epoch is `epoch` (default: the universe file's date) moved back by 100..999 days."""
    symbols = list(_members(universe))
    if stored is None:
        rng = _rng(seed, account_id)
        numbers = rng.sample(_ALIASES, len(symbols))
        shift = timedelta(days=rng.randrange(100, 1000))
        return MaskingKey(
            account_id=account_id,
            epoch=(epoch or universe.as_of) - shift,
            money_unit=MoneyUnit.draw(_rng(f"{seed}|money", account_id)).factor,
            aliases={s: f"asset_{n:04d}" for s, n in zip(symbols, numbers, strict=True)},
        )
    missing = [symbol for symbol in symbols if symbol not in stored.aliases]
    if not missing:
        return stored
    used = set(stored.aliases.values())
    free = (
        alias
        for n in _rng(f"{seed}|added", account_id).sample(_ALIASES, len(_ALIASES))
        if (alias := f"asset_{n:04d}") not in used
    )
    added = dict(zip(missing, free, strict=False))
    if len(added) < len(missing):
        raise ValueError(f"account {account_id} has more than {len(_ALIASES)} symbols to alias")
    return MaskingKey(
        account_id=account_id,
        epoch=stored.epoch,
        money_unit=stored.money_unit,
        aliases={**stored.aliases, **added},
    )


@dataclass(frozen=True, slots=True)
class AliasMap:
    """One account's aliases: symbol -> `asset_NNNN`, spelling -> alias, and its day epoch."""

    aliases: Mapping[str, str]
    spellings: Mapping[str, str]
    epoch: date
    timezone: ZoneInfo

    @classmethod
    def of(cls, key: MaskingKey, universe: Universe, *, timezone: str) -> AliasMap:
        """The map of `key`, with the spellings of `universe`'s members (names, codes)."""
        aliases = dict(key.aliases)
        spellings: dict[str, str] = {}
        for symbol in sorted(aliases):  # symbols first: a name never shadows another's ticker
            spellings[symbol] = aliases[symbol]
        for symbol, name in _members(universe).items():
            if symbol in aliases:
                for spelling in _spellings(symbol, name):
                    spellings.setdefault(spelling, aliases[symbol])
        return cls(
            aliases=aliases, spellings=spellings, epoch=key.epoch, timezone=ZoneInfo(timezone)
        )

    def day_label(self, day: date) -> str:
        """`day_+N`: `day` counted from the epoch."""
        return f"day_{(day - self.epoch).days:+d}"

    def datetime_label(self, at: datetime) -> str:
        """`day_+NTHH:MM` for aware `at`, in the market's local time."""
        local = at.astimezone(self.timezone)
        label = f"{self.day_label(local.date())}T{local:%H:%M}"
        if local.second or local.microsecond:
            label += f":{local:%S}"
        if local.microsecond:
            label += f".{local:%f}"
        return label

    def resolve_label(self, match: re.Match[str]) -> str:
        """The ISO date or UTC datetime a `day_...` label stands for."""
        day = self.epoch + timedelta(days=int(match.group(1)))
        if match.group(2) is None:
            return day.isoformat()
        fraction = (match.group(5) or "0").ljust(6, "0")
        local = datetime.combine(
            day,
            time(int(match.group(2)), int(match.group(3)), int(match.group(4) or 0), int(fraction)),
            tzinfo=self.timezone,
        )
        return local.astimezone(UTC).isoformat()


def unmask_text(text: str, key: MaskingKey, *, timezone: str) -> str:
    """`text` that a masked model saw or wrote, its aliases and day labels turned back into the
    real symbols and dates with its account's `key` (for reports; its money is left as shown)."""
    symbols = {alias: symbol for symbol, alias in key.aliases.items()}
    labels = AliasMap(
        aliases=key.aliases, spellings={}, epoch=key.epoch, timezone=ZoneInfo(timezone)
    )
    text = ALIAS_RE.sub(lambda m: symbols.get(m.group(0), m.group(0)), text)
    return LABEL_RE.sub(labels.resolve_label, text)
