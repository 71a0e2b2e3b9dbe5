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

from san.core.rng import cpu_generator, randn
from san.core.storage import Variable, describe, structured_attr
from san.propagation import construction, theory
from san.propagation.simulator import resolved_width, simulate
from san.propagation.spec import FINITE_SIZE, INV_SQRT_DEPTH, PARAMS, branch_weight, grid_points, point_params

#: the measured and predicted quantities, per grid point, layer (and seed, except the recursion)
MEASURES = {
    "cosine": Variable("mean pairwise cosine similarity between tokens", "1"),
    "relative_residual": Variable("relative residual ||res(X_l)||_{1,inf} / ||X_l||_{1,inf}", "1"),
    "mu": Variable("Wu et al.'s mu(X_l) = ||X_l - 1 mean^T||_F (absolute)", "1"),
    "stable_rank": Variable("stable rank sum_i s_i^2 / s_1^2 of X_l", "1"),
    "stable_rank_gram": Variable("stable rank of the Gram matrix X_l X_l^T (sum s_i^4 / s_1^4)", "1"),
    "attention_overlap": Variable("attention participation mean_i sum_j A_ij^2 of layer l", "1"),
    "theory_cosine": Variable("Giorlandino & Goldt recursion: token correlation (post-LN only)", "1"),
    "theory_overlap": Variable(
        "REM participation predicted from the measured input correlation of layer l (post-LN)", "1"
    ),
    "finite_overlap": Variable(
        "finite-T softmax participation predicted from the measured input correlation of layer l (post-LN)", "1"
    ),
    "finite_cosine": Variable("Giorlandino & Goldt recursion at finite T: token correlation (post-LN only)", "1"),
    "recursion_overlap": Variable("participation of layer l along the infinite-T recursion (post-LN only)", "1"),
    "finite_recursion_overlap": Variable("participation of layer l along the finite-T recursion (post-LN only)", "1"),
}
#: the theory curves without a seed dimension (one per grid point and layer)
CURVES = ("theory_cosine", "finite_cosine", "recursion_overlap", "finite_recursion_overlap")
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
    "construction_ratio": Variable("s_2 / s_1 of the centred tokens, Wu et al.'s LayerNorm construction", "1"),
    "construction_norm": Variable("normalisation of the construction's layers", "1"),
    "draw": Variable("input drawn near the construction's rank-2 equilibrium", "1"),
    "final_cosine": Variable("last-layer cosine of a model of model_depth layers (1/sqrt(L) residual points)", "1"),
    "model_depth": Variable("model depth L of the 1/sqrt(L) runs judged over depths", "1"),
}


def _theory(
    p: Mapping[str, Any], residual: Mapping[str, Any], depth: int, cosine: np.ndarray, overlaps
) -> dict[str, np.ndarray]:
    """The G&G recursion from the measured mean input correlation, at infinite T and at the point's finite T
    (``overlaps``: a :class:`theory.FiniteOverlaps`), the participation along each, and the participation predicted
    at each layer from that layer's measured input correlation (per seed); NaN unless post-LN with a full mask."""
    nan_curve = np.full(depth + 1, np.nan)
    if p["norm"] != "post_ln" or p["mask"] != "full" or p["centred"]:
        nan_seeds = np.full_like(cosine, np.nan)
        return {**dict.fromkeys(CURVES, nan_curve), "theory_overlap": nan_seeds, "finite_overlap": nan_seeds}
    block = {
        "var_v": p["var_v"],
        "var_b": p["var_b"],
        "var_w": p["var_w"],
        "skip": float(residual["skip"]),
        "branch": branch_weight(residual["branch"], depth),
        "mlp": bool(p["mlp"]),
    }
    p0, beta = float(cosine[:, 0].mean()), p["beta"]
    curve = theory.recursion(p0, beta, depth, **block)
    finite = theory.recursion(p0, beta, depth, overlaps=overlaps, **block)
    return {
        "theory_cosine": curve,
        "finite_cosine": finite,
        "recursion_overlap": theory.overlap_curve(curve, beta),
        "finite_recursion_overlap": theory.overlap_curve(finite, beta, overlaps),
        "theory_overlap": np.stack([theory.overlap_curve(c, beta) for c in cosine]),
        "finite_overlap": np.stack([theory.overlap_curve(c, beta, overlaps) for c in cosine]),
    }


def finite_overlaps(seq_len: int, finite_size: Mapping[str, Any]) -> theory.FiniteOverlaps:
    """The finite-T softmax overlaps for T = ``seq_len`` from ``finite_size`` (``draws`` Monte Carlo draws of T
    logit pairs from the CPU generator of ``seed``)."""
    gen = cpu_generator(int(finite_size["seed"]))
    return theory.FiniteOverlaps(randn((int(finite_size["draws"]), 2, seq_len), gen, torch.float64).numpy())


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
    data = {k: np.full((*shape, n_layers, n_seeds), np.nan) for k in MEASURES if k not in CURVES}
    data |= {k: np.full((*shape, n_layers), np.nan) for k in CURVES}
    widths = np.zeros(shape, dtype=int)
    overlaps: dict[int, theory.FiniteOverlaps] = {}
    for flat, point in enumerate(grid_points(sweep_config)):
        idx = np.unravel_index(flat, shape) if shape else ()
        p = point_params(sweep_config, point)
        residual = residuals[p["residual"]]
        res = simulate(p, residual, depth, seeds, device, prose_embeddings)
        for k, v in res.items():
            data[k][idx] = v.T
        seq_len = int(p["seq_len"])
        if seq_len not in overlaps:
            overlaps[seq_len] = finite_overlaps(seq_len, sweep_config.get("finite_size", FINITE_SIZE))
        for k, v in _theory(p, residual, depth, res["cosine"], overlaps[seq_len]).items():
            data[k][idx] = v if k in CURVES else v.T
        widths[idx] = resolved_width(p, prose_embeddings)
        if log is not None:
            log.info(
                "%s %s: cosine %.4f -> %.4f", sweep_name, point, res["cosine"][:, 0].mean(), res["cosine"][:, -1].mean()
            )
    return data, widths


def _over_depths(ds: xr.Dataset, sweep_config: Mapping[str, Any], device, prose_embeddings) -> xr.Dataset:
    """The last-layer cosine of the points with 1/sqrt(L) branches at every model depth of ``depths`` and the
    sweep's own (Noci et al.'s statement is about any depth): ``final_cosine`` ``(*grid, model_depth, seed)``, NaN
    at the other points."""
    grid = dict(sweep_config.get("grid", {}))
    depth, seeds = int(sweep_config["depth"]), [int(s) for s in sweep_config["seeds"]]
    depths = sorted({depth, *(int(d) for d in sweep_config["depths"])})
    shape = tuple(len(v) for v in grid.values())
    out = np.full((*shape, len(depths), len(seeds)), np.nan)
    for flat, point in enumerate(grid_points(sweep_config)):
        idx = np.unravel_index(flat, shape) if shape else ()
        p = point_params(sweep_config, point)
        residual = sweep_config["residuals"][p["residual"]]
        if residual["branch"] != INV_SQRT_DEPTH:
            continue
        for j, model_depth in enumerate(depths):
            if model_depth == depth:
                out[(*idx, j)] = ds["cosine"][dict(zip(grid, idx, strict=True))].isel(layer=-1).values
            else:
                out[(*idx, j)] = simulate(p, residual, model_depth, seeds, device, prose_embeddings)["cosine"][:, -1]
    ds["final_cosine"] = ((*grid, "model_depth", "seed"), out)
    return ds.assign_coords(model_depth=depths)


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
        {k: (dims if k not in CURVES else dims[:-1], v) for k, v in data.items()},
        coords={
            **{k: (k, [int(x) if isinstance(x, bool) else x for x in vals]) for k, vals in grid.items()},
            "layer": ("layer", np.arange(depth + 1)),
            "seed": ("seed", seeds),
        },
    )
    ds["resolved_width"] = (tuple(grid), widths)
    if sweep_config.get("depths"):
        ds = _over_depths(ds, sweep_config, device, prose_embeddings)
    if sweep_config.get("construction"):
        built = construction.run(sweep_config["construction"], depth)
        ds["construction_ratio"] = (("construction_norm", "draw", "layer"), built["ratio"])
        ds = ds.assign_coords(construction_norm=list(construction.NORMS), draw=np.arange(built["ratio"].shape[1]))
        ds.attrs.update(
            construction=structured_attr(dict(sweep_config["construction"])),
            construction_equilibrium_ratio=float(built["equilibrium"][0]),
            construction_equilibrium_residual=float(built["equilibrium"][1]),
        )
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
    from san.models.load import load_model
    from san.models.spec import PROSE_EMBEDDING_FAMILY

    model = load_model(model_folder, PROSE_EMBEDDING_FAMILY, torch.float64).to(device)
    with torch.no_grad():
        return model.embeddings(input_ids=torch.as_tensor(input_ids, device=device)).detach()


__all__ = ["MEASURES", "PARAMS", "VARIABLES", "prose_embeddings", "run"]
