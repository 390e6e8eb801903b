"""The de-anonymisation probe: two fake models behind the real chat client, at the HTTP boundary.

One cheats: it finds the series it is shown in the bundled bars by its prices (and reads whatever
the level leaves real). The probe must catch it where prices are real and find it at chance where
they are rebased. The other guesses, and must score chance everywhere. Both answer with
real-shaped chat-completions JSON through `httpx.MockTransport`; nothing reaches the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import math
import random
import re
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.masking import MaskingLevel
from openbell.markets.calendars import calendar_for
from openbell.markets.domain import Bar, NewsItem
from openbell.markets.gateway import PointInTimeGateway
from openbell.markets.price_limits import limit_band
from openbell.markets.replay_source import ReplaySource
from openbell.markets.rules import board_of, rules_for
from openbell.markets.universes import load_universe
from openbell.ops.evaluation.probes.deanon import (
    ProbeReport,
    ProbeSetup,
    candidate_symbols,
    draw_trials,
    probe_record,
    run_probe,
    run_probes,
    shown_series,
)
from openbell.ops.evaluation.probes.deanon_scoring import (
    ALPHA,
    names_symbol,
    read_answer,
    tail_probability,
    wilson,
)
from openbell_testkit.llm import ScriptedModel, completion

UNIVERSES = {"us": "nasdaq100", "cn": "sse50"}
INTERVALS = {"us": "1h", "cn": "1d"}
OHLC = ("open", "high", "low", "close")
Body = dict[str, Any]


@functools.cache
def source(market: str) -> ReplaySource:
    return ReplaySource.from_bundled(market)


def setup_of(market: str = "us", **overrides: Any) -> ProbeSetup:
    fields: dict[str, Any] = {
        "market": market,
        "universe": load_universe(UNIVERSES[market]),
        "rules": rules_for(market),
        "source": source(market),
        "interval": INTERVALS[market],
        "lookback": 5,
        "trials": 30,
        "seed": 7,
    } | overrides
    return ProbeSetup(**fields)


def shown_of(body: Body) -> dict[str, Any]:
    """The series the probe showed, parsed from its question."""
    text = body["messages"][-1]["content"]
    found, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
    assert isinstance(found, dict)
    return found


def all_bars(setup: ProbeSetup) -> dict[str, tuple[Bar, ...]]:
    """Every bar of the probe's candidates in its interval."""
    return setup.source.bars_between(
        candidate_symbols(setup),
        setup.interval,
        datetime(1900, 1, 1, tzinfo=UTC),
        datetime(2200, 1, 1, tzinfo=UTC),
    )


def data_days(setup: ProbeSetup) -> list[date]:
    zone = ZoneInfo(setup.rules.timezone)
    bars = all_bars(setup)
    return sorted({bar.start_at.astimezone(zone).date() for s in bars.values() for bar in s})


def answer(symbol: str, day: date) -> Body:
    return completion(json.dumps({"symbol": symbol, "date": day.isoformat()}))


def question_rng(seed: int, body: Body) -> random.Random:
    """A generator seeded by `seed` and the question asked: the probe asks its questions
    concurrently, so a generator shared by all of them would draw in whatever order the answers
    are requested, and a fake's guesses would differ from run to run."""
    return random.Random(f"{seed}:{body['messages'][-1]['content']}")


def guesser(setup: ProbeSetup, seed: int = 11) -> Callable[[Body], Body]:
    """A model that names a member and a date of the data at random, whatever it is shown (the
    same guess for the same question, in any order)."""
    symbols, days = list(candidate_symbols(setup)), data_days(setup)

    def reply(body: Body) -> Body:
        rng = question_rng(seed, body)
        return answer(rng.choice(symbols), rng.choice(days))

    return reply


def cheater(setup: ProbeSetup, seed: int = 13) -> Callable[[Body], Body]:
    """A model that has memorised the bundled bars: it looks the last bar it is shown up by its
    open, high, low and close, and otherwise reads what is real on the screen (a ticker, an ISO
    date) or guesses."""
    zone = ZoneInfo(setup.rules.timezone)
    index: dict[tuple[Decimal, ...], tuple[str, date]] = {}
    for symbol, bars in all_bars(setup).items():
        for bar in bars:
            key = tuple(getattr(bar, name) for name in OHLC)
            index.setdefault(key, (symbol, bar.start_at.astimezone(zone).date()))
    symbols, days = list(candidate_symbols(setup)), data_days(setup)

    def reply(body: Body) -> Body:
        rng = question_rng(seed, body)
        shown = shown_of(body)
        last = shown["bars"][-1]
        found = index.get(tuple(Decimal(last[name]) for name in OHLC))
        if found is not None:
            return answer(*found)
        symbol = shown["symbol"]
        if symbol.startswith("asset_"):
            symbol = rng.choice(symbols)
        stamp = last["start_at"]
        if re.match(r"\d{4}-\d{2}-\d{2}", stamp):
            day = datetime.fromisoformat(stamp).astimezone(zone).date()
        else:
            day = rng.choice(days)
        return answer(symbol, day)

    return reply


def probe(
    setup: ProbeSetup, model: Callable[[Body], Body], levels: Sequence[MaskingLevel]
) -> tuple[ProbeReport, ScriptedModel]:
    """The probe of `setup` run against `model` behind the real chat client."""
    scripted = ScriptedModel([model] * (setup.trials * len(levels)))

    async def scenario() -> ProbeReport:
        async with scripted.client() as http:
            config = ClientConfig(base_url="https://llm.test/v1", model="probe-1")
            async with ChatClient(config, http=http).connect() as chat:

                async def ask(messages: list[dict[str, Any]]) -> str:
                    return (await chat.complete(messages)).completion.content

                return await run_probe(setup, levels, ask)

    return asyncio.run(scenario()), scripted


def by_level(report: ProbeReport) -> dict[str, Any]:
    return {result.level.value: result for result in report.levels}


def test_a_model_that_matches_prices_is_caught_where_prices_are_real() -> None:
    setup = setup_of()
    report, scripted = probe(setup, cheater(setup), list(MaskingLevel))
    levels = by_level(report)
    assert len(scripted.requests) == 4 * setup.trials
    assert report.symbols == 101
    for name in ("bright", "stock-blind", "date-blind"):
        result = levels[name]
        assert not result.rebased
        # The prices give every series away: the stock and the date, shown or not.
        assert (result.symbol.hits, result.date.hits) == (setup.trials, setup.trials), name
        assert result.symbol.above_chance
        assert result.date.above_chance
        assert result.symbol.p_value < 1e-20
        assert result.symbol.lift > 50
    assert levels["stock-blind"].symbol.shown is False
    assert levels["date-blind"].date.shown is False
    blinded = levels["blinded"]
    assert blinded.rebased  # rebasing is on by default at blinded only
    assert not blinded.symbol.above_chance
    assert not blinded.date.above_chance
    assert blinded.symbol.hits <= 2


@pytest.mark.parametrize("market", ["us", "cn"])
def test_with_rebasing_on_the_cheat_falls_to_chance_where_the_level_hides(
    market: str,
) -> None:
    setup = setup_of(market, rebase=True)
    masked = [MaskingLevel.STOCK_BLIND, MaskingLevel.DATE_BLIND, MaskingLevel.BLINDED]
    report, _ = probe(setup, cheater(setup), masked)
    levels = by_level(report)
    assert all(result.rebased for result in report.levels)
    # What the level hides is at chance; what it shows is read off the screen.
    assert not levels["stock-blind"].symbol.above_chance
    assert levels["stock-blind"].date.shown
    assert levels["stock-blind"].date.rate == 1
    assert not levels["date-blind"].date.above_chance
    assert levels["date-blind"].symbol.shown
    assert levels["date-blind"].symbol.rate == 1
    assert not levels["blinded"].symbol.above_chance
    assert not levels["blinded"].date.above_chance


@pytest.mark.parametrize("rebase", [None, True])
def test_a_model_that_looks_volumes_up_finds_no_masked_series(rebase: bool | None) -> None:
    # A model that remembers every bar's volume finds a bright series by its last volume, stock
    # and date; a masked series shows its volumes relative to itself, so the lookup finds nothing
    # at any masked level, with or without price rebasing.
    setup = setup_of(rebase=rebase)
    zone = ZoneInfo(setup.rules.timezone)
    volumes: dict[Decimal, tuple[str, date]] = {}
    for symbol, bars in all_bars(setup).items():
        for bar in bars:
            volumes.setdefault(bar.volume, (symbol, bar.start_at.astimezone(zone).date()))

    def by_volume(body: Body) -> Body:
        found = volumes.get(Decimal(shown_of(body)["bars"][-1]["volume"]))
        return answer(*found) if found is not None else completion("no idea")

    report, _ = probe(setup, by_volume, list(MaskingLevel))
    levels = by_level(report)
    assert levels["bright"].symbol.hits >= setup.trials - 2  # a volume may repeat across bars
    assert levels["bright"].date.above_chance
    for level in ("stock-blind", "date-blind", "blinded"):
        assert levels[level].symbol.hits == levels[level].date.hits == 0, level
        assert levels[level].unanswered == setup.trials, level


def test_a_model_that_guesses_scores_chance_at_every_level() -> None:
    setup = setup_of(trials=60)
    report, _ = probe(setup, guesser(setup), list(MaskingLevel))
    for result in report.levels:
        assert not result.symbol.above_chance, result.level
        assert not result.date.above_chance, result.level
        assert result.errors == result.unanswered == 0
    # The date's chance: the share of the data's 29 dates within 7 trading days of the true one
    # (8 at the data's ends, 15 in its middle).
    assert 8 / 29 <= report.levels[0].date.chance <= 15 / 29


@pytest.mark.parametrize("fake", [guesser, cheater])
def test_the_fakes_answer_alike_in_any_order(fake: Callable[[ProbeSetup], Any]) -> None:
    # The docs' probe tables come from these fakes, whose questions arrive concurrently: the
    # same question gets the same answer, whatever was asked before it.
    setup = setup_of(rebase=True, trials=10)
    _, scripted = probe(setup, fake(setup), [MaskingLevel.BLINDED])
    questions = scripted.requests
    asked_first = [fake(setup)(body) for body in questions]  # each the first question asked
    model = fake(setup)
    assert [model(body) for body in reversed(questions)][::-1] == asked_first


def test_the_blinded_series_shows_no_real_ticker_date_or_price() -> None:
    setup = setup_of(rebase=True)
    trials, _, _ = draw_trials(setup)
    gateway = PointInTimeGateway(setup.source)
    for trial in trials[:5]:
        real = asyncio.run(shown_series(setup, gateway, trial, MaskingLevel.BRIGHT))
        blinded = asyncio.run(shown_series(setup, gateway, trial, MaskingLevel.BLINDED))
        bars = json.loads(real)["bars"]
        assert len(bars) == setup.lookback
        assert bars[-1]["end_at"] == trial.as_of.isoformat().replace("+00:00", "Z")
        assert trial.symbol in real
        assert not re.search(rf"\b{trial.symbol}\b", blinded)
        assert trial.day.isoformat() in real
        assert not re.search(r"\d{4}-\d{2}-\d{2}", blinded)
        closes = {bar["close"] for bar in bars}
        assert closes.isdisjoint(bar["close"] for bar in json.loads(blinded)["bars"])


def test_trials_are_drawn_from_the_seed() -> None:
    first, symbols, days = draw_trials(setup_of(seed=1))
    assert draw_trials(setup_of(seed=1))[0] == first
    assert draw_trials(setup_of(seed=2))[0] != first
    assert (symbols, days) == (101, 29)
    for trial in first:
        assert 8 / 29 <= trial.chance_date <= 15 / 29


def test_tail_probability_is_the_binomial_tail_for_equal_chances() -> None:
    n, p = 30, 0.05
    for hits in (0, 1, 3, 10, 30):
        expected = sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(hits, n + 1))
        assert tail_probability([p] * n, hits) == pytest.approx(expected, rel=1e-12)
    # unequal chances, by hand: P(both) = 0.5 * 0.2; P(at least one) = 1 - 0.5 * 0.8
    assert tail_probability([0.5, 0.2], 2) == pytest.approx(0.1)
    assert tail_probability([0.5, 0.2], 1) == pytest.approx(0.6)
    assert tail_probability([0.5], 2) == 0.0


@pytest.mark.parametrize(
    ("reply", "symbol", "day"),
    [
        ('{"symbol": "AAPL", "date": "2025-10-14"}', "AAPL", date(2025, 10, 14)),
        (
            'I think:\n```json\n{"symbol":"MSFT","date":"2025/10/02"}\n```',
            "MSFT",
            date(2025, 10, 2),
        ),
        ('{"symbol": "NVDA", "date": "2025-10-14T15:00"}', "NVDA", date(2025, 10, 14)),
        ('{"symbol": "NVDA", "date": "sometime in 2025"}', "NVDA", None),
        ('{"date": "2025-02-30"}', None, None),
        ("No idea.", None, None),
    ],
)
def test_answers_are_read_from_the_json_in_the_reply(
    reply: str, symbol: str | None, day: date | None
) -> None:
    found = read_answer(reply)
    assert (found.tickers, found.day) == ((symbol,) if symbol else (), day)


@pytest.mark.parametrize(
    ("said", "symbol", "names"),
    [
        ("aapl", "AAPL", True),
        ("600519", "600519.SH", True),
        ("600519.SH", "600519.SH", True),
        ("BTC-USDT", "BTC/USDT", True),
        ("btc", "BTC/USDT", True),
        ("ETH", "BTC/USDT", False),
        ("asset_0042", "AAPL", False),
    ],
)
def test_a_symbol_is_named_by_its_ticker_code_or_base(said: str, symbol: str, names: bool) -> None:
    assert names_symbol(said, symbol) is names


def test_the_record_holds_every_level_with_its_verdicts() -> None:
    setup = setup_of(trials=10)
    report, _ = probe(setup, cheater(setup), [MaskingLevel.BRIGHT])
    record = probe_record([report], agent="a")
    assert record["alpha"] == ALPHA
    assert record["agent"] == "a"
    ((attacker, (bright,)),) = [(a["attacker"], a["levels"]) for a in record["attackers"]]
    assert attacker == "model"
    assert bright["level"] == "bright"
    assert bright["ticker_top1"]["hits"] == 10
    assert bright["ticker_top1"]["above_chance"] is True
    assert bright["ticker_top1"]["shown"] is True
    assert bright["joint"]["hits"] == 10
    low, high = bright["ticker_top1"]["wilson_95"]
    assert (low, high) == pytest.approx((0.7225, 1.0), abs=1e-4)  # Wilson for 10 of 10
    assert bright["skipped"] == {"sector": "no sector map given (--sectors)", "board":
                                 "only A-shares have listing boards"}  # fmt: skip
    json.dumps(record)  # JSON-ready


CN_BOARD_NAMES = {"main": "主板", "star": "科创板", "chinext": "创业板", "beijing": "北交所"}


def cn_sectors(setup: ProbeSetup) -> dict[str, str]:
    """Gold sectors for the SSE-50 candidates: made up, by code, three of them."""
    names = ("Banks", "Technology", "Consumer Staples")
    return {s: names[int(s[:6]) % 3] for s in candidate_symbols(setup)}


def sessions_of(setup: ProbeSetup) -> tuple[date, ...]:
    return calendar_for(setup.rules.calendar_id).sessions_between(
        date(2024, 1, 2), date(2026, 6, 1)
    )


def third_place(setup: ProbeSetup, shift: int) -> Callable[[Body], Body]:
    """A model that reads a bright series: it names two wrong tickers and then the shown one, a
    date `shift` sessions after the last bar's, the gold sector and the board in Chinese."""
    zone = ZoneInfo(setup.rules.timezone)
    sessions = sessions_of(setup)

    def reply(body: Body) -> Body:
        shown = shown_of(body)
        symbol = shown["symbol"]
        day = datetime.fromisoformat(shown["bars"][-1]["start_at"]).astimezone(zone).date()
        later = sessions[sessions.index(day) + shift]
        return completion(
            json.dumps(
                {
                    "tickers": ["000001.SZ", "000002.SZ", symbol],
                    "date": later.isoformat(),
                    "sector": setup.sectors[symbol].upper(),
                    "board": CN_BOARD_NAMES[board_of(symbol).value],
                }
            )
        )

    return reply


@pytest.mark.parametrize(("shift", "on_date"), [(7, True), (-7, True), (8, False), (-8, False)])
def test_top_five_date_in_trading_days_sector_board_and_the_joint_score(
    shift: int, on_date: bool
) -> None:
    setup = setup_of("cn", trials=12)
    setup = dataclasses.replace(setup, sectors=cn_sectors(setup))
    report, _ = probe(setup, third_place(setup, shift), [MaskingLevel.BRIGHT])
    (bright,) = report.levels
    targets = bright.targets
    assert targets["ticker_top1"].hits == 0  # the right ticker, third
    assert targets["ticker_top5"].hits == 12
    assert targets["ticker_top5"].chance == pytest.approx(5 / report.symbols)
    assert targets["date"].hits == (12 if on_date else 0)
    assert targets["joint"].hits == (12 if on_date else 0)
    assert targets["sector"].hits == targets["board"].hits == 12
    assert targets["sector"].chance == pytest.approx(1 / 3)
    assert targets["board"].chance == pytest.approx(1 / 4)
    assert targets["board"].shown
    assert not targets["sector"].shown
    assert bright.skipped == {}
    assert (targets["joint"].low, targets["joint"].high) == wilson(targets["joint"].hits, 12)


def test_several_attackers_are_shown_the_same_trials() -> None:
    setup = setup_of("cn", trials=8)
    sessions = sessions_of(setup)
    zone = ZoneInfo(setup.rules.timezone)

    def reader(body: Body) -> Body:
        """Names what is on the screen: the symbol, and the last bar's date when it is real."""
        shown = shown_of(body)
        stamp = shown["bars"][-1]["start_at"]
        if not re.match(r"\d{4}-\d{2}-\d{2}", stamp):
            return answer(shown["symbol"], sessions[0])
        day = datetime.fromisoformat(stamp).astimezone(zone).date()
        return answer(shown["symbol"], day)

    models = {
        "reader": ScriptedModel([reader] * 16),
        "guesser": ScriptedModel([guesser(setup)] * 16),
    }
    levels = [MaskingLevel.BRIGHT, MaskingLevel.BLINDED]

    async def scenario() -> tuple[ProbeReport, ...]:
        async with contextlib.AsyncExitStack() as stack:
            attackers = {}
            for name, scripted in models.items():
                http = await stack.enter_async_context(scripted.client())
                config = ClientConfig(base_url="https://llm.test/v1", model=f"{name}-1")
                chat = await stack.enter_async_context(ChatClient(config, http=http).connect())

                async def ask(messages: list[dict[str, Any]], chat: Any = chat) -> str:
                    return str((await chat.complete(messages)).completion.content)

                attackers[name] = ask
            return await run_probes(setup, levels, attackers)

    reports = asyncio.run(scenario())
    assert [report.attacker for report in reports] == ["reader", "guesser"]
    asked = [sorted(m["messages"][-1]["content"] for m in s.requests) for s in models.values()]
    assert asked[0] == asked[1]
    assert len(asked[0]) == 16
    reader_bright = reports[0].levels[0]
    assert reader_bright.symbol.hits == reader_bright.date.hits == 8
    assert reports[0].levels[1].symbol.hits == 0
    assert not reports[1].levels[0].symbol.above_chance


def test_the_quotes_payload_shows_the_board_and_band_even_when_blinded() -> None:
    setup = setup_of("cn", payload="quotes", rebase=False)
    trials, _, _ = draw_trials(setup)
    gateway = PointInTimeGateway(setup.source)
    zone = ZoneInfo(setup.rules.timezone)
    for trial in trials[:4]:
        bright = json.loads(asyncio.run(shown_series(setup, gateway, trial, MaskingLevel.BRIGHT)))
        blinded = asyncio.run(shown_series(setup, gateway, trial, MaskingLevel.BLINDED))
        (quote,) = bright["quotes"]
        assert quote["symbol"] == trial.symbol
        assert quote["board"] == board_of(trial.symbol).value
        daily = setup.source.bars_between(
            [trial.symbol], "1d", datetime(1900, 1, 1, tzinfo=UTC), trial.as_of
        )[trial.symbol]
        previous = [bar for bar in daily if bar.start_at.astimezone(zone).date() < trial.day][-1]
        band = limit_band(setup.universe.instrument(trial.symbol), setup.rules, previous.close)
        assert band is not None
        assert Decimal(quote["limit_up"]) == band.up
        assert trial.symbol not in blinded
        assert '"board"' in blinded
        assert '"limit_up"' in blinded

    def board_reader(body: Body) -> Body:
        (quote,) = shown_of(body)["quotes"]
        return completion(json.dumps({"board": quote["board"]}))

    report, _ = probe(setup, board_reader, [MaskingLevel.BLINDED])
    board = report.levels[0].targets["board"]
    assert board.hits == setup.trials
    assert board.shown  # the paper's sanity check: the board is not anonymised


def test_the_news_payload_is_shown_bright_and_masked_when_blinded() -> None:
    setup = setup_of(trials=5)
    trials, _, _ = draw_trials(setup)
    news = [
        NewsItem(
            symbol=trial.symbol,
            published_at=trial.as_of - timedelta(hours=2),
            title=f"{trial.symbol} beats estimates",
        )
        for trial in trials
    ]
    source = ReplaySource.from_bundled("us", news=news)
    setup = dataclasses.replace(setup, source=source, payload="news")
    gateway = PointInTimeGateway(source)
    for trial in trials:
        bright = json.loads(asyncio.run(shown_series(setup, gateway, trial, MaskingLevel.BRIGHT)))
        assert [item["title"] for item in bright["items"]] == [f"{trial.symbol} beats estimates"]
        blinded = json.loads(asyncio.run(shown_series(setup, gateway, trial, MaskingLevel.BLINDED)))
        assert blinded["code"] == "masked"
        assert trial.symbol not in json.dumps(blinded)


def test_the_ktd_payload_is_the_papers_three_tools_masked_alike() -> None:
    setup = setup_of("cn", payload="ktd", trials=6, lookback=10)
    trials, _, _ = draw_trials(setup)
    gateway = PointInTimeGateway(setup.source)
    tools = ["get_market_context", "screen_candidates", "get_stock_snapshot"]
    for trial in trials[:3]:
        bright = json.loads(asyncio.run(shown_series(setup, gateway, trial, MaskingLevel.BRIGHT)))
        assert list(bright) == tools
        assert bright["get_stock_snapshot"]["stock"]["stock_id"] == trial.symbol
        assert bright["get_market_context"]["as_of_date"] == trial.day.isoformat()
        assert len(bright["screen_candidates"]["candidates"]) == 10
        text = asyncio.run(shown_series(setup, gateway, trial, MaskingLevel.BLINDED))
        blinded = json.loads(text)
        assert list(blinded) == tools
        alias = blinded["get_stock_snapshot"]["stock"]["stock_id"]
        assert alias.startswith("asset_")
        assert trial.symbol not in text
        assert not re.search(r"\d{4}-\d{2}-\d{2}", text)
        # One masker for the three results: the snapshot's alias is the screen's, where listed.
        listed = {row["stock_id"] for row in blinded["screen_candidates"]["candidates"]}
        real = {row["stock_id"] for row in bright["screen_candidates"]["candidates"]}
        assert (alias in listed) == (trial.symbol in real)

    def snapshot_reader(body: Body) -> Body:
        return completion(
            json.dumps({"tickers": [shown_of(body)["get_stock_snapshot"]["stock"]["stock_id"]]})
        )

    report, _ = probe(setup, snapshot_reader, [MaskingLevel.BRIGHT, MaskingLevel.BLINDED])
    bright_result, blinded_result = report.levels
    assert bright_result.symbol.hits == 6
    assert blinded_result.symbol.hits == 0
