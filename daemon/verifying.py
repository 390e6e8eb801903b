"""The live daemon's ledger verification: at start-up from its checkpoints, and in full on a
schedule, never on the event loop.

- `verify_at_startup`: SQLite's quick check (on Postgres: the indexes and constraints the ledger
  relies on; `store.integrity`), then the ledger invariants on what was written since the stored
  checkpoints (`store.verify`; every row when there are none, or they cannot be used), in a
  worker thread while systemd is told, every `EXTEND_EVERY_S`, that start-up needs
  `EXTEND_BY_S` more (`EXTEND_TIMEOUT_USEC`): a long verification extends the start timeout
  instead of getting the daemon killed. Each account with a breach is paused in the ledger
  (`account_paused`), and the checkpoints of the others are stored for the next start.
- `full_verifications`: every `LivePlan.full_verify_every_s` (`[store] full_verify_every_h`),
  SQLite's integrity check and every invariant on every row, in a worker thread, beside the
  bells; breaches pause their accounts (a paused account's later slots do not run), damage is
  logged (`database_damaged`), and the checkpoints are stored again.
Damage found at start-up stops the daemon (`DatabaseDamaged`, exit 2).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime

import structlog
from sqlalchemy import Engine

from openbell.daemon.sdnotify import Notifier
from openbell.markets.errors import DatabaseDamaged
from openbell.store.integrity import check_integrity
from openbell.store.ledger import Ledger
from openbell.store.verify import Verification, verify
from openbell.store.verify.checkpoints import load_checkpoints, save_checkpoints

log = structlog.stdlib.get_logger(__name__)

#: While start-up verifies, how often systemd is told it needs more time, and how much more.
EXTEND_EVERY_S = 5.0
EXTEND_BY_S = 30.0


async def verify_at_startup(
    engine: Engine, ledger: Ledger, now: datetime, notifier: Notifier
) -> set[int]:
    """Check the database and the ledger since the checkpoints; the accounts paused."""
    extending = asyncio.create_task(_extend_start(notifier))
    try:
        started_s = time.monotonic()
        verification = await asyncio.to_thread(_startup_check, engine)
    finally:
        extending.cancel()
    return _conclude(engine, ledger, verification, now, started_s, kind="startup")


def _startup_check(engine: Engine) -> Verification:
    check_integrity(engine)
    since, why_not = load_checkpoints(engine)
    if since is None:
        log.info("ledger_checkpoints_unused", reason=why_not)
    return verify(engine, since)


async def _extend_start(notifier: Notifier) -> None:
    if not notifier.enabled:
        return
    while True:
        notifier.extend_timeout(EXTEND_BY_S)
        await asyncio.sleep(EXTEND_EVERY_S)


async def full_verifications(
    engine: Engine, ledger: Ledger, every_s: float, now: Callable[[], datetime]
) -> None:
    """Verify the whole ledger every `every_s` real seconds, in a worker thread, forever."""
    while True:
        await asyncio.sleep(every_s)
        started_s = time.monotonic()
        try:
            verification = await asyncio.to_thread(_full_check, engine)
            _conclude(engine, ledger, verification, now(), started_s, kind="full")
        except DatabaseDamaged as exc:
            log.error("database_damaged", error_message=str(exc))
        except Exception:  # the next turn tries again; the bells go on
            log.exception("full_verify_failed")


def _full_check(engine: Engine) -> Verification:
    check_integrity(engine, thorough=True)
    return verify(engine)


def _conclude(
    engine: Engine,
    ledger: Ledger,
    verification: Verification,
    now: datetime,
    started_s: float,
    *,
    kind: str,
) -> set[int]:
    """Pause the accounts with a breach, store the checkpoints, log `ledger_verified`."""
    report = verification.report
    broken = report.broken_accounts()
    for account_id, lines in sorted(broken.items()):
        ledger.set_paused(account_id, True)
        log.error("account_paused", account_id=account_id, breaches=lines[:10], count=len(lines))
    try:
        stored = save_checkpoints(engine, verification.checkpoints, now)
    except Exception:  # a start without checkpoints verifies in full: slower, never wrong
        log.exception("ledger_checkpoints_not_stored")
        stored = 0
    log.info(
        "ledger_verified",
        kind=kind,
        since=report.since,
        fell_back=verification.fell_back,
        accounts=report.accounts,
        fills=report.fills,
        snapshots=report.snapshots,
        paused=len(broken),
        checkpoints=stored,
        seconds=round(time.monotonic() - started_s, 3),
    )
    return set(broken)
