"""Which model answered: the identity a response reports, and a watch for it changing.

This module owns `ModelIdentity` (the `model` a chat-completions response names, its
`system_fingerprint` and the provider's revision headers, as `completion.Completion` carries them)
and `ModelWatch`, one LLM agent's last identity per account. A provider's alias can move to other
weights in the middle of a run; the watch sees each exchange's identity and says when it differs
from the account's previous one, so the cycle records a `model_changed` trace row and logs it. The
watch holds what this process saw; what the ledger shows (`store.queries.reported_models_of`) is
read from every stored exchange, so a change across a restart is shown too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelIdentity:
    """The identity one response reported; each part None when it reported none."""

    model: str | None
    fingerprint: str | None
    revision: str | None

    def describe(self) -> str:
        """One line: the model, its fingerprint and revision as reported."""
        parts = [self.model or "(no model named)"]
        if self.fingerprint is not None:
            parts.append(f"fingerprint {self.fingerprint}")
        if self.revision is not None:
            parts.append(self.revision)
        return ", ".join(parts)


class ModelWatch:
    """One agent's last reported identity per account; see the module docstring."""

    def __init__(self) -> None:
        self._last: dict[int, ModelIdentity] = {}

    def observe(self, account_id: int, identity: ModelIdentity) -> ModelIdentity | None:
        """Note `identity` as the account's latest; the previous one when it differs (a change),
        else None (the same, or the first seen)."""
        previous = self._last.get(account_id)
        self._last[account_id] = identity
        return previous if previous is not None and previous != identity else None
