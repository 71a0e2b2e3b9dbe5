"""Chained attention along paths (the paper's appendix): products of attention matrices approach rank 1.

Along a path that takes one head in each of ``depth`` distinct layers, the product ``P_{h_d} ... P_{h_1}`` of the
heads' attention matrices of the unmodified model is measured by its relative distance to the best rank-1 matrix
and by the relative residual ``||res(P)||_{1,inf} / ||P||_{1,inf}`` (Sec. 2.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr

from san.core.device import resolve_dtype
from san.core.storage import describe
from san.measures.residual import rank1_relative_residual, relative_residual
from san.models.folders import read_manifest
from san.models.load import load_model
from san.rank_collapse.experiment import VARIABLES, attention_matrices


def sample_attention_paths(
    n_layers: int, n_heads: int, n_sequences: int, depth: int, n_paths: int, rng: np.random.Generator
):
    """``n_paths`` paths of ``depth`` layers: sorted distinct layers, a head per layer, and a sequence each."""
    layers = np.stack([np.sort(rng.choice(n_layers, size=depth, replace=False)) for _ in range(n_paths)])
    heads = rng.integers(n_heads, size=(n_paths, depth))
    seqs = rng.integers(n_sequences, size=n_paths)
    return layers, heads, seqs


def attention_products(attn: torch.Tensor, layers: np.ndarray, heads: np.ndarray, seqs: np.ndarray) -> torch.Tensor:
    """Products ``P_{h_d} ... P_{h_1}`` of attention matrices along paths (later layers multiply on the left)."""
    seq_t = torch.as_tensor(seqs)
    prod = attn[layers[:, 0], seq_t, heads[:, 0]]
    for j in range(1, layers.shape[1]):
        prod = attn[layers[:, j], seq_t, heads[:, j]] @ prod
    return prod


def attention_product_residuals(attn: torch.Tensor, n_paths: int, seed: int) -> dict[str, np.ndarray]:
    """Rank-1 residual of attention products along ``n_paths`` random paths of every depth 1..L.

    Returns arrays of shape ``(depth, path)``: ``rank1`` (relative Frobenius residual of the best rank-1
    approximation), ``uniformity`` (relative ``||res(P)||_{1,inf}``), and the sampled ``sequence`` per path.
    """
    n_layers, n_seq, n_heads = attn.shape[:3]
    rng = np.random.default_rng(seed)
    rank1, unif, seq_idx = [], [], []
    for depth in range(1, n_layers + 1):
        layers, heads, seqs = sample_attention_paths(n_layers, n_heads, n_seq, depth, n_paths, rng)
        prod = attention_products(attn, layers, heads, seqs)
        rank1.append(rank1_relative_residual(prod).numpy())
        unif.append(relative_residual(prod).numpy())
        seq_idx.append(seqs)
    return {"rank1": np.stack(rank1), "uniformity": np.stack(unif), "sequence": np.stack(seq_idx)}


def run(
    family: str,
    models: Mapping[str, str | Path],
    inputs: Mapping[str, xr.Dataset],
    settings: Mapping[str, Any],
    batch_size: int,
    device: torch.device | str = "cpu",
    log: Any = None,
    budget_mb: float | None = None,
    budget_key: str = "compute.attention_products.memory_budget_mb",
) -> xr.Dataset:
    """The appendix figure's data for one model: rank-1 residuals of attention products along sampled paths of
    every depth, per weight set. ``models`` and ``inputs`` as in :func:`san.rank_collapse.experiment.run`;
    ``settings`` is the ``attention_products`` config slice (``n_paths``, ``n_sequences``, ``seed``, ``dtype``);
    ``budget_mb`` the job's memory budget, beyond which blocks are streamed (:mod:`san.models.stream`)."""
    dtype = resolve_dtype(settings["dtype"])
    results, manifests = [], {}
    for weights, folder in models.items():
        ids = torch.as_tensor(inputs[weights]["input_ids"].values)[: settings["n_sequences"]]
        if budget_mb is None:
            model = load_model(folder, family, dtype).to(device)
        else:  # placed on the device as it loads: the streamed blocks stay on the meta device until used
            model = load_model(folder, family, dtype, device, budget_mb, budget_key)
        attn = attention_matrices(model, ids, batch_size)
        results.append(attention_product_residuals(attn, settings["n_paths"], settings["seed"]))
        manifests[weights] = read_manifest(folder)
        if log is not None:
            log.info("%s: median rank-1 residual by depth %s", weights, np.median(results[-1]["rank1"], axis=1))
        del model, attn
    dims = ("weights", "depth", "path")
    ds = xr.Dataset(
        {
            "rank1_residual": (dims, np.stack([r["rank1"] for r in results])),
            "uniformity_residual": (dims, np.stack([r["uniformity"] for r in results])),
            "sequence": (dims, np.stack([r["sequence"] for r in results])),
        },
        coords={
            "weights": ("weights", list(models)),
            "depth": ("depth", np.arange(1, results[0]["rank1"].shape[0] + 1)),
            "path": ("path", np.arange(settings["n_paths"])),
        },
        attrs={
            "title": "san: rank-1 residual of attention products along paths (Dong et al. 2021, appendix)",
            "manifests": manifests,
        },
    )
    return describe(ds, VARIABLES)
