"""Universes respect time (issue 9, item 4): a symbol is offered at `t` only if it is a member at
`t` and has a bar ended by `t`, in the prompt, in the tools and to the baselines.

The bundled crypto daily bars start on 2023-05-03 for SUI/USDT and on 2024-11-26 for LINK/USDT, so
a 2021 replay of `crypto10` must not offer either: an LLM agent is not told of them, a tool asked
about them answers as for any symbol outside the universe, an order for one is rejected
`not_in_universe`, and no baseline trades them. SUI/USDT appears on the first slot after its
first bar ended. A property test checks, at random times over the bundled data of every market,
that each symbol a toolbox offers had a bar ended by then, and each member that had one is offered.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlmodel import Session

from openbell.agents.baselines import BASELINE_KINDS, build_agent
from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.masking import AliasMasker, masker_for
from openbell.agents.modes import MODES, prompt_for_mode
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.barfile import read_bundled
from openbell.markets.domain import utc
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell.store.tables import AccountRow, AgentRow, OrderRow
from openbell.store.verify import verify_ledger
from openbell_testkit.agents import Arena, make_arena
from openbell_testkit.llm import Body, ScriptedModel, completion, finish, tool_turn
from openbell_testkit.modes import run_llm
from openbell_testkit.replay import crypto_daily

LATE = ("SUI/USDT", "LINK/USDT")
OFFERED_2021 = (
    "BTC/USDT",
    "ETH/USDT",
    "XRP/USDT",
    "SOL/USDT",
    "ADA/USDT",
    "AVAX/USDT",
    "LTC/USDT",
    "DOT/USDT",
)


def probing_model(body: Body) -> Body:
    """A model that asks about the late coins (and BTC) through every tool, then finishes."""
    if any(message["role"] == "tool" for message in body["messages"]):
        return finish("probed")
    return tool_turn(
        ("get_quote", {"symbols": [*LATE, "BTC/USDT"]}),
        ("get_bars", {"symbol": "SUI/USDT", "interval": "1d", "lookback": 5}),
        ("get_bars", {"symbol": "LINK/USDT", "interval": "1d", "lookback": 5}),
        ("place_order", {"symbol": "LINK/USDT", "side": "buy", "shares": 1, "reason": "probe"}),
    )


def crypto_replay(url: str, model: ScriptedModel, start: datetime, days: int) -> None:
    """A daily replay of `crypto10` over the bundled bars: the probing LLM and every baseline."""
    upgrade(url)
    http = httpx.AsyncClient(transport=httpx.MockTransport(model.handler))
    llm = LlmAgent(
        name="probe",
        client=ChatClient(
            ClientConfig(base_url="https://llm.test/v1", model="scripted-1", api_key="k"),
            http=http,
        ),
    )
    baselines = tuple(
        build_agent(kind, kind.replace("_", "-"), market="crypto", seed=3)
        for kind in BASELINE_KINDS
    )
    market = crypto_daily(llm, *baselines)
    report = run_replay(
        ReplayPlan(
            store_url=url,
            start_at=start,
            end_at=start + timedelta(days=days),
            markets=(market,),
        )
    )
    assert (report.slots, report.cycles_failed, report.cycles_skipped) == (days, 0, 0)


def orders_by_agent(url: str) -> dict[str, list[OrderRow]]:
    engine = make_engine(url)
    try:
        assert verify_ledger(engine).ok
        with Session(engine) as session:
            rows = session.exec(
                select(AgentRow.name, OrderRow)
                .join(AccountRow, AccountRow.id == OrderRow.account_id)
                .join(AgentRow, AgentRow.id == AccountRow.agent_id)
            ).all()
    finally:
        engine.dispose()
    found: dict[str, list[OrderRow]] = {}
    for name, order in rows:
        found.setdefault(name, []).append(order)
    return found


def first_requests(model: ScriptedModel) -> list[Body]:
    """The first request of each cycle (the one without tool results), in order."""
    return [
        body
        for body in model.requests
        if not any(message["role"] == "tool" for message in body["messages"])
    ]


def tool_results(body: Body) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def test_a_2021_crypto_replay_offers_no_coin_before_its_first_bar(sqlite_url: str) -> None:
    model = ScriptedModel([probing_model] * 20)
    crypto_replay(sqlite_url, model, utc(2021, 1, 1), days=3)

    # the prompt: the eight coins that had bars, never SUI or LINK
    firsts = first_requests(model)
    assert len(firsts) == 3
    for body in firsts:
        system, user = (message["content"] for message in body["messages"])
        assert "universe crypto10 (8 symbols)" in system
        assert f"Universe: {' '.join(OFFERED_2021)}\n" in user
        for late in LATE:
            assert late not in system + user

    # the tools: the late coins are answered as any symbol outside the universe
    answered = [tool_results(body) for body in model.requests if tool_results(body)]
    assert len(answered) == 3
    for quotes, sui_bars, link_bars, order in answered:
        assert quotes["unknown"] == list(LATE)
        assert [quote["symbol"] for quote in quotes["quotes"]] == ["BTC/USDT"]
        for error, symbol in ((sui_bars, "SUI/USDT"), (link_bars, "LINK/USDT")):
            assert error["code"] == "unknown_symbol"
            assert (
                error["message"] == f"{symbol} is not served: it is not in this account's universe."
            )
        assert order["status"] == "rejected"
        assert order["reject_reason"] == "not_in_universe"

    # the baselines: nothing of SUI or LINK is ever ordered; equal weight buys the eight
    orders = orders_by_agent(sqlite_url)
    assert {o.reject_reason for o in orders["probe"]} == {"not_in_universe"}
    for name, placed in orders.items():
        if name != "probe":
            assert not [o.symbol for o in placed if o.symbol in LATE], name
    assert sorted(o.symbol for o in orders["equal-weight"]) == sorted(OFFERED_2021)
    assert {o.status for o in orders["equal-weight"]} == {"filled"}
    assert orders["random"], "the random trader traded (the seed makes it trade in 2021)"


def test_a_coin_is_offered_from_the_first_slot_after_its_first_bar_ended(sqlite_url: str) -> None:
    # SUI/USDT's first daily bar is [2023-05-03, 2023-05-04): not offered at 05-02 nor at 05-03
    # (its bar has only started; the quote rule would price it at its open), offered from 05-04.
    model = ScriptedModel([finish("looked")] * 10)
    crypto_replay(sqlite_url, model, utc(2023, 5, 2), days=4)
    offered = []
    for body in first_requests(model):
        user = body["messages"][1]["content"]
        line = next(text for text in user.splitlines() if text.startswith("Universe: "))
        offered.append("SUI/USDT" in line.split())
    assert offered == [False, False, True, True]
    orders = orders_by_agent(sqlite_url)
    # equal weight bought at the first slot, before SUI was offered, and only holds afterwards
    assert "SUI/USDT" not in {o.symbol for o in orders["equal-weight"]}
    assert len(orders["equal-weight"]) == 8  # neither SUI nor LINK (first bar 2024-11-26)


# -- property: whatever the time, what is offered had a bar ended by then --------------------

#: (market, the bundled files, the first and last instant to draw from)
MARKETS = {
    "crypto": (("crypto-1d", "crypto-1h"), utc(2010, 7, 10), utc(2025, 12, 28)),
    "us": (("us-1d", "us-1h"), utc(2025, 6, 5), utc(2025, 11, 12)),
    "cn": (("cn-1d", "cn-1h", "cn-index-1d"), utc(2024, 12, 30), utc(2025, 11, 21)),
}


def first_ends(market: str) -> dict[str, datetime]:
    """Ground truth, straight from the bar files: each symbol's earliest bar end."""
    ends: dict[str, datetime] = {}
    for name in MARKETS[market][0]:
        barset = read_bundled(name)
        for symbol in barset.symbols:
            first = barset.bars(symbol)[0].end_at
            ends[symbol] = min(first, ends.get(symbol, first))
    return ends


class Arenas(dict[str, tuple[Arena, dict[str, datetime]]]):
    """Each market's arena and first bar ends (a short repr: hypothesis prints its arguments)."""

    def __repr__(self) -> str:
        return f"Arenas({sorted(self)})"


@pytest.fixture(scope="module")
def arenas(tmp_path_factory: pytest.TempPathFactory) -> Arenas:
    url = f"sqlite:///{tmp_path_factory.mktemp('pit') / 'ledger.db'}"
    upgrade(url)
    ledger = Ledger(make_engine(url))
    return Arenas(
        (market, (make_arena(ledger, market, agent=f"prop-{market}"), first_ends(market)))
        for market in MARKETS
    )


@st.composite
def market_times(draw: st.DrawFn) -> tuple[str, datetime]:
    market = draw(st.sampled_from(sorted(MARKETS)))
    _, first, last = MARKETS[market]
    minutes = int((last - first).total_seconds() // 60)
    # whole hours half the time: slots sit on bar boundaries, where an off-by-one would show
    offset = draw(
        st.one_of(st.integers(0, minutes // 60).map(lambda h: h * 60), st.integers(0, minutes))
    )
    return market, first + timedelta(minutes=offset)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(drawn=market_times())
def test_every_offered_symbol_had_a_bar_ended_by_the_slot(
    arenas: Arenas, drawn: tuple[str, datetime]
) -> None:
    market, now = drawn
    arena, ends = arenas[market]
    tools = asyncio.run(arena.toolbox(now))
    offered = set(tools.universe.symbols)
    for symbol in offered:
        assert ends[symbol] <= now, f"{symbol} offered at {now}, its first bar ends {ends[symbol]}"
    members = set(arena.universe.symbols)
    assert offered == {symbol for symbol in members if symbol in ends and ends[symbol] <= now}
    benchmark = arena.universe.benchmark
    if benchmark is not None:
        expected = benchmark in ends and ends[benchmark] <= now
        assert (tools.benchmark_symbol == benchmark) is expected


def test_masking_aliases_stay_the_same_when_a_member_is_first_offered(ledger: Ledger) -> None:
    # The alias map is built over the whole universe, not over what is offered, so a coin that
    # appears does not reshuffle the aliases an agent has learnt (SUI/USDT appears on 2023-05-04).
    arena = make_arena(ledger, "crypto")
    factory = masker_for("blinded", seed=5)
    agent = build_agent("cash", "cash", market="crypto")
    maps = []
    for now in (utc(2023, 5, 3), utc(2023, 5, 4)):
        tools = asyncio.run(arena.toolbox(now))
        masker = factory(arena.context(agent, tools))
        assert isinstance(masker, AliasMasker)
        maps.append(dict(masker.aliases.aliases))
    assert maps[0] == maps[1]
    assert set(maps[0]) == set(arena.universe.symbols)


def test_a_structured_mode_translates_with_the_agents_alias_map(ledger: Ledger) -> None:
    # A no-tool mode reads the model's stock ids back with its own masker: it must be the very
    # map the agent's masker uses, built over the whole universe, whatever is offered now.
    arena = make_arena(ledger, "crypto")
    now = utc(2023, 5, 3)  # SUI/USDT is a member with no bar yet
    tools = asyncio.run(arena.toolbox(now))
    ctx = arena.context(build_agent("cash", "cash", market="crypto"), tools)
    prompt = prompt_for_mode("memory-only", masking="blinded", masking_seed=5)
    asyncio.run(prompt.prepare(ctx))
    masker = getattr(prompt, "masker", None)
    agents = masker_for("blinded", seed=5)(ctx)
    assert isinstance(masker, AliasMasker)
    assert isinstance(agents, AliasMasker)
    assert masker.aliases == agents.aliases
    assert "SUI/USDT" not in ctx.universe


#: The pair mode's pairs (it needs some): two coins offered on 2021-01-01.
PAIRS = (("BTC/USDT", "ETH/USDT"),)
#: The hedge mode's candidates: two coins offered on 2021-01-01 and the two listed later.
HEDGE_ASSETS = ("BTC/USDT", "ETH/USDT", *LATE)


@pytest.mark.parametrize("mode", MODES)
def test_no_decision_mode_tells_of_a_coin_before_its_first_bar(ledger: Ledger, mode: str) -> None:
    # Every mode's prompts (the open-research list, the fixed-candidate table, the memory-only ids,
    # the StockBench overview, the hedger's candidates) are built from what is offered on
    # 2021-01-01: eight coins.
    arena = make_arena(ledger, "crypto")
    ran = run_llm(
        arena,
        [completion('{"decisions": []}')] * 3,
        utc(2021, 1, 1),
        prompt=lambda ctx: prompt_for_mode(
            mode, pairs=PAIRS if mode == "pair" else (), hedge_assets=HEDGE_ASSETS
        ),
    )
    sent = " ".join(
        str(message.get("content") or "")
        for body in ran.model.requests
        for message in body["messages"]
    )
    assert "BTC" in sent
    for coin in ("SUI", "LINK"):
        assert coin not in sent, mode
