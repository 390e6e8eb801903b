"""The replay's garbage-collector tuning is in force while it runs and undone after."""

from __future__ import annotations

import gc

import pytest

from openbell.daemon.replay import GC_YOUNG_THRESHOLD, _collector_for_replay


def test_the_collector_is_tuned_during_a_replay_and_restored_after() -> None:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with _collector_for_replay():
        assert gc.get_threshold() == (max(GC_YOUNG_THRESHOLD, before[0]), *before[1:])
        assert gc.get_freeze_count() > 0  # what was alive when it started is left alone
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_it_is_restored_when_the_replay_fails() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), _collector_for_replay():
        raise RuntimeError("boom")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_by_the_process_is_kept() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        # Not frozen again (the count would grow) nor thawed (it would be 0); a frozen object
        # may still be freed meanwhile, when nothing refers to it any more.
        with _collector_for_replay() as froze:
            assert not froze
            assert 0 < gc.get_freeze_count() <= frozen
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_a_freeze_the_caller_says_it_made_is_kept_without_counting() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with _collector_for_replay(frozen=True) as froze:
            assert not froze
            assert gc.get_threshold()[0] >= GC_YOUNG_THRESHOLD
            assert 0 < gc.get_freeze_count() <= frozen
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()
