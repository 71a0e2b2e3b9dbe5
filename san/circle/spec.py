"""Names and config helpers of the circle experiment (the paper's Fig. 3), free of torch.

The cross-checks of the ``circle`` config section that its JSON schema cannot express, the config slice of one
training, and how the seeds of the sweep are grouped into jobs. The workflow runs them while it parses the rules, so
this module must stay importable without torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from san.core.config import ConfigError


def check_config(config: Mapping[str, Any], schemas: Path) -> None:
    """Cross-checks of the ``circle`` config section that its schema cannot express; raises :class:`ConfigError`
    naming the key."""
    circle = config["circle"]
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


def seed_chunks(seeds: Sequence[int], per_job: int) -> list[list[int]]:
    """The seeds of the sweep in groups of ``per_job`` (the last group may be shorter): one job trains one group, so
    a job's start-up (importing torch) is paid once per group instead of once per seed."""
    seeds = list(seeds)
    return [seeds[i : i + per_job] for i in range(0, len(seeds), per_job)]


def chunk_label(seeds: Sequence[int]) -> str:
    """File-name label of a group of seeds, e.g. ``0_1_2`` (read back by :func:`chunk_seeds`)."""
    return "_".join(str(int(s)) for s in seeds)


def chunk_seeds(label: str) -> list[int]:
    """The seeds of a group from its label (:func:`chunk_label`)."""
    return [int(s) for s in label.split("_")]
