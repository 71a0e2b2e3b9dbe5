"""Names and constants of the path-effectiveness experiment (the paper's Sec. 2.1 and Fig. 4), free of torch.

The one place that names the tasks, their figure titles, the path encoding and the token label that carries no
target; the JSON schema (``workflow/schemas/paths.schema.yaml``), the task generators, the figures and the report
read them from here (a test keeps the schema's task names in step). The workflow imports this module while it
parses the rules, so it must stay importable without torch.

Paths: expanding ``X_l = X_{l-1} + SA_l(X_{l-1})`` layer by layer writes a SAN with skip connections as a sum over
*paths*; at each layer a path takes the skip or one of the H heads, and its *length* k is the number of layers
where it takes a head: ``C(L, k) H^k`` paths of length k out of ``(H+1)^L`` (Sec. 2.1).
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from jsonschema import Draft202012Validator

from san.core.config import ConfigError, default_filling, describe_error, load_yaml

#: the tasks that :func:`san.paths.tasks.make_task` builds (Fig. 4), and their panel titles
TASK_KINDS = ("sorting", "convex_hull", "memorization")
TASK_TITLES = {"sorting": "Sorting", "convex_hull": "Convex hull", "memorization": "Memorization"}
#: label of a token without a target (padding, special tokens): ignored by the loss and the accuracy
IGNORE = -100
#: path encoding: one entry per layer, a head index or SKIP; PAD rows stand for "no path" in padded sets
SKIP = -1
PAD = -2


def path_counts(n_layers: int, n_heads: int) -> list[int]:
    """Exact number of paths of each length k = 0..L: ``C(L, k) H^k`` (they sum to ``(H+1)^L``)."""
    return [math.comb(n_layers, k) * n_heads**k for k in range(n_layers + 1)]


def path_length_shares(n_layers: int, n_heads: int) -> np.ndarray:
    """Share of paths of each length, ``C(L, k) H^k / (H+1)^L`` (a Binomial(L, H/(H+1)) pmf), exact to float64."""
    total = (n_heads + 1) ** n_layers
    return np.array([float(Fraction(c, total)) for c in path_counts(n_layers, n_heads)])


def _merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with the keys of ``changes`` replaced, recursing into nested mappings (a shallow result: copy it
    before changing it)."""
    out = dict(base)
    for key, value in changes.items():
        out[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def _derived_slice(paths: dict[str, Any], name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The slice of derived task ``name``: its task's section with the derived task's keys replaced, checked against
    the task's part of the paths ``schema``; a :class:`ConfigError` names the offending ``paths.derived_tasks`` key."""
    spec = paths["derived_tasks"][name]
    kind = spec["task"]
    merged = copy.deepcopy(_merge(paths[kind], {k: v for k, v in spec.items() if k not in ("task", "title")}))
    validator = default_filling(Draft202012Validator)({**schema["properties"][kind], "$defs": schema.get("$defs", {})})
    errors = sorted(validator.iter_errors(merged), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        lines = "\n".join(f"  - {describe_error(e, f'paths.derived_tasks.{name}')}" for e in errors)
        raise ConfigError(f"invalid derived task {name!r} of task {kind!r} ({len(errors)} problem(s)):\n{lines}")
    return {"task": kind, "name": name, **merged}


def task_slices(paths: dict[str, Any], schema_path: str | Path) -> dict[str, dict[str, Any]]:
    """The config slice of every task in ``paths.tasks`` (a schema-validated ``paths`` section), by name.

    A task named ``sorting``, ``convex_hull`` or ``memorization`` is its own section plus ``task: <name>``. A
    derived task (``paths.derived_tasks.<name>``) is the section of its ``task`` with the derived task's ``seed``,
    ``data``, ``model`` and ``train`` keys replaced, validated against that task's schema (``schema_path``: the paths
    schema file), plus ``task: <its task>`` and ``name: <name>`` (its ``title`` is the figures' concern, not the jobs'
    that train and evaluate it, so it is left out). Every defined derived task is checked, listed or not. Raises
    :class:`ConfigError` naming the key for an undefined task name or a value the task's schema rejects.
    """
    schema = load_yaml(Path(schema_path))
    derived = {name: _derived_slice(paths, name, schema) for name in paths.get("derived_tasks") or {}}
    slices: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(paths["tasks"]):
        if name in TASK_KINDS:
            slices[name] = {"task": name, **paths[name]}
        elif name in derived:
            slices[name] = derived[name]
        else:
            raise ConfigError(
                f"config key 'paths.tasks.{i}': unknown task {name!r}; expected one of {list(TASK_KINDS)} or a "
                f"derived task defined under 'paths.derived_tasks' (defined: {sorted(derived)})"
            )
    return slices


def check_config(config: dict[str, Any], schemas: Path) -> dict[str, dict[str, Any]]:
    """The cross-checks of the ``paths`` section: every listed task defined and every derived task valid against its
    task's schema (``schemas``: the workflow's schema folder); returns the config slice of every task
    (:func:`task_slices`), which the rules plan the jobs from."""
    return task_slices(config["paths"], schemas / "paths.schema.yaml")


def task_architectures(slices: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The SANs of the tasks (``slices`` from :func:`task_slices`) for the path-length distribution: one entry
    ``{name: "SAN (task, ...)", layers, heads}`` per distinct depth and width, naming every task that uses it."""
    shapes: dict[tuple[int, int], list[str]] = {}
    for name, task in slices.items():
        shapes.setdefault((task["model"]["n_layers"], task["model"]["n_heads"]), []).append(name)
    return [{"name": f"SAN ({', '.join(names)})", "layers": L, "heads": H} for (L, H), names in shapes.items()]


def sequences_and_tokens(task: dict[str, Any]) -> tuple[int, int, int]:
    """Training sequences, evaluation sequences and tokens per sequence of a task slice (:func:`task_slices`)."""
    data = task["data"]
    if task["task"] == "memorization":  # evaluated on its training sequences
        return data["n_sequences"], data["n_sequences"], data["seq_len"]
    tokens = data["n_points"] if task["task"] == "convex_hull" else data["seq_len"]
    return data["n_train"], data["n_eval"], tokens


def training_macs(task: dict[str, Any]) -> float:
    """Multiply-adds of a task's training over all its seeds, from its config slice alone (no torch): per token and
    layer a SAN of width d on n tokens costs about ``4 d^2 + 2 n d`` forward (the four projections and the two
    attention products), three times that with the backward pass."""
    n_train, _, n = sequences_and_tokens(task)
    L, d = task["model"]["n_layers"], task["model"]["dim"]
    return float(len(task["seeds"]) * 3 * task["train"]["epochs"] * n_train * n * L * (4 * d * d + 2 * n * d))


def evaluation_macs(task: dict[str, Any], n_paths: list[int], n_repeats: int) -> float:
    """Multiply-adds of a task's path evaluation over all its seeds (every path of every set, about ``L`` head
    applications each)."""
    _, n_eval, n = sequences_and_tokens(task)
    L, d = task["model"]["n_layers"], task["model"]["dim"]
    return float(len(task["seeds"]) * n_eval * n * (L + 1) * n_repeats * sum(n_paths) * (4 * d * d + 2 * n * d))


def chain_cost(task: dict[str, Any], n_paths: list[int], n_repeats: int) -> float:
    """Multiply-adds of a task's training and path evaluation. The scheduler starts the costliest chains first (the
    rules' ``priority``), so the longest one does not end alone."""
    return training_macs(task) + evaluation_macs(task, n_paths, n_repeats)


def priorities(slices: dict[str, dict[str, Any]], n_paths: list[int], n_repeats: int) -> dict[str, int]:
    """Scheduling priority of every task's training and evaluation: its rank by :func:`chain_cost` (the costliest
    chain gets the highest), so a config that makes a task bigger moves it forward."""
    order = sorted(slices, key=lambda name: chain_cost(slices[name], n_paths, n_repeats))
    return {name: rank + 1 for rank, name in enumerate(order)}
