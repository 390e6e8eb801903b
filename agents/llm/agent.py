"""`LlmAgent`: a model on an OpenAI-compatible endpoint, trading through the toolbox.

This module owns the agent object the arena enrolls (`kind = "llm"`): it holds the chat client,
the per-cycle budgets, the model's prices and the factories of its decision mode (`PromptBuilder`)
and masking (`Masker`), and at each cycle opens a connection, builds a fresh builder, masker and
`Recorder`, and runs the loop (`run.CycleRun`). What a cycle did is in the ledger (orders, fills),
its trace and its usage (tokens, latency, cost, parse failures, invalid tool calls), all written
through `ctx.journal`. A transient endpoint failure or a bad key is recorded in the trace and
raised for the cycle runner to map (`client.py` says which is which).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from openbell.agents.kinds import LLM_KIND
from openbell.agents.llm.client import ChatClient
from openbell.agents.llm.hooks import IdentityMasker, Masker, OpenResearchPrompt, PromptBuilder
from openbell.agents.llm.recorder import Prices, Recorder
from openbell.agents.llm.run import Budgets, CycleRun, StopReason
from openbell.agents.protocol import DecisionContext
from openbell.markets.errors import OpenbellError

PromptFactory = Callable[[DecisionContext], PromptBuilder]
MaskerFactory = Callable[[DecisionContext], Masker]


def _open_research(ctx: DecisionContext) -> PromptBuilder:
    return OpenResearchPrompt()


def _bright(ctx: DecisionContext) -> Masker:
    return IdentityMasker()


class LlmAgent:
    """An LLM agent; see the module docstring. `last_stop` is why its latest cycle ended."""

    def __init__(
        self,
        *,
        name: str,
        client: ChatClient,
        budgets: Budgets | None = None,
        prices: Prices | None = None,
        prompt: PromptFactory = _open_research,
        masker: MaskerFactory = _bright,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not name:
            raise ValueError("an agent needs a name")
        self._name = name
        self._client = client
        self._budgets = budgets if budgets is not None else Budgets()
        self._prices = prices
        self._prompt = prompt
        self._masker = masker
        self._monotonic = monotonic
        self.last_stop: StopReason | None = None

    @property
    def name(self) -> str:
        """The agent's configured name."""
        return self._name

    @property
    def kind(self) -> str:
        """Always `llm`."""
        return LLM_KIND

    @property
    def budgets(self) -> Budgets:
        """The per-cycle budgets."""
        return self._budgets

    async def decide(self, ctx: DecisionContext) -> None:
        """Run one cycle: prompts, then model turns and tool calls until it ends."""
        recorder = Recorder(
            ctx, redact=self._client.redact, prices=self._prices, monotonic=self._monotonic
        )
        self.last_stop = None
        try:
            async with self._client.connect() as chat:
                run = CycleRun(
                    ctx=ctx,
                    chat=chat,
                    builder=self._prompt(ctx),
                    masker=self._masker(ctx),
                    budgets=self._budgets,
                    recorder=recorder,
                    monotonic=self._monotonic,
                )
                self.last_stop = await run.run()
        except OpenbellError as exc:
            recorder.trace("error", content=f"{type(exc).__name__}: {exc}")
            raise
        finally:  # also when the cycle's timeout cancels it: the trace is whole on return
            recorder.flush(now=True)
