"""Masking (KTD-Fin): what a model may learn of tickers, company names and calendar dates.

This module owns the four masking levels (`bright`, `stock-blind`, `date-blind`, `blinded`), the
per-account `AliasMap` and `AliasMasker`, which implements the LLM agent's `Masker` seam.

The alias map is seeded from the account id and a config seed: each instrument of the universe
(and the benchmark) gets `asset_NNNN`, NNNN drawn without replacement from 0001..9999 by a
generator seeded with both, so the map is stable for an account across cycles and restarts and
shuffled between accounts. Every way the instrument is written maps to its alias: the symbol, the
code without its exchange suffix (`600519` of `600519.SH`), a pair's base (`BTC` of `BTC/USDT`)
and the company name of the universe file, also without a bracketed part and the bracket's
content ("Strategy (MicroStrategy)": both). Longest spellings match first, case-sensitive and as
whole tokens. Dates become `day_+N`, days counted from a per-account epoch (the universe
file's date by default, moved back by a seeded 100..999 days, so N says nothing about the calendar
or the account's age). Datetimes become `day_+NTHH:MM` (`:SS` and `.ffffff` only when not zero)
in the market's local time, so daylight-saving shifts cannot reveal the season; their day is the
local day. Forms rewritten: ISO datetimes (`T` or space, optional seconds, fraction, `Z` or an
offset; naive ones read as UTC), `YYYY-MM-DD`, `YYYY/MM/DD`, `YYYYMMDD` (only a valid date
between 1900 and 2099 standing alone) and "October 1, 2025" / "1 Oct 2025" forms.

`mask_text` rewrites prompts, `mask_result` tool results (JSON text, `\\uXXXX` escapes decoded
first) and `unmask_arguments` turns aliases and day labels in a model's arguments back into
symbols and ISO dates before they reach the data layer. A real ticker or name written by a model
under stock-blindness is not served: a whole argument that is one becomes `unknown_asset`, so it
cannot probe its memory through the tools. News and fundamentals leak names and dates, so under
any blinding their calls are neutralised and answered with a `masked` `ToolError`.
"""

from __future__ import annotations

import enum
import hashlib
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Final, TypeVar
from zoneinfo import ZoneInfo

from openbell.agents.llm.hooks import IdentityMasker, Masker
from openbell.agents.protocol import DecisionContext
from openbell.agents.tools import ErrorCode, ToolError
from openbell.markets.rules import MarketRules
from openbell.markets.universes import Universe

#: The tools whose results cannot be masked (free text full of names and dates).
BLINDED_TOOLS: Final = frozenset({"get_news", "get_fundamentals"})
#: What a real identifier in a model's argument becomes under stock-blindness.
UNRESOLVED: Final = "unknown_asset"

_MONTHS: Final = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH: Final = (
    r"(Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_DATETIME_RE: Final = re.compile(
    r"(?<![\w])(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?"
    r"(Z|[+-]\d{2}:?\d{2})?(?![\w:])"
)
_DATE_RE: Final = re.compile(r"(?<![\w/-])(\d{4})([-/])(\d{2})\2(\d{2})(?![\w/-])")
_COMPACT_RE: Final = re.compile(
    r"(?<![\w.])((?:19|20)\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?![\w])(?!\.\d)"
)
_MONTH_FIRST_RE: Final = re.compile(rf"\b{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})\b")
_DAY_FIRST_RE: Final = re.compile(rf"\b(\d{{1,2}}) {_MONTH},? (\d{{4}})\b")
_LABEL_RE: Final = re.compile(
    r"\bday_([+-]\d{1,6})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?(?![\w:])"
)
_ALIAS_RE: Final = re.compile(r"\basset_\d{4}\b")
_UNICODE_ESCAPE_RE: Final = re.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9a-fA-F]{4})")
D = TypeVar("D", date, datetime)


class MaskingLevel(enum.StrEnum):
    """What is hidden from the model: nothing, the stocks, the dates, or both."""

    BRIGHT = "bright"
    STOCK_BLIND = "stock-blind"
    DATE_BLIND = "date-blind"
    BLINDED = "blinded"

    @property
    def masks_stocks(self) -> bool:
        """Whether tickers and company names are aliased."""
        return self in (MaskingLevel.STOCK_BLIND, MaskingLevel.BLINDED)

    @property
    def masks_dates(self) -> bool:
        """Whether dates and datetimes are relabelled."""
        return self in (MaskingLevel.DATE_BLIND, MaskingLevel.BLINDED)


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


@dataclass(frozen=True, slots=True)
class AliasMap:
    """One account's aliases: symbol -> `asset_NNNN`, spelling -> alias, and its day epoch."""

    aliases: Mapping[str, str]
    spellings: Mapping[str, str]
    epoch: date
    timezone: ZoneInfo

    @classmethod
    def build(
        cls,
        universe: Universe,
        *,
        account_id: int,
        seed: str | int,
        timezone: str,
        epoch: date | None = None,
    ) -> AliasMap:
        """The map of `account_id` over `universe` (with its benchmark), seeded by `seed`."""
        named = {instrument.symbol: instrument.name for instrument in universe.instruments}
        if universe.benchmark is not None:
            named.setdefault(universe.benchmark, "")
        rng = _rng(seed, account_id)
        symbols = sorted(named)
        numbers = rng.sample(range(1, 10000), len(symbols))
        aliases = {symbol: f"asset_{n:04d}" for symbol, n in zip(symbols, numbers, strict=True)}
        spellings: dict[str, str] = {}
        for symbol in symbols:  # symbols first: a name never shadows another's ticker
            spellings[symbol] = aliases[symbol]
        for symbol in symbols:
            for spelling in _spellings(symbol, named[symbol]):
                spellings.setdefault(spelling, aliases[symbol])
        shift = timedelta(days=rng.randrange(100, 1000))
        return cls(
            aliases=aliases,
            spellings=spellings,
            epoch=(epoch or universe.as_of) - shift,
            timezone=ZoneInfo(timezone),
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


class AliasMasker:
    """The `Masker` of one account at one level; see the module docstring."""

    def __init__(self, level: MaskingLevel, aliases: AliasMap) -> None:
        self.level = level
        self.aliases = aliases
        self._symbols = {alias: symbol for symbol, alias in aliases.aliases.items()}
        ordered = sorted(aliases.spellings, key=lambda spelling: (-len(spelling), spelling))
        self._identifier_re = re.compile(
            r"(?<![A-Za-z0-9_])(?<!\d\.)(?:"
            + "|".join(re.escape(spelling) for spelling in ordered)
            + r")(?![A-Za-z0-9_])(?!\.\d)"
        )

    # -- the Masker protocol ------------------------------------------------------------------

    def mask_text(self, text: str) -> str:
        """`text` with dates and identifiers rewritten as the level asks."""
        if self.level.masks_dates:
            text = self._mask_dates(text)
        if self.level.masks_stocks:
            spellings = self.aliases.spellings
            text = self._identifier_re.sub(lambda m: spellings[m.group(0)], text)
        return text

    def unmask_arguments(self, tool: str, args: dict[str, object]) -> dict[str, object]:
        """`args` with aliases and day labels turned back; a blinded tool's call neutralised."""
        if self.level is not MaskingLevel.BRIGHT and tool in BLINDED_TOOLS:
            # refused by the tool's argument model before any data is read; see mask_result
            return {"masked_by_level": self.level.value}
        return {key: self._unmask(value) for key, value in args.items()}

    def mask_result(self, tool: str, result_json: str) -> str:
        """`result_json` masked; a blinded tool's result replaced by a `masked` error."""
        if self.level is not MaskingLevel.BRIGHT and tool in BLINDED_TOOLS:
            return masked_error(tool, self.level).model_dump_json()
        return self.mask_text(_decode_escapes(result_json))

    # -- internals ----------------------------------------------------------------------------

    def _unmask(self, value: object) -> object:
        if isinstance(value, str):
            return self._unmask_string(value)
        if isinstance(value, list):
            return [self._unmask(item) for item in value]
        if isinstance(value, dict):
            return {key: self._unmask(item) for key, item in value.items()}
        return value

    def _unmask_string(self, value: str) -> str:
        if self.level.masks_stocks:
            whole = value.strip()
            if whole in self._symbols:
                return self._symbols[whole]
            if whole in self.aliases.spellings:
                return UNRESOLVED
            value = _ALIAS_RE.sub(lambda m: self._symbols.get(m.group(0), m.group(0)), value)
        if self.level.masks_dates:
            value = _LABEL_RE.sub(self.aliases.resolve_label, value)
        return value

    def _mask_dates(self, text: str) -> str:
        day, moment = self.aliases.day_label, self.aliases.datetime_label
        text = _DATETIME_RE.sub(lambda m: _or_same(m, _datetime_of(m), moment), text)
        text = _DATE_RE.sub(lambda m: _or_same(m, _date_of(m, 1, 3, 4), day), text)
        text = _COMPACT_RE.sub(lambda m: _or_same(m, _date_of(m, 1, 2, 3), day), text)
        text = _MONTH_FIRST_RE.sub(lambda m: _or_same(m, _named_date(m, 3, 1, 2), day), text)
        return _DAY_FIRST_RE.sub(lambda m: _or_same(m, _named_date(m, 3, 2, 1), day), text)


def masked_error(tool: str, level: MaskingLevel) -> ToolError:
    """The answer to a blinded tool's call under `level` (no `as_of`: it would be a date)."""
    return ToolError(
        code=ErrorCode.MASKED,
        message=f"{tool} is unavailable in this run: the market data is masked ({level.value}), "
        "and news and company figures would reveal what is hidden.",
        hint="Decide from prices, quotes and your portfolio.",
    )


def build_masker(
    level: MaskingLevel | str,
    *,
    universe: Universe,
    rules: MarketRules,
    account_id: int,
    seed: str | int = 0,
    epoch: date | None = None,
) -> Masker:
    """The masker of `account_id` at `level` (`IdentityMasker` when bright)."""
    level = MaskingLevel(level)
    if level is MaskingLevel.BRIGHT:
        return IdentityMasker()
    aliases = AliasMap.build(
        universe, account_id=account_id, seed=seed, timezone=rules.timezone, epoch=epoch
    )
    return AliasMasker(level, aliases)


def masker_for(
    level: MaskingLevel | str, *, seed: str | int = 0, epoch: date | None = None
) -> Callable[[DecisionContext], Masker]:
    """A per-cycle masker factory for an LLM agent: each cycle's masker is its account's map."""
    chosen = MaskingLevel(level)

    def factory(ctx: DecisionContext) -> Masker:
        return build_masker(
            chosen,
            universe=ctx.whole_universe,
            rules=ctx.rules,
            account_id=ctx.account_id,
            seed=seed,
            epoch=epoch,
        )

    return factory


def _or_same(match: re.Match[str], found: D | None, label: Callable[[D], str]) -> str:
    """`found` labelled, or the match unchanged when it was no valid date."""
    return match.group(0) if found is None else label(found)


def _date_of(match: re.Match[str], year: int, month: int, day: int) -> date | None:
    try:
        return date(int(match.group(year)), int(match.group(month)), int(match.group(day)))
    except ValueError:
        return None


def _named_date(match: re.Match[str], year: int, month: int, day: int) -> date | None:
    try:
        month_number = _MONTHS[match.group(month)[:3].lower()]
        return date(int(match.group(year)), month_number, int(match.group(day)))
    except (KeyError, ValueError):
        return None


def _datetime_of(match: re.Match[str]) -> datetime | None:
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        stamp = datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second or 0),
            int((fraction or "0").ljust(6, "0")),
            tzinfo=UTC,
        )
    except ValueError:
        return None
    if zone is None or zone == "Z":  # a naive stamp is read as UTC
        return stamp
    sign = 1 if zone[0] == "+" else -1
    digits = zone[1:].replace(":", "")
    return stamp - sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))


def _decode_escapes(text: str) -> str:
    """JSON `\\uXXXX` escapes of printable characters decoded, so names written as escapes are
    found (quotes, backslashes and control characters stay escaped)."""

    def decode(match: re.Match[str]) -> str:
        char = chr(int(match.group(2), 16))
        if char in '"\\' or not char.isprintable() or 0xD800 <= ord(char) <= 0xDFFF:
            return match.group(0)
        return match.group(1) + char

    return _UNICODE_ESCAPE_RE.sub(decode, text)
