"""StockBench's workflow in a replay, over a user's news and fundamentals files (issue 15, item 5).

`openbell data import-news` and `import-fundamentals` record JSONL or Parquet files in the store's
cache; `openbell replay --from-cache URL` then shows them to the agents, each from its publication
time. The store holds no bars, so the market replays its bundled bars with the imported items. An
LLM agent in `stockbench` mode against a scripted model on 127.0.0.1 gets the news of the last 48
hours in its overview and the fundamentals of its pick: an item published after a slot is not in
that slot's prompt, whether the files are JSONL or Parquet. Without `--from-cache` the same replay
has no news and refuses fundamentals.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from openbell_testkit.cli import openbell
from openbell_testkit.llm import ScriptedModel, completion, serve_script

#: Published after the close of 2025-07-01 (20:00Z): first seen at the 2025-07-02 slot.
EARNINGS = "Apple beats on services revenue"
#: Published on 2025-06-27: older than 48 hours at the 2025-07-01 slot, so never shown.
OLD = "Apple supplier news from last week"
NEWS = [
    {"symbol": "AAPL", "published_at": "2025-07-01T20:00:00+00:00", "title": EARNINGS},
    {"symbol": "AAPL", "published_at": "2025-06-27T12:00:00Z", "title": OLD},
    {"symbol": "MSFT", "published_at": "2025-06-30 10:00:00", "title": "Microsoft reorganises"},
]
REPORTS = [
    {
        "symbol": "AAPL",
        "period_end": "2025-03-29",
        "published_at": "2025-05-01T20:30:00Z",
        "currency": "USD",
        "values": {"eps": "1.65", "revenue": "95359000000"},
    },
    {
        "symbol": "AAPL",
        "period_end": "2025-06-28",
        "published_at": "2025-07-31T20:30:00Z",  # after the window: never shown
        "currency": "USD",
        "values": {"eps": "1.57", "revenue": "94036000000"},
    },
]


def jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def parquet_news(path: Path) -> Path:
    """`NEWS` as a Parquet file whose `published_at` is a UTC timestamp column."""
    times = [datetime.fromisoformat(row["published_at"]) for row in NEWS]
    table = pa.table(
        {
            "symbol": [row["symbol"] for row in NEWS],
            "published_at": pa.array(
                [at if at.tzinfo else at.replace(tzinfo=UTC) for at in times],
                pa.timestamp("us", tz="UTC"),
            ),
            "title": [row["title"] for row in NEWS],
        }
    )
    pq.write_table(table, path)
    return path


def parquet_reports(path: Path) -> Path:
    """`REPORTS` as a Parquet file: one column per figure, as the importer reads Parquet."""
    table = pa.table(
        {
            "symbol": [row["symbol"] for row in REPORTS],
            "period_end": pa.array(
                [datetime.fromisoformat(row["period_end"]).date() for row in REPORTS],
                pa.date32(),
            ),
            "published_at": pa.array(
                [datetime.fromisoformat(row["published_at"]) for row in REPORTS],
                pa.timestamp("us", tz="UTC"),
            ),
            "currency": [row["currency"] for row in REPORTS],
            "eps": [row["values"]["eps"] for row in REPORTS],
            "revenue": pa.array([int(row["values"]["revenue"]) for row in REPORTS], pa.int64()),
        }
    )
    pq.write_table(table, path)
    return path


def script() -> list[Any]:
    """Each cycle: pick AAPL, then hold."""
    return [completion('{"selected": ["AAPL"]}'), completion('{"decisions": []}')] * 10


def prompts(model: ScriptedModel) -> list[str]:
    """The last user message of each request, in order."""
    out = []
    for body in model.requests:
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        out.append(users[-1])
    return out


def write_config(tmp_path: Path, base_url: str) -> Path:
    config = tmp_path / "openbell.toml"
    config.write_text(
        f'[store]\nurl = "sqlite:///{(tmp_path / "ledger.db").as_posix()}"\n\n'
        '[markets.us]\nuniverse = ["AAPL", "MSFT"]\ncadence = "daily"\nsource = "yfinance"\n'
        'initial_cash = "100000"\n\n'
        '[[agents]]\nname = "bench"\nkind = "llm"\nmarkets = ["us"]\n'
        f'base_url = "{base_url}"\nmodel = "scripted-1"\nmode = "stockbench"\n',
        encoding="utf-8",
    )
    return config


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_stockbench_replays_with_imported_news_and_fundamentals(
    tmp_path: Path, suffix: str
) -> None:
    model = ScriptedModel(script())
    with serve_script(model) as base_url:
        config = write_config(tmp_path, base_url)
        if suffix == "jsonl":
            news = jsonl(tmp_path / "news.jsonl", NEWS)
            reports = jsonl(tmp_path / "fundamentals.jsonl", REPORTS)
        else:
            news = parquet_news(tmp_path / "news.parquet")
            reports = parquet_reports(tmp_path / "fundamentals.parquet")
        imported = openbell(
            tmp_path, "data", "import-news", str(news), "--tz", "UTC", "--config", str(config)
        )
        assert imported.returncode == 0, imported.stderr
        assert imported.stdout.strip() == f"recorded 3 news items from news.{suffix}"
        ledger = str(tmp_path / "ledger.db")  # --db: the store, without the config
        imported = openbell(tmp_path, "data", "import-fundamentals", str(reports), "--db", ledger)
        assert imported.returncode == 0, imported.stderr
        store = f"sqlite:///{(tmp_path / 'ledger.db').as_posix()}"
        args = ["--start", "2025-07-01", "--end", "2025-07-02", "--from-cache", store]
        replayed = openbell(tmp_path, "replay", "--config", str(config), *args)
    assert replayed.returncode == 0, replayed.stderr
    assert "2 cycles done, 0 failed" in replayed.stdout
    first_overview, first_facts, second_overview, second_facts = prompts(model)[:4]
    assert "Microsoft reorganises" in first_overview
    assert EARNINGS not in first_overview
    assert OLD not in first_overview
    assert EARNINGS in second_overview
    assert "Microsoft reorganises" not in second_overview  # 51.5 hours old by then
    for facts in (first_facts, second_facts):
        assert "1.65" in facts
        assert "95359000000" in facts
        assert "1.57" not in facts


def test_without_the_cache_the_same_replay_has_no_news_and_no_fundamentals(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(script())
    with serve_script(model) as base_url:
        config = write_config(tmp_path, base_url)
        news = jsonl(tmp_path / "news.jsonl", NEWS)
        imported = openbell(
            tmp_path, "data", "import-news", str(news), "--tz", "UTC", "--config", str(config)
        )
        assert imported.returncode == 0, imported.stderr
        args = ["--start", "2025-07-01", "--end", "2025-07-02"]
        replayed = openbell(tmp_path, "replay", "--config", str(config), *args)
    assert replayed.returncode == 0, replayed.stderr
    first_overview, first_facts = prompts(model)[:2]
    assert "news " not in first_overview.split("overview", 1)[1].split("Stage 2")[0]
    assert "fundamentals are not available in this run" in first_facts


def test_a_news_file_with_naive_times_needs_a_zone(tmp_path: Path) -> None:
    (tmp_path / "openbell.toml").write_text(
        f'[store]\nurl = "sqlite:///{(tmp_path / "ledger.db").as_posix()}"\n', encoding="utf-8"
    )
    news = jsonl(tmp_path / "news.jsonl", NEWS)
    done = openbell(tmp_path, "data", "import-news", str(news))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        "openbell: error: news.jsonl row 3: published_at 2025-06-30 10:00:00 has no zone: "
        "state it with --tz"
    )


def test_a_bad_time_or_date_is_named_once_with_its_row(tmp_path: Path) -> None:
    (tmp_path / "openbell.toml").write_text(
        f'[store]\nurl = "sqlite:///{(tmp_path / "ledger.db").as_posix()}"\n', encoding="utf-8"
    )
    news = jsonl(tmp_path / "news.jsonl", [{"published_at": "soon", "title": "t"}])
    done = openbell(tmp_path, "data", "import-news", str(news))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "openbell: error: news.jsonl row 1: published_at 'soon' is not an ISO 8601 time"
    ]
    bad_date = {**REPORTS[0], "period_end": "2025-13-01"}
    reports = jsonl(tmp_path / "fundamentals.jsonl", [REPORTS[0], bad_date])
    done = openbell(tmp_path, "data", "import-fundamentals", str(reports))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "openbell: error: fundamentals.jsonl row 2: period_end '2025-13-01' is not a date"
    ]
