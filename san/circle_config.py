"""Cross-checks of the ``circle`` config section (the paper's Fig. 3 experiment) that its JSON schema cannot express.

Kept free of torch so that the workflow can run them while it parses the rules, at no import cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from san.config import ConfigError


def check_config(circle: Mapping) -> None:
    """Cross-checks of the ``circle`` config section that its schema cannot express; raises :class:`ConfigError`
    naming the key."""
    n_heads = circle["model"]["n_heads"]
    for i, d in enumerate(circle["hidden_dims"]):
        if d % n_heads:
            raise ConfigError(
                f"config key 'circle.hidden_dims.{i}': hidden dimension {d} is not divisible by "
                f"circle.model.n_heads = {n_heads}"
            )
    steps = circle["rollout"]["steps"]
    for i, s in enumerate(circle["report"]["steps"]):
        if s > steps:
            raise ConfigError(f"config key 'circle.report.steps.{i}': step {s} exceeds circle.rollout.steps = {steps}")
    seed = circle["plot"]["seed"]
    if seed is not None and seed not in circle["seeds"]:
        raise ConfigError(f"config key 'circle.plot.seed': seed {seed} is not one of circle.seeds {circle['seeds']}")


def run_slice(circle: Mapping[str, Any], variant: str) -> dict[str, Any]:
    """The config slice that determines one training of ``variant``: its switches and the data, model, training and
    rollout keys. The MLP width is left out for a variant without an MLP, so editing it reruns only the MLP runs."""
    spec = circle["variants"][variant]
    model = dict(circle["model"])
    if not spec["mlp"]:
        model.pop("mlp_ratio", None)
    return {
        "variant": dict(spec),
        "data": circle["data"],
        "model": model,
        "train": circle["train"],
        "rollout": circle["rollout"],
    }
