"""A minimal configuration of the whole workflow (seconds per job) for the SLURM and incremental-rerun tests.

Every experiment section present in config.yaml is shrunk here; a new experiment gets its own entry in ``SHRINK``
(and its rules then take part in both tests without further changes).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

TINY_MODEL = "tiny-bert"

# A 2-layer BERT of hidden size 32, randomly initialised from its config (no download, no pretrained weights).
TINY_MODELS = {
    TINY_MODEL: {
        "family": "bert",
        "init": {
            "seed": 0,
            "config": {
                "hidden_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "intermediate_size": 64,
                "hidden_act": "gelu",
                "max_position_embeddings": 64,
                "type_vocab_size": 2,
            },
        },
        "pretrained": None,
    }
}


def _text(section: dict) -> None:
    section.update(n_sequences=4, seq_len=16)


def _rank_collapse(section: dict) -> None:
    section.update(models=[TINY_MODEL], batch_size=4, threads=1)


def _path_products(section: dict) -> None:
    section.update(n_paths=5)


def _circle(section: dict) -> None:
    variants = section.get("variants") or {}
    keep = [name for name in ("SAN", "transformer") if name in variants] or list(variants)[:2]
    section["variants"] = {name: variants[name] for name in keep}
    section.update(hidden_dims=[8], seeds=[0], threads=1)
    section.setdefault("data", {})["n_points"] = 8
    section.setdefault("train", {}).update(epochs=2, batch_size=4)
    section.setdefault("rollout", {})["steps"] = 10
    section.setdefault("report", {})["steps"] = [5, 10]
    if "plot" in section:
        section["plot"]["seed"] = None


def _paths(section: dict) -> None:
    # One task (sorting): one training and one evaluation job; each task's section shrunk all the same.
    section["tasks"] = section["tasks"][:1]
    for task in ("sorting", "convex_hull", "memorization"):
        if task not in section:
            continue
        section[task]["model"].update(n_layers=2, n_heads=2, dim=8)
        section[task]["train"].update(epochs=2, batch_size=8)
        data = section[task]["data"]
        data.update(
            {k: v for k, v in {"n_train": 32, "n_eval": 16, "n_sequences": 6, "seq_len": 16}.items() if k in data}
        )
    section["evaluation"].update(n_paths=[2, 3], n_repeats=2, memory_mb=16)
    section.update(train_threads=1, eval_threads=1)


def _figures(section: dict) -> None:
    section.update(formats=["png"], dpi=40)


# Shrinkers of the config sections; sections absent from config.yaml are skipped.
SHRINK: dict[str, Callable[[dict], None]] = {
    "text": _text,
    "rank_collapse": _rank_collapse,
    "path_products": _path_products,
    "circle": _circle,
    "paths": _paths,
    "figures": _figures,
}


def minimal_config(default: dict) -> dict:
    """``default`` (the parsed config.yaml) shrunk to one tiny model and minimal sweeps; the input is not changed."""
    cfg = copy.deepcopy(default)
    cfg["models"] = copy.deepcopy(TINY_MODELS)
    for key, shrink in SHRINK.items():
        if isinstance(cfg.get(key), dict):
            shrink(cfg[key])
    return cfg
