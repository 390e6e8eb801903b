"""Masking (KTD-Fin): what a model may learn of tickers, company names, dates and price levels.

This module owns the four masking levels (`bright`, `stock-blind`, `date-blind`, `blinded`) and
`AliasMasker`, which implements the LLM agent's `Masker` seam, with the factories that build an
account's masker from its masking key (`aliases.py`), made at its first masked cycle and stored
through `ctx.masking_keys` (the ledger), so its aliases and day labels never move: not when the
daemon restarts (even configured with another seed), nor when the universe file gains a member (its
alias is added) or a later date. Every list of stocks a masked model is shown is in its account's
alias order (`listing`), never the universe file's (alphabetical) order, which would tell it that
the first is AAPL; and a masked model is never told the universe's name.

Every spelling of an instrument (`aliases.py`) is rewritten to its alias, longest first,
case-sensitive and as whole tokens. Dates become `day_+N`, days counted from the key's epoch.
Datetimes become `day_+NTHH:MM` (`:SS` and `.ffffff` only when not zero) in the market's local
time, so daylight-saving shifts cannot reveal the season; their day is the local day. Forms
rewritten: ISO datetimes (`T` or space, optional seconds, fraction, `Z` or an offset; naive ones
read as UTC), `YYYY-MM-DD`, `YYYY/MM/DD`, `YYYYMMDD` (only a valid date between 1900 and 2099
standing alone) and "October 1, 2025" / "1 Oct 2025" forms.

`mask_text` rewrites prompts; `mask_result` tool results (JSON text, `\\uXXXX` escapes decoded
first; a result holding bars, money or positions is read into its model first, its bars' volumes
shown relative to the series (`relative_volume.py`), its positions listed in alias order and,
under price rebasing, its money shown in the account's unit: `rebasing.py`; one that cannot be
read is withheld); `unmask_arguments` turns aliases and day labels in a model's
arguments back into symbols and ISO dates before they reach the data layer. A real ticker or name
written by a model under stock-blindness is not served: a whole argument that is one becomes
`unknown_asset`, so it cannot probe its memory through the tools; an argument that names an asset
(`symbol`, `symbols`) takes aliases only, anything else in it becoming `unknown_asset` too, so a
future member's ticker and a never-member's get the same answer. News and fundamentals leak names
and dates, so under any blinding their calls are neutralised and answered with a `masked`
`ToolError`. Price rebasing is on by default at `blinded` and may be asked for at the other
blinded levels (`rebases`).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Final, TypeVar

from pydantic import ValidationError

from openbell.agents.aliases import ALIAS_RE, LABEL_RE, AliasMap, derive_key
from openbell.agents.ktd.contract import KTD_RESULTS
from openbell.agents.llm.hooks import IdentityMasker, Masker
from openbell.agents.protocol import DecisionContext
from openbell.agents.rebasing import MoneyUnit, rebase
from openbell.agents.relative_volume import relative_volumes
from openbell.agents.tools import (
    BarsOut,
    ErrorCode,
    OrderOut,
    PortfolioOut,
    QuotesOut,
    ToolError,
    ToolResult,
)
from openbell.markets.rules import MarketRules
from openbell.markets.universes import Universe
from openbell.store.masking_keys import MaskingKey

#: The tools whose results cannot be masked (free text full of names and dates).
BLINDED_TOOLS: Final = frozenset({"get_news", "get_fundamentals"})
#: What a real identifier in a model's argument becomes under stock-blindness.
UNRESOLVED: Final = "unknown_asset"
#: The arguments that name an asset: under stock-blindness they take the account's aliases only
#: (KTD-Fin's tools name theirs `stock_id` and `stock_ids`).
SYMBOL_ARGUMENTS: Final = frozenset({"symbol", "symbols", "stock_id", "stock_ids"})
#: The results read into their models before they are shown: they hold money or positions.
SHOWN_RESULTS: Final[Mapping[str, type[ToolResult]]] = {
    "get_bars": BarsOut,
    "get_quote": QuotesOut,
    "get_portfolio": PortfolioOut,
    "place_order": OrderOut,
    **KTD_RESULTS,
}

#: The results read into their models at every masked level: bars (relative volumes) and the
#: portfolio (positions in alias order).
_SHOWN_ANYWAY: Final[frozenset[type[ToolResult]]] = frozenset({BarsOut, PortfolioOut})

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
_UNICODE_ESCAPE_RE: Final = re.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9a-fA-F]{4})")
D = TypeVar("D", date, datetime)
R = TypeVar("R", bound=ToolResult)


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


class AliasMasker:
    """The `Masker` of one account at one level, rebasing its money when `unit` is given; see the
    module docstring."""

    def __init__(
        self, level: MaskingLevel, aliases: AliasMap, unit: MoneyUnit | None = None
    ) -> None:
        if level is MaskingLevel.BRIGHT:
            raise ValueError("a bright agent has no alias masker (it is the identity)")
        self.level = level
        self.aliases = aliases
        self.unit = unit
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
        if tool in BLINDED_TOOLS:
            # refused by the tool's argument model before any data is read; see mask_result
            return {"masked_by_level": self.level.value}
        return {key: self._unmask(value, key in SYMBOL_ARGUMENTS) for key, value in args.items()}

    def mask_result(self, tool: str, result_json: str) -> str:
        """`result_json` masked; a blinded tool's result replaced by a `masked` error."""
        if tool in BLINDED_TOOLS:
            return masked_error(tool, self.level).model_dump_json()
        model = SHOWN_RESULTS.get(tool)
        if model is not None and (self.unit is not None or model in _SHOWN_ANYWAY):
            result_json = self._shown_json(model, result_json)
        return self.mask_text(_decode_escapes(result_json))

    # -- what the prompts show ----------------------------------------------------------------

    def listing(self, symbols: Iterable[str]) -> list[str]:
        """`symbols` in the order a model is shown them: by alias when stocks are masked."""
        if not self.level.masks_stocks:
            return list(symbols)
        aliases = self.aliases.aliases
        return sorted(
            symbols, key=lambda symbol: (symbol not in aliases, aliases.get(symbol, symbol))
        )

    def money(self, amount: Decimal) -> Decimal:
        """`amount` as the model is shown it (in the account's unit under rebasing)."""
        return amount if self.unit is None else self.unit.show(amount)

    def show(self, result: R) -> R:
        """`result` as the model is shown it (before `mask_text`): bars with relative volumes
        (`relative_volume.py`), its money in the account's unit under rebasing, and a portfolio's
        positions in alias order."""
        shown = result if self.unit is None else rebase(result, self.unit)
        if isinstance(shown, BarsOut):
            shown = shown.model_copy(update={"bars": relative_volumes(shown.bars)})
        if isinstance(shown, PortfolioOut) and self.level.masks_stocks:
            order = {
                symbol: i
                for i, symbol in enumerate(self.listing(p.symbol for p in shown.positions))
            }
            positions = sorted(shown.positions, key=lambda p: order[p.symbol])
            shown = shown.model_copy(update={"positions": positions})
        if not isinstance(shown, type(result)):
            raise TypeError(f"showing a {type(result).__name__} gave a {type(shown).__name__}")
        return shown

    # -- internals ----------------------------------------------------------------------------

    def _shown_json(self, model: type[ToolResult], text: str) -> str:
        """The JSON of a result that may hold money or volumes, as `show` shows it; an error
        unchanged; a result that cannot be read withheld when its money must be rebased or its
        volumes made relative."""
        try:
            data = json.loads(text)
            if isinstance(data, dict) and "code" in data:
                return text  # a ToolError: it holds no money
            result = model.model_validate(data)
        except (ValueError, ValidationError):
            if self.unit is None and model is PortfolioOut:
                return text
            return ToolError(
                code=ErrorCode.MASKED,
                message="This result could not be shown in your account's masked terms, so it "
                "is withheld.",
                hint="Try the call again, or another tool.",
            ).model_dump_json()
        return self.show(result).model_dump_json()

    def _unmask(self, value: object, names_asset: bool = False) -> object:
        if isinstance(value, str):
            if names_asset and self.level.masks_stocks:
                # Anything but an alias is answered alike, a future member's real ticker and a
                # never-member's: how the answer differs would tell the model what is a member.
                return self._symbols.get(value.strip(), UNRESOLVED)
            return self._unmask_string(value)
        if isinstance(value, list):
            return [self._unmask(item, names_asset) for item in value]
        if isinstance(value, dict):
            return {key: self._unmask(item, key in SYMBOL_ARGUMENTS) for key, item in value.items()}
        return value

    def _unmask_string(self, value: str) -> str:
        if self.level.masks_stocks:
            whole = value.strip()
            if whole in self._symbols:
                return self._symbols[whole]
            if whole in self.aliases.spellings:
                return UNRESOLVED
            value = ALIAS_RE.sub(lambda m: self._symbols.get(m.group(0), m.group(0)), value)
        if self.level.masks_dates:
            value = LABEL_RE.sub(self.aliases.resolve_label, value)
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


def rebases(level: MaskingLevel | str, rebase_prices: bool | None = None) -> bool:
    """Whether `level` rebases prices: `rebase_prices`, by default only at `blinded`; refused
    (`ValueError`) when asked for at `bright`, which shows everything real."""
    level = MaskingLevel(level)
    if rebase_prices and level is MaskingLevel.BRIGHT:
        raise ValueError("price rebasing needs a masking level other than bright")
    return level is MaskingLevel.BLINDED if rebase_prices is None else rebase_prices


def build_masker(
    level: MaskingLevel | str,
    *,
    universe: Universe,
    rules: MarketRules,
    account_id: int,
    seed: str | int = 0,
    epoch: date | None = None,
    rebase: bool | None = None,
    key: MaskingKey | None = None,
) -> Masker:
    """The masker of `account_id` at `level` (`IdentityMasker` when bright), from its stored `key`
    (extended by any new member) or, without one, from a key seeded by `seed`."""
    level = MaskingLevel(level)
    rebased = rebases(level, rebase)
    if level is MaskingLevel.BRIGHT:
        return IdentityMasker()
    made = derive_key(universe, account_id=account_id, seed=seed, epoch=epoch, stored=key)
    return AliasMasker(
        level,
        AliasMap.of(made, universe, timezone=rules.timezone),
        MoneyUnit(made.money_unit) if rebased else None,
    )


def account_masker(
    level: MaskingLevel | str,
    ctx: DecisionContext,
    *,
    seed: str | int = 0,
    epoch: date | None = None,
    rebase: bool | None = None,
) -> AliasMasker | None:
    """The masker of `ctx`'s account at `level` (None when bright), from the key stored in
    `ctx.masking_keys`, made and stored at the account's first masked cycle (and extended when its
    universe gains a member); without a key store, from a key seeded by `seed`."""
    level = MaskingLevel(level)
    rebases(level, rebase)
    if level is MaskingLevel.BRIGHT:
        return None
    keys = ctx.masking_keys
    stored = keys.masking_key(ctx.account_id) if keys is not None else None
    key = derive_key(
        ctx.whole_universe, account_id=ctx.account_id, seed=seed, epoch=epoch, stored=stored
    )
    if keys is not None and key != stored:
        key = keys.save_masking_key(key)  # a concurrent writer's key may have won
    built = build_masker(
        level,
        universe=ctx.whole_universe,
        rules=ctx.rules,
        account_id=ctx.account_id,
        seed=seed,
        epoch=epoch,
        rebase=rebase,
        key=key,
    )
    if not isinstance(built, AliasMasker):
        raise TypeError(f"a {level.value} masker must alias")
    return built


def masker_for(
    level: MaskingLevel | str,
    *,
    seed: str | int = 0,
    epoch: date | None = None,
    rebase: bool | None = None,
) -> Callable[[DecisionContext], Masker]:
    """A per-cycle masker factory for an LLM agent: each cycle's masker is its account's."""
    chosen = MaskingLevel(level)
    rebases(chosen, rebase)

    def factory(ctx: DecisionContext) -> Masker:
        found = account_masker(chosen, ctx, seed=seed, epoch=epoch, rebase=rebase)
        return IdentityMasker() if found is None else found

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
