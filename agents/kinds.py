"""The names of the agent kinds, as the config and the ledger spell them (`accounts.kind`).

One module without imports, so that what only tells kinds apart (the reports, the leaderboard,
the cycle runner) need not import the agents themselves: the LLM client, the MCP hub, the
strategy-code sandbox. Each agent module takes its kind from here.
"""

from __future__ import annotations

from typing import Final

#: The baselines every market can run as they are (`agents.baselines`).
BASELINE_KINDS: Final[tuple[str, ...]] = (
    "buy_and_hold",
    "equal_weight",
    "sma_crossover",
    "cash",
    "random",
)
#: The pair-neutral baseline's kind: built like the others, but it needs pairs (and an account
#: allowed to short), so it is not among the `BASELINE_KINDS` every market can run as they are.
PAIR_NEUTRAL: Final = "pair_neutral"
#: An LLM agent (`agents.llm.agent`).
LLM_KIND: Final = "llm"
#: An outside agent working the ledger through `/mcp` (`agents.outside.agent`).
MCP_KIND: Final = "mcp"
#: An outside agent run as a command, one process a cycle (`agents.outside.command`).
COMMAND_KIND: Final = "command"
#: An agent whose strategy is Python code written by a model (`agents.strategy_code.agent`).
STRATEGY_CODE_KIND: Final = "strategy_code"
#: A rating agent: a report with ratings a cycle, traded as weights (`agents.rating.agent`).
RATING_KIND: Final = "rating"
#: The tool name of the trace row that stores a rating agent's report of a cycle.
RATINGS_TOOL: Final = "ratings"
