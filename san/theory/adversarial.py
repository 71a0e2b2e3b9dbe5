"""Adversarial search for the constant of Theorem 2.2: the largest ``gamma`` a pure-attention layer needs.

The theorem's recursion (Sec. 2.2, eq. (2) unrolled) is ``r_{l+1} <= (4 gamma H beta / sqrt(d_qk)) r_l^3`` with
``r = ||res(X)||_{1,inf}`` and ``beta = max_h ||W_QK,h||_1 ||W_V,h W_O,h||_{1,inf}`` (:mod:`san.theory.bound`). The
random-weight sweep (:mod:`san.theory.experiment`) leaves the bound decades loose; here the inputs and the weights
are chosen to make it tight. For small ``n, d, H``, gradient ascent (torch autograd, float64, every start of every
draw batched as one tensor) maximises the surrogate ``log r_{l+1} - log(c r_l^3)`` (residuals centred at the column
medians); every final candidate is then evaluated rigorously in numpy with the certified bracket of ``res``
(:func:`san.theory.residual.min_residual`): the lower end for ``r_{l+1}``, the upper end for ``r_l``. Each draw's value
(the best of its starts) is therefore a certified lower bound of the ``gamma`` that its layer needs.

Negative controls run the same search on layers outside the theorem, where the cubic contraction must fail:
``skip`` (``X + SA(X)``: the identity path keeps the residual) and ``layernorm`` (``LN(SA(X))``: scale-invariant,
so shrinking ``W_V`` shrinks ``beta`` but not ``r_{l+1}``). A checker that never finds these violated is no evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import xarray as xr

from san.theory.bound import LOG10_4
from san.theory.residual import min_residual, norm_1, norm_1inf, norm_inf

#: layers searched: the theorem's pure-attention layer and the negative controls outside it
CASES = ("theorem", "skip", "layernorm")


def _layer(x, w: list, case: str, eps: float, lib):
    """One layer of ``case`` on batched ``x`` ``(B, n, d)`` with per-batch weights ``w`` (``(B, H, ., .)``), in
    numpy or torch (``lib``): ``sum_h P_h X W_V,h W_O,h``, plus ``X`` (skip) or followed by LayerNorm."""
    wq, wk, wv, wo = w
    q = lib.einsum("bnd,bhdk->bhnk", x, wq)
    k = lib.einsum("bnd,bhdk->bhnk", x, wk)
    logits = lib.einsum("bhnk,bhmk->bhnm", q, k) / np.sqrt(wq.shape[-1])
    logits = logits - logits.max(-1, keepdims=True) if lib is np else logits - logits.amax(-1, keepdim=True)
    e = lib.exp(logits)
    p = e / e.sum(-1, keepdims=True) if lib is np else e / e.sum(-1, keepdim=True)
    v = lib.einsum("bhnk,bhke->bhne", lib.einsum("bnd,bhdk->bhnk", x, wv), wo)
    y = lib.einsum("bhnm,bhme->bne", p, v)
    if case == "skip":
        return x + y
    if case == "layernorm":
        mu = y.mean(-1, keepdims=True) if lib is np else y.mean(-1, keepdim=True)
        var = ((y - mu) ** 2).mean(-1, keepdims=True) if lib is np else ((y - mu) ** 2).mean(-1, keepdim=True)
        return (y - mu) / (var + eps) ** 0.5
    return y


def _log_beta_torch(w: list[torch.Tensor]) -> torch.Tensor:
    """``log beta`` per batch entry (max over heads of ``||W_QK||_1 ||W_h||_{1,inf}``), differentiable."""
    w_qk = w[0] @ w[1].transpose(-1, -2)
    w_h = w[2] @ w[3]
    n1 = lambda a: a.abs().sum(-2).amax(-1)  # noqa: E731
    ninf = lambda a: a.abs().sum(-1).amax(-1)  # noqa: E731
    return (torch.log(n1(w_qk)) + 0.5 * torch.log(n1(w_h) * ninf(w_h))).amax(-1)


def _log_res_torch(x: torch.Tensor) -> torch.Tensor:
    """Surrogate ``log ||X - 1 m^T||_{1,inf}`` with ``m`` the column medians (the exact minimiser of ``||.||_1``)."""
    dev = (x - x.median(dim=-2, keepdim=True).values).abs()
    return 0.5 * (torch.log(dev.sum(-2).amax(-1).clamp_min(1e-300)) + torch.log(dev.sum(-1).amax(-1).clamp_min(1e-300)))


def surrogate(x: torch.Tensor, w: list[torch.Tensor], case: str, eps: float) -> torch.Tensor:
    """The ascent's objective per batch entry: ``ln r_{l+1} - ln(4 H beta / sqrt(d_qk)) - 3 ln r_l`` (surrogate)."""
    heads, d_qk = w[0].shape[1], w[0].shape[-1]
    log_c = np.log(4.0 * heads / np.sqrt(d_qk)) + _log_beta_torch(w)
    return _log_res_torch(_layer(x, w, case, eps, torch)) - log_c - 3.0 * _log_res_torch(x)


def sizes(cfg: Mapping[str, Any]) -> list[tuple[int, int]]:
    """The searched sizes ``(n, H)``: every configured token count ``cfg['tokens']`` with every head count
    ``cfg['heads']`` (the theorem's constant must hold at each; small sizes are where the bound is tight)."""
    return [(int(n), int(h)) for n in cfg["tokens"] for h in cfg["heads"]]


def starting_points(cfg: Mapping[str, Any], batch: int, seed: int, size: tuple[int, int]) -> list[np.ndarray]:
    """Random starts ``[X, W_Q, W_K, W_V, W_O]`` of one size ``(n, H)``: Gaussian entries (weights
    ``N(0, 1/fan_in)``), ``X`` and ``W_Q, W_K`` each rescaled by ``10^u``, ``u ~ U(-spread, spread)``, and ``X``
    shifted by a common token of random size, so the starts cover soft and hard attention and flat and peaked base
    distributions. ``seed`` tells the searched layers apart; each size draws from its own stream."""
    n, h = size
    rng = np.random.default_rng(np.random.SeedSequence([cfg["seed"], seed, n, h]))
    d, k = cfg["width"], cfg["d_qk"]
    shapes = [(batch, n, d), (batch, h, d, k), (batch, h, d, k), (batch, h, d, k), (batch, h, k, d)]
    out = [rng.standard_normal(s) / np.sqrt(s[-2] if i else 1.0) for i, s in enumerate(shapes)]
    # a shared token offset 1 m^T of random size: the attention's base distribution q from uniform to peaked
    out[0] = out[0] + 10.0 ** rng.uniform(-cfg["init_spread"], cfg["init_spread"], (batch, 1, 1)) * rng.standard_normal(
        (batch, 1, d)
    )
    for i in (0, 1, 2):
        out[i] = out[i] * 10.0 ** rng.uniform(
            -cfg["init_spread"], cfg["init_spread"], (batch,) + (1,) * (out[i].ndim - 1)
        )
    return out


def ascend(start: list[np.ndarray], case: str, cfg: Mapping[str, Any], eps: float) -> list[np.ndarray]:
    """``cfg['steps']`` Adam steps (learning rate ``cfg['lr']``) of gradient ascent on :func:`surrogate`, all starts
    at once. Each start returns its best iterate (the largest finite objective met, the start itself included), not
    the last one: Adam may step past a maximum, and a start whose objective turns non-finite keeps its best point."""
    params = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in start]
    best = [p.detach().clone() for p in params]
    best_obj = torch.full((start[0].shape[0],), -torch.inf, dtype=torch.float64)
    opt = torch.optim.Adam(params, lr=cfg["lr"])
    for step in range(cfg["steps"] + 1):
        opt.zero_grad()
        obj = surrogate(params[0], params[1:], case, eps)
        ok = torch.isfinite(obj)
        with torch.no_grad():
            better = ok & (obj > best_obj)
            best_obj[better] = obj[better]
            for b, p in zip(best, params, strict=True):
                b[better] = p[better]
        if step == cfg["steps"] or not bool(ok.any()):
            break
        (-obj[ok].sum()).backward()
        with torch.no_grad():
            for p in params:
                p.grad = torch.nan_to_num(p.grad, nan=0.0, posinf=0.0, neginf=0.0)
        opt.step()
    return [b.numpy() for b in best]


def certified_log10_gamma(
    cand: list[np.ndarray], case: str, eps: float, iterations: int, floor: float
) -> tuple[np.ndarray, np.ndarray]:
    """Rigorous ``log10 gamma`` per candidate ``[X, W_Q, W_K, W_V, W_O]`` (numpy float64): ``log10`` of the certified
    lower end of ``res(layer(X))`` minus ``log10((4 H beta / sqrt(d_qk)) r^3)`` with ``r`` the upper end of
    ``res(X)``: a lower bound of the ``gamma`` that the layer needs. NaN (and ``True`` in the second array) where
    either residual is below ``floor`` times its matrix's norm (float64 noise)."""
    x, w = cand[0], list(cand[1:])
    y = _layer(x, w, case, eps, np)
    r_in, r_out = min_residual(x, iterations).upper, min_residual(y, iterations).lower
    w_qk, w_h = w[0] @ np.swapaxes(w[1], -1, -2), w[2] @ w[3]
    beta = (norm_1(w_qk) * np.sqrt(norm_1(w_h) * norm_inf(w_h))).max(axis=-1)
    heads, d_qk = w[0].shape[1], w[0].shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        log10_c = LOG10_4 + np.log10(heads * beta / np.sqrt(d_qk))
        gamma = np.log10(r_out) - log10_c - 3.0 * np.log10(r_in)
    at_floor = (r_out < floor * norm_1inf(y)) | (r_in < floor * norm_1inf(x)) | ~np.isfinite(gamma)
    return np.where(at_floor, np.nan, gamma), at_floor


def _best_per_draw(gamma: np.ndarray, draws: int) -> np.ndarray:
    """The largest finite value among each draw's starts (NaN when all sit at the float floor)."""
    per_draw = gamma.reshape(draws, -1)
    finite = np.isfinite(per_draw).any(axis=-1)
    return np.where(finite, np.nanmax(np.where(np.isfinite(per_draw), per_draw, -np.inf), axis=-1), np.nan)


def search(
    cfg: Mapping[str, Any], case: str, draws: int, size: tuple[int, int], eps: float, iterations: int, floor: float
) -> dict[str, Any]:
    """``draws`` independent searches of ``cfg['starts']`` starts each on the layer ``case`` at size ``(n, H)``:
    per draw, the largest certified ``log10 gamma`` among its starts after the ascent and among the starts
    themselves (the ascent's gain is the difference); the best candidate overall (the largest certified value);
    the number of candidates excluded at the floor."""
    start = starting_points(cfg, draws * cfg["starts"], CASES.index(case), size)
    cand = ascend(start, case, cfg, eps)
    gamma, at_floor = certified_log10_gamma(cand, case, eps, iterations, floor)
    gamma_start, _ = certified_log10_gamma(start, case, eps, iterations, floor)
    best = int(np.nanargmax(np.where(np.isfinite(gamma), gamma, -np.inf)))
    return {
        "log10_gamma": _best_per_draw(gamma, draws),
        "log10_gamma_start": _best_per_draw(gamma_start, draws),
        "best": [a[best] for a in cand],
        "best_value": float(gamma[best]),
        "best_draw": best // cfg["starts"],
        "excluded": int(at_floor.sum()),
    }


def _worst_vars(worst: list[np.ndarray]) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    """The best candidate's input and weights (the draw needing the largest gamma, "worst" for the bound) as
    variables on their own dimensions (reproducible from the file)."""
    dims = {
        "worst_x": ("worst_token", "worst_feature"),
        "worst_w_q": ("worst_head", "worst_feature", "worst_qk"),
        "worst_w_k": ("worst_head", "worst_feature", "worst_qk"),
        "worst_w_v": ("worst_head", "worst_feature", "worst_qk"),
        "worst_w_o": ("worst_head", "worst_qk", "worst_feature"),
    }
    return {name: (dim, arr) for (name, dim), arr in zip(dims.items(), worst, strict=True)}


def _on_grid(
    results: Mapping[tuple[int, int], dict[str, Any]], key: str, draws: int, tokens: list[int], heads: list[int]
) -> np.ndarray:
    """``results[(n, H)][key]`` (one value per draw) as an array ``(tokens, heads, draw)``."""
    out = np.full((len(tokens), len(heads), draws), np.nan)
    for (n, h), r in results.items():
        out[tokens.index(n), heads.index(h)] = r[key]
    return out


def run(cfg: Mapping[str, Any], eps: float, iterations: int, floor: float) -> xr.Dataset:
    """The search on the theorem's layer (``cfg['draws']`` draws) and on each of ``cfg['controls']``
    (``cfg['control_draws']`` draws each), at every size of :func:`sizes`. Stored per size and draw: the certified
    ``log10 gamma`` after the ascent and at the best start (the ascent's gain); the best candidate of the theorem's
    layer over all sizes (``worst_*``, its size in the attributes). Whether a control counts as violated is the
    summary's decision (``report.theorem``), not the search's. ``eps``: LayerNorm epsilon; ``iterations``:
    dual-ascent steps of ``res``; ``floor``: float floor."""
    grid = sizes(cfg)
    tokens, heads = sorted({n for n, _ in grid}), sorted({h for _, h in grid})
    grid_of = lambda results, key, draws: _on_grid(results, key, draws, tokens, heads)  # noqa: E731
    main = {s: search(cfg, "theorem", cfg["draws"], s, eps, iterations, floor) for s in grid}
    controls = {
        c: {s: search(cfg, c, cfg["control_draws"], s, eps, iterations, floor) for s in grid} for c in cfg["controls"]
    }

    top = max(grid, key=lambda s: main[s]["best_value"] if np.isfinite(main[s]["best_value"]) else -np.inf)
    dims, cdims = (
        ("search_tokens", "search_heads", "draw"),
        ("control", "search_tokens", "search_heads", "control_draw"),
    )
    ds = xr.Dataset(
        {
            "log10_gamma_adversarial": (dims, grid_of(main, "log10_gamma", cfg["draws"])),
            "log10_gamma_start": (dims, grid_of(main, "log10_gamma_start", cfg["draws"])),
            "log10_gamma_control": (
                cdims,
                np.array([grid_of(controls[c], "log10_gamma", cfg["control_draws"]) for c in cfg["controls"]]),
            ),
            "control_excluded_at_floor": (
                "control",
                np.array([sum(r["excluded"] for r in controls[c].values()) for c in cfg["controls"]]),
            ),
            **_worst_vars(main[top]["best"]),
        },
        coords={
            "search_tokens": tokens,
            "search_heads": heads,
            "draw": np.arange(cfg["draws"]),
            "control": list(cfg["controls"]),
            "control_draw": np.arange(cfg["control_draws"]),
        },
    )
    ds["log10_gamma_adversarial"].attrs.update(
        d=cfg["width"],
        d_qk=cfg["d_qk"],
        steps=cfg["steps"],
        starts=cfg["starts"],
        lr=cfg["lr"],
        seed=cfg["seed"],
        worst_tokens=top[0],
        worst_heads=top[1],
        worst_draw=main[top]["best_draw"],
        excluded_at_floor=sum(r["excluded"] for r in main.values()),
    )
    return ds
