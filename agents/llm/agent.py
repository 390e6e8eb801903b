"""`LlmAgent`: a model on an OpenAI-compatible endpoint, trading through the toolbox.

This module owns the agent object the arena enrolls (`kind = "llm"`): it holds the chat client,
the per-cycle budgets, the model's prices, its dollar caps (`spend_caps`), a watch on the model's
reported identity (`model_watch`), the factories of its decision mode (`PromptBuilder`) and
masking (`Masker`) and the operator's instructions, and at each cycle opens a connection, builds
a fresh builder, masker and `Recorder`, and runs the loop (`run.CycleRun`). What a cycle did is
in the ledger (orders, fills), its trace and its usage (tokens, latency, cost, parse failures,
invalid tool calls), all written through `ctx.journal`. A transient endpoint failure or a bad
key is recorded in the trace and raised for the cycle runner to map (`client.py` says which is
which). With `on_model_change = "split"`, an answer under another model identity ends the cycle
with `ModelSplit`, for the runner to close the account and open a new one. A re-run from
recorded answers (`answers.py`) gives the agent the recorded ledger's masking keys
(`recorded_keys`), so a masked account shows its model what the recorded one did.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Literal

from openbell.agents.kinds import LLM_KIND
from openbell.agents.llm.answers import RecordedKeys
from openbell.agents.llm.client import ChatClient
from openbell.agents.llm.hooks import IdentityMasker, Masker, OpenResearchPrompt, PromptBuilder
from openbell.agents.llm.model_watch import ModelWatch
from openbell.agents.llm.recorder import Prices, Recorder
from openbell.agents.llm.run import Budgets, CycleRun, StopReason
from openbell.agents.llm.spend_caps import WARN_SHARE, SpendCaps, SpendGuard
from openbell.agents.protocol import DecisionContext
from openbell.markets.errors import OpenbellError
from openbell.store.masking_keys import MaskingKey

PromptFactory = Callable[[DecisionContext], PromptBuilder]
#: What a change of the model's reported identity does: `flag` the account, or `split` it (close
#: it and go on in a new account: `markets.errors.ModelSplit`).
OnModelChange = Literal["flag", "split"]
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
        caps: SpendCaps | None = None,
        prompt: PromptFactory = _open_research,
        masker: MaskerFactory = _bright,
        monotonic: Callable[[], float] = time.monotonic,
        instructions: str = "",
        recorded_keys: Mapping[tuple[str, str], MaskingKey] | None = None,
        on_model_change: OnModelChange = "flag",
    ) -> None:
        if not name:
            raise ValueError("an agent needs a name")
        if caps is not None and caps.any and prices is None:
            raise ValueError(f"{name}: a dollar cap needs the model's prices (unpriced model)")
        self._name = name
        self._client = client
        self._budgets = budgets if budgets is not None else Budgets()
        self._prices = prices
        self._prompt = prompt
        self._masker = masker
        self._instructions = instructions
        self._monotonic = monotonic
        self._watch = ModelWatch()
        self._recorded_keys = recorded_keys
        self._on_model_change = on_model_change
        self._caps = caps if caps is not None and caps.any else None
        self._guard = None if self._caps is None else SpendGuard(self._caps)
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
    def caps(self) -> SpendCaps | None:
        """The dollar caps (None: none)."""
        return self._caps

    @property
    def budgets(self) -> Budgets:
        """The per-cycle budgets."""
        return self._budgets

    async def decide(self, ctx: DecisionContext) -> None:
        """Run one cycle: prompts, then model turns and tool calls until it ends. With dollar caps,
        a spent window skips the cycle first (`CycleSkipped`, `spend_caps.BUDGET_EXHAUSTED`)."""
        if self._recorded_keys is not None and ctx.masking_keys is not None:
            recorded = self._recorded_keys.get((ctx.agent_name, ctx.market))
            ctx = dataclasses.replace(ctx, masking_keys=RecordedKeys(ctx.masking_keys, recorded))
        notes: list[str] = []
        if self._guard is not None:
            self._guard.check(ctx, notes.append)
        recorder = Recorder(
            ctx,
            redact=self._client.redact,
            prices=self._prices,
            monotonic=self._monotonic,
            watch=self._watch,
        )
        self.last_stop = None
        for note in notes:
            recorder.trace("budget", content=f"over {WARN_SHARE:.0%} of a dollar cap: {note}")
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
                    instructions=self._instructions,
                    split_on_model_change=self._on_model_change == "split",
                )
                self.last_stop = await run.run()
        except OpenbellError as exc:
            recorder.trace("error", content=f"{type(exc).__name__}: {exc}")
            raise
        finally:  # also when the cycle's timeout cancels it: the trace is whole on return
            if self._guard is not None:
                self._guard.spent(ctx, recorder.usage.cost or Decimal(0))
            recorder.flush(now=True)
