"""The live daemon answers `/healthz` while a slot's cycles run, not after them.

A live daemon with 50 baseline agents rings one crypto slot; the test polls `/healthz` over
loopback, reading the ledger's count of the slot's finished cycles after each answer. The loop
must have answered between the slot's first and its last finished cycle: an answer that says the
slot is `running`, sent after a read that saw a finished cycle and followed by one that saw some
still unfinished. Nothing is timed: on a loaded machine the slot only takes longer.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import httpx
from sqlalchemy import text

from openbell.agents.baselines import build_agent
from openbell.daemon.clock import ScaledClock
from openbell.store.db import make_engine
from openbell_testkit.live import START_AT, crypto_plan, migrated, running
from openbell_testkit.offline import closed_port

AGENTS = 50
KINDS = ("buy_and_hold", "equal_weight", "sma_crossover", "cash")


def test_healthz_is_answered_between_the_first_and_last_cycle_of_a_slot(sqlite_url: str) -> None:
    agents = tuple(build_agent(kind, kind, market="crypto") for kind in KINDS) + tuple(
        build_agent("random", f"random-{seed:02d}", market="crypto", seed=seed)
        for seed in range(AGENTS - len(KINDS))
    )
    url = migrated(sqlite_url)
    port = closed_port()
    plan = replace(crypto_plan(url, agents=agents, lease_s=3600), http_listen=("127.0.0.1", port))
    clock = ScaledClock(START_AT - timedelta(seconds=3), speed=1.0)
    engine = make_engine(url)
    finished_sql = text(
        "SELECT count(*) FROM cycle WHERE slot_at = (SELECT min(slot_at) FROM cycle) "
        "AND status != 'claimed'"
    )
    # (running, finished cycles read after the answer), in order.
    answers: list[tuple[bool, int]] = []
    try:
        with running(plan, clock), httpx.Client(timeout=60) as client:
            deadline = time.monotonic() + 120
            finished = 0
            while finished < AGENTS:
                assert time.monotonic() < deadline, "the slot did not finish"
                try:
                    response = client.get(f"http://127.0.0.1:{port}/healthz")
                except httpx.ConnectError:  # not serving yet
                    time.sleep(0.05)
                    continue
                with engine.connect() as connection:
                    finished = connection.execute(finished_sql).scalar_one()
                answers.append(("crypto" in response.json()["running"], finished))
    finally:
        engine.dispose()
    between = [
        index
        for index, (running_, finished) in enumerate(answers)
        if running_ and finished < AGENTS and index > 0 and answers[index - 1][1] > 0
    ]
    assert between, f"no answer while the slot's cycles ran: {answers[-20:]}"
    assert len([1 for running_, _ in answers if running_]) >= 3
