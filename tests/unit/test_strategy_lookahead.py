"""The static check refuses strategies that peek at later rows or reach outside the sandbox, and
accepts honest ones (trailing windows, one row, cross-sectional statistics)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openbell.agents.strategy_code.lookahead import check_strategy

HONEST = '''
import math
import numpy as np
import pandas as pd

LOOKBACK = 20


def strategy(bars):
    """Long the two symbols with the best 20-bar momentum, scaled by trailing volatility."""
    scores = {}
    for symbol, frame in bars.items():
        close = frame["close"]
        if len(close) < LOOKBACK + 1:
            continue
        momentum = close.iloc[-1] / close.iloc[-LOOKBACK - 1] - 1
        vol = close.pct_change().rolling(LOOKBACK).std().iloc[-1]
        trailing = close.iloc[-LOOKBACK:]
        level = trailing.mean() + close.tail(5).max() + np.mean(close.tail(10))
        smooth = close.ewm(span=10).mean().iloc[-1] + close.expanding().max().iloc[-1]
        prior = close.shift(1).iloc[-1] + close.diff().iloc[-1]
        prior += close.to_numpy()[-10:].std() + close.iloc[-21:-1].mean() + sum(close[-3:])
        if vol > 0 and math.isfinite(level + smooth + prior):
            scores[symbol] = momentum / vol
    if not scores:
        return {}
    ranked = pd.Series(scores).rank(ascending=False)
    best = [symbol for symbol, rank in ranked.items() if rank <= 2]
    top = max(scores.values())
    return {symbol: 0.45 for symbol in best if top > -1}
'''


def rules(source: str) -> set[str]:
    return {refusal.rule for refusal in check_strategy(source)}


def test_an_honest_strategy_passes() -> None:
    assert check_strategy(HONEST) == ()


def wrap(body: str, imports: str = "import pandas as pd\nimport numpy as np\n") -> str:
    lines = "\n".join(f"    {line}" for line in body.strip().splitlines())
    return f"{imports}\ndef strategy(bars):\n{lines}\n    return {{}}\n"


PEEKS = {
    "shift(-1)": "c = bars['A']['close']\nnext_close = c.shift(-1).iloc[-2]",
    "shift(periods=-3)": "c = bars['A']['close']\nx = c.shift(periods=-3)",
    "shift(variable)": "c = bars['A']['close']\nk = -1\nx = c.shift(k)",
    "pct_change(-1)": "r = bars['A']['close'].pct_change(-1)",
    "diff(-2)": "for s, df in bars.items():\n    d = df['close'].diff(-2)",
    "full mean": "c = bars['A']['close']\nz = (c.iloc[-1] - c.mean()) / c.std()",
    "full rank": "c = bars['A']['close']\nr = c.rank(pct=True).iloc[-1]",
    "full max": "for s, df in bars.items():\n    hi = df['high'].max()",
    "full quantile": "q = bars['A']['close'].quantile(0.9)",
    "frame mean": "m = bars['A'].mean()",
    "np.std": "s = np.std(bars['A']['close'])",
    "builtin max": "for s, df in bars.items():\n    m = max(df['close'])",
    "all but the last": "m = bars['A']['close'].iloc[:-1].mean()",
    "numpy values": "m = bars['A']['close'].to_numpy().std()",
    "windowed then full": "r = bars['A']['close'].rolling(5).mean()\nm = r.max()",
    "qcut": "b = pd.qcut(bars['A']['close'], 5)",
    "iloc[i + 1]": (
        "c = bars['A']['close']\nfor i in range(len(c) - 1):\n    up = c.iloc[i + 1] > c.iloc[i]"
    ),
    "iloc[i + 1:]": "c = bars['A']['close']\nfor i in range(10):\n    later = c.iloc[i + 1:]",
    "iloc[-0]": "last = bars['A']['close'].iloc[-0]",
    "iloc[len]": "c = bars['A']['close']\nx = c.iloc[len(c)]",
    "iloc[shape]": "df = bars['A']\nx = df.iloc[df.shape[0]]",
    "loc[t + 1 day]": "df = bars['A']\nx = df.loc[df.index[-2] + 1]",
    "bfill": "c = bars['A']['close'].bfill()",
    "fillna bfill": "c = bars['A']['close'].fillna(method='bfill')",
    "interpolate": "c = bars['A']['close'].interpolate()",
    "centred window": "m = bars['A']['close'].rolling(5, center=True).mean()",
    "helper zscore": "pass",
}


@pytest.mark.parametrize("name", sorted(PEEKS))
def test_peeking_code_is_refused(name: str) -> None:
    source = wrap(PEEKS[name])
    if name == "helper zscore":
        source += "\n\ndef zscore(x):\n    return (x - x.mean()) / x.std()\n"
    found = check_strategy(source)
    assert found, f"{name} passed the check"
    assert {r.rule for r in found} <= {
        "negative_shift",
        "full_sample",
        "future_index",
        "backfill",
        "centered_window",
    }, found


ESCAPES = {
    "import os": ("import os", "import"),
    "import socket": ("import socket", "import"),
    "import subprocess": ("import subprocess", "import"),
    "from os import path": ("from os import path", "import"),
    "numpy submodule": ("import numpy.lib", "import"),
    "__import__": ("m = __import__('os')", "io"),
    "getattr builtins": ("f = getattr(__builtins__, 'open')", "io"),
    "open passwd": ("t = open('/etc/passwd').read()", "io"),
    "write a file": ("with open('out.txt', 'w') as f:\n    f.write('x')", "io"),
    "eval": ("eval('1 + 1')", "io"),
    "exec": ("exec('x = 1')", "io"),
    "compile": ("c = compile('1', 'f', 'eval')", "io"),
    "globals": ("g = globals()", "io"),
    "dunder attribute": ("k = ().__class__.__base__.__subclasses__()", "io"),
    "private attribute": ("x = pd._libs", "io"),
    "os via pandas": ("pd.io.common.os.system('id')", "io"),
    "to_csv": ("bars['A'].to_csv('x.csv')", "io"),
    "np.save": ("np.save('x.npy', np.ones(3))", "io"),
    "read_csv": ("d = pd.read_csv('/etc/passwd')", "io"),
    "df.eval": ("bars['A'].eval('close * 2')", "io"),
    "dunder string": ("k = '__class__'", "io"),
    "agg by name": ("bars['A'].agg('to_pickle', 'x.pkl')", "io"),
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_io_and_escapes_are_refused(name: str) -> None:
    body, rule = ESCAPES[name]
    if body.startswith(("import ", "from ")):
        source = f"{body}\n\ndef strategy(bars):\n    return {{}}\n"
    else:
        source = wrap(body)
    assert rule in rules(source), check_strategy(source)


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("def strategy(bars, extra):\n    return {}\n", "entry"),
        ("def other(bars):\n    return {}\n", "entry"),
        ("print('at import')\ndef strategy(bars):\n    return {}\n", "top_level"),
        ("def strategy(bars):\n    return {\n", "syntax"),
        ("async def strategy(bars):\n    return {}\n", "async"),
        ("x = 1\n" * 5000 + "def strategy(bars):\n    return {}\n", "size"),
    ],
)
def test_the_shape_is_checked(source: str, rule: str) -> None:
    assert rule in rules(source)


def test_a_refusal_names_the_line() -> None:
    (refusal,) = check_strategy(wrap("x = bars['A']['close'].shift(-1)"))
    assert refusal.line == 5
    assert "line 5" in str(refusal)
    assert "shift(-1)" in str(refusal)


@given(
    method=st.sampled_from(["shift", "diff", "pct_change"]),
    period=st.integers(-500, 500),
    keyword=st.booleans(),
)
def test_a_period_is_refused_exactly_when_it_is_negative(
    method: str, period: int, keyword: bool
) -> None:
    argument = f"periods={period}" if keyword else str(period)
    found = rules(wrap(f"x = bars['A']['close'].{method}({argument}).iloc[-1]"))
    assert ("negative_shift" in found) == (period < 0)
    assert found <= {"negative_shift"}


@given(window=st.integers(1, 400), stat=st.sampled_from(["mean", "std", "max", "rank", "median"]))
def test_a_trailing_window_passes_and_the_whole_history_does_not(window: int, stat: str) -> None:
    assert rules(wrap(f"x = bars['A']['close'].iloc[-{window}:].{stat}()")) == set()
    assert rules(wrap(f"x = bars['A']['close'].rolling({window}).{stat}().iloc[-1]")) == set()
    assert rules(wrap(f"x = bars['A']['close'].{stat}()")) == {"full_sample"}
