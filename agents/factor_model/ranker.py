"""The factor model's LightGBM ranker: trained on a `TrainingSet`, deterministic for its seed.

This module owns the one place openbell calls LightGBM. The model is LightGBM's `lambdarank`
objective over each session's rows (a query group), learning the quantile grades of the forward
returns; its parameters are fixed here, small for a universe of tens of stocks, and every source
of nondeterminism is pinned: one thread, `deterministic`, row-wise histograms and the seed for
bagging and feature sampling. The same training set and seed give the same scores, to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import lightgbm
import numpy as np

from openbell.agents.factor_model.features import FEATURES, Matrix, TrainingSet

#: Boosting rounds of one training.
ROUNDS: Final = 60
#: The fewest rows a training set needs for a model (fewer: no model, no trades).
MIN_ROWS: Final = 100


def parameters(seed: int) -> dict[str, Any]:
    """LightGBM's parameters for a model seeded with `seed`."""
    return {
        "objective": "lambdarank",
        "learning_rate": 0.05,
        "num_leaves": 15,
        "max_depth": 4,
        "min_data_in_leaf": 20,
        "feature_fraction": 0.8,
        "bagging_fraction": 0.8,
        "bagging_freq": 1,
        "lambda_l2": 1.0,
        "seed": seed,
        "deterministic": True,
        "force_row_wise": True,
        "num_threads": 1,
        "verbosity": -1,
    }


@dataclass(frozen=True, slots=True)
class Ranker:
    """A trained model: `score` ranks feature rows (higher: better expected forward return)."""

    booster: lightgbm.Booster
    trained_on: TrainingSet

    def score(self, values: Matrix) -> Matrix:
        """The model's score of each row of `values` (columns in `FEATURES` order)."""
        if values.shape[0] == 0:
            return np.zeros(0, dtype=np.float64)
        return np.asarray(self.booster.predict(values, num_threads=1), dtype=np.float64)


def train(found: TrainingSet, seed: int) -> Ranker | None:
    """A ranker trained on `found` with `seed`, or None when it has fewer than `MIN_ROWS` rows."""
    if found.rows < MIN_ROWS:
        return None
    data = lightgbm.Dataset(
        found.values,
        label=found.grades,
        group=list(found.groups),
        feature_name=list(FEATURES),
        params={"verbosity": -1, "seed": seed},
    )
    booster = lightgbm.train(parameters(seed), data, num_boost_round=ROUNDS)
    return Ranker(booster=booster, trained_on=found)
