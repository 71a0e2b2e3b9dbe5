"""One sweep of the propagation study: every grid point simulated for every seed, plus the theory curves.

``run`` returns an xarray Dataset whose dimensions are the sweep's grid keys (in config order), ``layer`` and
``seed``; a script only feeds it and writes it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr

from san.core.storage import Variable, describe, structured_attr
from san.propagation import theory
from san.propagation.simulator import resolved_width, simulate
from san.propagation.spec import INV_SQRT_DEPTH, PARAMS, branch_weight, grid_points, point_params

#: the measured and predicted quantities, per grid point, layer (and seed, except the recursion)
MEASURES = {
    "cosine": Variable("mean pairwise cosine similarity between tokens", "1"),
    "relative_residual": Variable("relative residual ||res(X_l)||_{1,inf} / ||X_l||_{1,inf}", "1"),
    "stable_rank": Variable("stable rank sum_i s_i^2 / s_1^2 of X_l", "1"),
    "stable_rank_gram": Variable("stable rank of the Gram matrix X_l X_l^T (sum s_i^4 / s_1^4)", "1"),
    "attention_overlap": Variable("attention participation mean_i sum_j A_ij^2 of layer l", "1"),
    "theory_cosine": Variable("Giorlandino & Goldt recursion: token correlation (post-LN only)", "1"),
    "theory_overlap": Variable(
        "REM participation predicted from the measured input correlation of layer l (post-LN)", "1"
    ),
}
#: long names of the grid keys (the dimensions a sweep may have)
PARAM_NAMES = {
    "residual": "residual scaling (skip weight a, branch weight b)",
    "mlp": "MLP sub-block (1) or none (0)",
    "norm": "normalisation",
    "mask": "attention mask",
    "window": "sliding-window half-width w",
    "beta": "attention inverse temperature beta (logit std / sqrt(log T))",
    "centred": "centred attention A - 11^T/T (1) or A (0)",
    "seq_len": "sequence length T",
    "width": "model width d",
    "width_ratio": "width / sequence length",
    "heads": "attention heads H",
    "input": "input tokens",
    "input_correlation": "input token correlation",
    "var_v": "value weight variance x d",
    "var_b": "bias variance",
    "var_w": "MLP weight variance x fan-in",
    "mlp_ratio": "MLP hidden width / d",
}
#: long_name and units of every variable and coordinate of a sweep result
VARIABLES = {
    **MEASURES,
    **{name: Variable(long_name, "1") for name, long_name in PARAM_NAMES.items()},
    "layer": Variable("layer (0: input)", "1"),
    "seed": Variable("seed of weights and input", "1"),
    "resolved_width": Variable("model width d used", "1"),
}


def _theory(p: Mapping[str, Any], residual: Mapping[str, Any], depth: int, cosine: np.ndarray) -> tuple:
    """The G&G recursion from the measured mean input correlation, and the REM participation predicted at each
    layer from that layer's measured input correlation (per seed); NaN unless post-LN with a full mask."""
    nan_curve = np.full(depth + 1, np.nan)
    if p["norm"] != "post_ln" or p["mask"] != "full" or p["centred"]:
        return nan_curve, np.full_like(cosine, np.nan)
    block = {
        "var_v": p["var_v"],
        "var_b": p["var_b"],
        "var_w": p["var_w"],
        "skip": float(residual["skip"]),
        "branch": branch_weight(residual["branch"], depth),
        "mlp": bool(p["mlp"]),
    }
    curve = theory.recursion(float(cosine[:, 0].mean()), p["beta"], depth, **block)
    overlap = np.stack([theory.overlap_curve(c, p["beta"]) for c in cosine])
    return curve, overlap


def _simulate_grid(
    sweep_name: str, sweep_config: Mapping[str, Any], device: torch.device | str, prose_embeddings, log
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every measure of :data:`MEASURES` at every grid point, ``(*grid, layer, seed)`` (the recursion without
    ``seed``), and the model width each point used."""
    grid = dict(sweep_config.get("grid", {}))
    depth, seeds = int(sweep_config["depth"]), [int(s) for s in sweep_config["seeds"]]
    residuals = sweep_config["residuals"]
    shape = tuple(len(v) for v in grid.values())
    n_layers, n_seeds = depth + 1, len(seeds)
    data = {k: np.full((*shape, n_layers, n_seeds), np.nan) for k in MEASURES if k != "theory_cosine"}
    data["theory_cosine"] = np.full((*shape, n_layers), np.nan)
    widths = np.zeros(shape, dtype=int)
    for flat, point in enumerate(grid_points(sweep_config)):
        idx = np.unravel_index(flat, shape) if shape else ()
        p = point_params(sweep_config, point)
        residual = residuals[p["residual"]]
        res = simulate(p, residual, depth, seeds, device, prose_embeddings)
        for k, v in res.items():
            data[k][idx] = v.T
        curve, overlap = _theory(p, residual, depth, res["cosine"])
        data["theory_cosine"][idx] = curve
        data["theory_overlap"][idx] = overlap.T
        widths[idx] = resolved_width(p, prose_embeddings)
        if log is not None:
            log.info(
                "%s %s: cosine %.4f -> %.4f", sweep_name, point, res["cosine"][:, 0].mean(), res["cosine"][:, -1].mean()
            )
    return data, widths


def run(
    sweep_name: str,
    sweep_config: Mapping[str, Any],
    device: torch.device | str = "cpu",
    prose_embeddings: torch.Tensor | None = None,
    log=None,
) -> xr.Dataset:
    """Simulate every point of one sweep (``sweep_config``: ``grid``, ``fixed``, ``depth``, ``seeds`` and the
    ``residuals`` table) on ``device``; ``prose_embeddings`` ``(n, T, d)`` feeds points with input ``prose``."""
    grid = dict(sweep_config.get("grid", {}))
    depth, seeds = int(sweep_config["depth"]), [int(s) for s in sweep_config["seeds"]]
    start = time.process_time()
    data, widths = _simulate_grid(sweep_name, sweep_config, device, prose_embeddings, log)
    dims = (*grid, "layer", "seed")
    ds = xr.Dataset(
        {k: (dims if k != "theory_cosine" else dims[:-1], v) for k, v in data.items()},
        coords={
            **{k: (k, [int(x) if isinstance(x, bool) else x for x in vals]) for k, vals in grid.items()},
            "layer": ("layer", np.arange(depth + 1)),
            "seed": ("seed", seeds),
        },
    )
    ds["resolved_width"] = (tuple(grid), widths)
    describe(ds, VARIABLES)
    fixed = {k: v for k, v in point_params(sweep_config, {}).items() if k not in grid}
    ds.attrs.update(
        title=f"san: signal propagation at initialisation, sweep {sweep_name}",
        sweep=sweep_name,
        depth=depth,
        fixed=structured_attr(fixed),
        residuals=structured_attr(dict(sweep_config["residuals"])),
        inv_sqrt_depth=INV_SQRT_DEPTH,
        cpu_seconds=time.process_time() - start,
        device=str(device),
    )
    return ds


def prose_embeddings(model_folder: str | Path, input_ids: np.ndarray, device: torch.device | str) -> torch.Tensor:
    """BERT's embedding output (token + position + type embeddings, LayerNorm) of the rank-collapse input
    sequences, float64, ``(n, T, d)``: the prose input of the simulator."""
    from san.models.acquire import load_model
    from san.models.spec import PROSE_EMBEDDING_FAMILY

    model = load_model(model_folder, PROSE_EMBEDDING_FAMILY, torch.float64).to(device)
    with torch.no_grad():
        return model.embeddings(input_ids=torch.as_tensor(input_ids, device=device)).detach()


__all__ = ["MEASURES", "PARAMS", "VARIABLES", "prose_embeddings", "run"]
