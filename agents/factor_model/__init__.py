"""The factor-model baseline (KTD-Fin's supervised factor models): point-in-time Alpha158-style
features (`features`), a LightGBM ranker (`ranker`) and the top-k agent (`agent`)."""

from __future__ import annotations

from openbell.agents.factor_model.agent import FactorModel

__all__ = ["FactorModel"]
