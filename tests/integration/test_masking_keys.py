"""The masking key of an account (its aliases, day epoch and money unit) is made at its first
masked cycle, stored in the ledger and read back by every later cycle: a restarted daemon (even one
configured with another seed) and a universe file that gains a member or a later date change no
alias and no day label. The model is shown the universe in its account's alias order, not the
file's, and never the universe's name."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
import pytest

from openbell.agents.llm.agent import LlmAgent
from openbell.agents.llm.client import ChatClient, ClientConfig
from openbell.agents.masking import MaskingLevel, masker_for
from openbell.agents.modes import prompt_for_mode
from openbell.daemon.plan import ReplayPlan
from openbell.daemon.replay import run_replay
from openbell.markets.domain import utc
from openbell.markets.universes import load_universe
from openbell.store.db import make_engine
from openbell.store.ledger import Ledger
from openbell.store.migrate import upgrade
from openbell_testkit.agents import DAY, US_OPEN, make_arena
from openbell_testkit.llm import ScriptedModel, completion, finish, tool_turn
from openbell_testkit.modes import Cycle, run_llm
from openbell_testkit.replay import cn_daily

SEED = "keys-test"


pytestmark = pytest.mark.sqlite_only


def blinded(arena: Any, at: Any, script: list[Any], seed: str = SEED) -> Cycle:
    def prompt(ctx: object) -> Any:
        return prompt_for_mode("open-research", masking=MaskingLevel.BLINDED, masking_seed=seed)

    return run_llm(arena, script, at, prompt=prompt, masker=masker_for("blinded", seed=seed))


def listed(cycle: Cycle) -> list[str]:
    """The aliases of the universe line of the cycle's first user message, in order."""
    user = cycle.messages()[1]["content"]
    line = next(line for line in user.splitlines() if line.startswith("Universe:"))
    return re.findall(r"asset_\d{4}", line)


def test_the_key_is_stored_at_the_first_masked_cycle_and_read_back(ledger: Ledger) -> None:
    arena = make_arena(ledger, "us")
    assert ledger.masking_key(arena.account_id) is None
    first = blinded(arena, US_OPEN, [tool_turn(("get_portfolio", {})), finish()])

    key = ledger.masking_key(arena.account_id)
    assert key is not None
    assert set(key.aliases) == {*arena.universe.symbols, "QQQ"}
    assert len(set(key.aliases.values())) == len(key.aliases)
    shown = listed(first)
    assert shown == sorted(key.aliases[symbol] for symbol in arena.universe.symbols)
    in_file_order = [key.aliases[symbol] for symbol in arena.universe.symbols]
    assert shown != in_file_order  # asset listed first is no longer AAPL, the file's first

    # a restarted daemon, even one configured with another seed, reads the stored key
    again = blinded(arena, US_OPEN + DAY, [finish()], seed="another seed")
    assert listed(again) == shown
    assert ledger.masking_key(arena.account_id) == key
    days = {re.search(r"Now: (day_[+-]\d+)", c.messages()[1]["content"]) for c in (first, again)}
    labels = [int(found.group(1)[4:]) for found in days if found is not None]
    assert max(labels) - min(labels) == 1


def test_a_universe_that_gains_a_member_keeps_every_alias(ledger: Ledger) -> None:
    full = load_universe("nasdaq100")
    smaller = make_arena(ledger, "us", universe=replace(full, instruments=full.instruments[5:]))
    blinded(smaller, US_OPEN, [finish()])
    before = ledger.masking_key(smaller.account_id)
    assert before is not None
    assert full.instruments[0].symbol not in before.aliases

    later_file = replace(full, as_of=full.as_of + timedelta(days=40))
    grown = make_arena(ledger, "us", universe=later_file)
    assert grown.account_id == smaller.account_id
    blinded(grown, US_OPEN + DAY, [finish()])
    after = ledger.masking_key(grown.account_id)
    assert after is not None
    assert {symbol: after.aliases[symbol] for symbol in before.aliases} == dict(before.aliases)
    assert set(after.aliases) == {*full.symbols, "QQQ"}
    assert (after.epoch, after.money_unit) == (before.epoch, before.money_unit)


SCRIPTS: dict[str, list[Any]] = {
    "open-research": [
        tool_turn(("get_bars", {"symbol": "asset_0000"})),
        tool_turn(("place_order", {"symbol": "asset_0000", "side": "buy", "shares": 1})),
        finish(),
    ],
    "fixed-candidate": [completion('{"orders": []}')],
    "memory-only": [completion('{"orders": []}')],
    "stockbench": [completion('{"selected": []}'), completion('{"decisions": []}')],
}


@pytest.mark.parametrize("mode", list(SCRIPTS))
@pytest.mark.parametrize(
    "level", [MaskingLevel.STOCK_BLIND, MaskingLevel.DATE_BLIND, MaskingLevel.BLINDED]
)
def test_a_masked_model_is_never_told_the_universes_name(
    ledger: Ledger, mode: str, level: MaskingLevel
) -> None:
    arena = make_arena(ledger, "us")

    def prompt(ctx: object) -> Any:
        return prompt_for_mode(mode, masking=level, masking_seed=SEED)

    ran = run_llm(arena, SCRIPTS[mode], US_OPEN, prompt=prompt, masker=masker_for(level, seed=SEED))
    seen = json.dumps([request["messages"] for request in ran.model.requests])
    assert "nasdaq100" not in seen
    assert not re.search(r"\(\d+ symbols\)", seen)
    bright = run_llm(
        make_arena(ledger, "us", agent="bright"),
        SCRIPTS["open-research"],
        US_OPEN,
    )
    assert "nasdaq100" in json.dumps(bright.model.requests[-1]["messages"])


def replay_blinded(url: str, seed: str, days: tuple[int, int], model: ScriptedModel) -> None:
    """A blinded open-research agent replayed over A-share sessions of September 2025."""
    agent = LlmAgent(
        name="blind",
        client=ChatClient(
            ClientConfig(base_url="https://llm.test/v1", model="scripted-1"),
            http=httpx.AsyncClient(transport=httpx.MockTransport(model.handler)),
        ),
        prompt=lambda ctx: prompt_for_mode("open-research", masking="blinded", masking_seed=seed),
        masker=masker_for("blinded", seed=seed),
    )
    market = cn_daily(agent)
    plan = ReplayPlan(
        store_url=url,
        start_at=utc(2025, 9, days[0]),
        end_at=utc(2025, 9, days[1]),
        markets=(market,),
        resume=True,
    )
    assert run_replay(plan).cycles_failed == 0


def test_a_replay_resumed_with_another_seed_keeps_the_accounts_aliases(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    model = ScriptedModel([finish()] * 10)
    replay_blinded(sqlite_url, "first run", (1, 3), model)
    ledger = Ledger(make_engine(sqlite_url))
    key = ledger.masking_key(1)  # the only account
    assert key is not None
    replay_blinded(sqlite_url, "a new seed after a restart", (3, 5), model)
    assert ledger.masking_key(1) == key
    shown = [
        re.findall(r"asset_\d{4}", body["messages"][1]["content"].split("Universe:")[1])
        for body in model.requests
    ]
    assert len(shown) == 4
    assert all(listing == shown[0] for listing in shown)
    assert shown[0] == sorted(key.aliases[s] for s in load_universe("sse50").symbols)
    assert not any("sse50" in json.dumps(body) for body in model.requests)
