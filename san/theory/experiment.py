"""Theorem 2.2 measured against its bound: pure SANs at random initialisation over a sweep, in float64 (numpy).

A pure SAN layer (no skip, no MLP, no biases) is ``X <- sum_h P_h X W_V,h W_O,h`` with
``P_h = softmax(X W_Q,h (X W_K,h)^T / sqrt(d_qk))`` (the paper's Sec. 2.1), optionally followed by LayerNorm
without affine parameters (outside the theorem). Weights are Gaussian; per layer they are rescaled by one common
factor so that ``beta_l = max_h ||W_QK,h||_1 ||W_h||_{1,inf}`` equals ``scale * sqrt(d_qk) / (4 H rbar_0^2)``, with
``rbar_0`` the median input residual of the input kind: ``scale`` is then the nominal bound's first-layer factor
``4 H beta rbar_0^2 / sqrt(d_qk)`` (``r_1 / r_0 <= scale``; < 1: contracting, > 1: the bound allows growth).
The raw weights depend only on ``(seed, d_qk, sample)``, so the sweep's cells are paired.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.core.storage import Variable, describe
from san.theory import adversarial
from san.theory import bound as B
from san.theory.residual import min_residual, norm_1, norm_1inf, norm_inf
from san.theory.spec import DIMS, INPUT_KINDS, VERDICT


def softmax_rows(a: np.ndarray) -> np.ndarray:
    """Row-wise softmax over the last axis (shifted by the row maximum)."""
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm(x: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm of each token (last axis) without affine parameters."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def san_layer(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray, wo: np.ndarray) -> np.ndarray:
    """One pure self-attention layer ``sum_h P_h X W_V,h W_O,h``; ``w*``: ``(H, d, d_qk)``, ``wo``: ``(H, d_qk, d)``.

    ``x``: ``(..., n, d)``.
    """
    d_qk = wq.shape[-1]
    q = np.einsum("...nd,hdk->...hnk", x, wq)
    k = np.einsum("...nd,hdk->...hnk", x, wk)
    p = softmax_rows(np.einsum("...hnk,...hmk->...hnm", q, k) / np.sqrt(d_qk))
    v = np.einsum("...hnk,hke->...hne", np.einsum("...nd,hdk->...hnk", x, wv), wo)
    return np.einsum("...hnm,...hme->...ne", p, v)


def draw_weights(rng: np.random.Generator, layers: int, heads: int, width: int, d_qk: int) -> list[np.ndarray]:
    """Raw Gaussian weights ``[W_Q, W_K, W_V, W_O]``, each ``(layers, H, ., .)``, entries ``N(0, 1/fan_in)``."""
    shapes = [(width, d_qk), (width, d_qk), (width, d_qk), (d_qk, width)]
    return [rng.standard_normal((layers, heads, *s)) / np.sqrt(s[0]) for s in shapes]


def head_norms(wq: np.ndarray, wk: np.ndarray, wv: np.ndarray, wo: np.ndarray) -> dict[str, np.ndarray]:
    """Per layer and head: ``||W_QK||_1`` (``W_QK = W_Q W_K^T``), ``||W_h||_1``, ``||W_h||_inf`` (``W_h = W_V W_O``)."""
    w_qk = wq @ np.swapaxes(wk, -1, -2)
    w_h = wv @ wo
    return {"qk_1": norm_1(w_qk), "v_1": norm_1(w_h), "v_inf": norm_inf(w_h)}


def scaled_weights(
    raw: list[np.ndarray], beta: float, raw_norms: dict[str, np.ndarray] | None = None
) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """Rescale every layer's four matrices by one factor so that ``max_h ||W_QK,h||_1 ||W_h||_{1,inf} = beta``.

    ``raw_norms``: :func:`head_norms` of ``raw`` when already known (the norms scale with the factor squared).
    """
    norms = head_norms(*raw) if raw_norms is None else raw_norms
    raw_beta = (norms["qk_1"] * np.sqrt(norms["v_1"] * norms["v_inf"])).max(axis=-1)  # (layers,)
    c = (beta / raw_beta) ** 0.25  # beta is homogeneous of degree 4 in the common factor
    weights = [w * c[:, None, None, None] for w in raw]
    return weights, {k: v * (c**2)[:, None] for k, v in norms.items()}


def forward(x: np.ndarray, weights: list[np.ndarray], layernorm: bool, eps: float) -> np.ndarray:
    """All layers' outputs of a pure SAN: shape ``(layers + 1, ..., n, d)`` (index 0: the input)."""
    out = [x]
    for layer in range(weights[0].shape[0]):
        x = san_layer(x, *(w[layer] for w in weights))
        if layernorm:
            x = layer_norm(x, eps)
        out.append(x)
    return np.stack(out)


def base_distribution_max(x: np.ndarray, centre: np.ndarray, wq: np.ndarray, wk: np.ndarray) -> np.ndarray:
    """``max_j q_h,j`` with ``q_h = softmax(x^T W_QK,h R^T / sqrt(d_qk))``, ``R = X - 1 x^T`` (the bound's ``gamma``).

    ``x``: ``(..., n, d)``, ``centre``: ``(..., d)``; returns ``(..., H)``.
    """
    r_mat = x - centre[..., None, :]
    a = np.einsum("...d,hdk->...hk", centre, wq)
    b = np.einsum("...nd,hdk->...hnk", r_mat, wk)
    logits = np.einsum("...hk,...hnk->...hn", a, b) / np.sqrt(wq.shape[-1])
    return softmax_rows(logits).max(axis=-1)


def gaussian_inputs(seed: int, n_sequences: int, tokens: int, width: int) -> np.ndarray:
    """Gaussian input tokens ``N(0, 1)``: shape ``(n_sequences, tokens, width)``."""
    return np.random.default_rng(np.random.SeedSequence([seed, 1])).standard_normal((n_sequences, tokens, width))


def _sweep_cell(
    x_in: np.ndarray,
    raws: list[list[np.ndarray]],
    raw_norms: list[dict[str, np.ndarray]],
    beta: float,
    layernorm: bool,
    cfg: Mapping[str, Any],
) -> dict[str, np.ndarray]:
    """Measurements and bounds of one sweep cell, one network per sample: arrays ``(sample, layer)``."""
    d_qk, n = raws[0][0].shape[-1], x_in.shape[-2]
    scaled = [scaled_weights(raw, beta, nr) for raw, nr in zip(raws, raw_norms, strict=True)]
    xs = np.stack([forward(x_in[s], w, layernorm, cfg["ln_eps"]) for s, (w, _) in enumerate(scaled)], axis=1)
    res = min_residual(xs, cfg["residual_iterations"], skip_below=cfg["float_floor"])  # (L+1, S)
    layers = xs.shape[0] - 1
    q_max = np.stack(
        [
            np.stack([base_distribution_max(xs[i, s], res.x[i, s], w[0][i], w[1][i]) for i in range(layers)])
            for s, (w, _) in enumerate(scaled)
        ],
        axis=1,
    )  # (L, S, H)
    norms = {k: np.stack([nr[k] for _, nr in scaled], axis=1) for k in scaled[0][1]}  # (L, S, H)
    betas = (norms["qk_1"] * np.sqrt(norms["v_1"] * norms["v_inf"])).max(axis=-1)  # (L, S)
    cert = B.log10_certified_step(
        res.norm_1[:-1], res.norm_inf[:-1], norms["qk_1"], norms["v_1"], norms["v_inf"], q_max, n, d_qk
    )  # (L, S)
    return {
        "residual": res.upper.T,
        "residual_lower": res.lower.T,
        "norm": norm_1inf(xs).T,
        "beta": betas.T,
        "log10_certified": cert.T,
        "q_max": q_max.max(axis=-1).T,
    }


def analyse(ds: xr.Dataset, heads: int, floor: float, limit: float) -> xr.Dataset:
    """Add the bounds, verdicts, slack and exponents to measured ``residual``/``residual_lower``/``beta``/``norm``."""
    r, lo = ds["residual"], ds["residual_lower"]
    prev, prev_lo = r.shift(layer=1), lo.shift(layer=1)
    d_qk = ds["d_qk"]
    log_c = B.LOG10_4 + np.log10(heads * ds["beta"] / np.sqrt(d_qk))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_bound = log_c + 3 * np.log10(prev)
        log_bound_lo = log_c + 3 * np.log10(prev_lo)
        log_r, log_lo = np.log10(r), np.log10(lo)
    relative = r / ds["norm"]
    at_floor = relative < floor
    verdict = xr.where(r.layer == 0, np.nan, xr.where(at_floor, VERDICT["float_floor"], VERDICT["undecided"]))
    verdict = xr.where((verdict == 0) & (log_r <= log_bound_lo), VERDICT["respects"], verdict)
    verdict = xr.where((verdict == 0) & (log_lo > log_bound), VERDICT["violates"], verdict)
    betas = ds["beta"].transpose(..., "layer").isel(layer=slice(1, None))
    closed = xr.apply_ufunc(
        lambda r0, b, dq: B.log10_closed_bound(r0, b, int(dq), heads),
        r.isel(layer=0),
        betas,
        d_qk,
        input_core_dims=[[], ["layer"], []],
        output_core_dims=[["layer"]],
        vectorize=True,
    ).assign_coords(layer=betas["layer"])
    # the theorem's dimensionless variable: s_l = sqrt(4 H beta / sqrt(d_qk)) r_l obeys s_{l+1} <= gamma s_l^3
    s = np.sqrt(10 ** log_c.shift(layer=-1)) * r
    expo = xr.apply_ufunc(B.exponent, r, input_core_dims=[["layer"]], output_core_dims=[["pair"]])
    expo_s = xr.apply_ufunc(B.exponent, s, input_core_dims=[["layer"]], output_core_dims=[["pair"]])
    near = (s.isel(layer=slice(0, -1)).values < limit) & ~at_floor.isel(layer=slice(1, None)).values
    out = ds.assign(
        residual_relative=relative,
        log10_bound=log_bound,
        bound=10**log_bound,
        log10_bound_closed=closed,
        log10_bound_certified=ds["log10_certified"],
        slack=log_bound - log_r,
        log10_gamma_required=log_r - log_bound + 0.0,
        verdict=verdict,
        exponent=expo.assign_coords(pair=r["layer"].values[1:]).rename(pair="layer_pair"),
        exponent_scaled=expo_s.assign_coords(pair=r["layer"].values[1:]).rename(pair="layer_pair"),
        near_limit=(expo.dims, near.astype(np.int8)),
    )
    out = out.drop_vars("log10_certified")
    out["near_limit"] = out["near_limit"].rename(pair="layer_pair").assign_coords(layer_pair=r["layer"].values[1:])
    return _annotate(out)


#: long_name and units of every variable and coordinate of a theorem result
VARIABLES = {
    "residual": Variable("||res(X_l)||_{1,inf} at the reported minimiser x (upper end of the bracket)", "1"),
    "residual_lower": Variable("certified lower bound of min_x ||X_l - 1x^T||_{1,inf}", "1"),
    "residual_relative": Variable("||res(X_l)||_{1,inf} / ||X_l||_{1,inf}", "1"),
    "norm": Variable("||X_l||_{1,inf}", "1"),
    "beta": Variable("beta_l = max_h ||W_QK,h||_1 ||W_V,h W_O,h||_{1,inf} of layer l", "1"),
    "q_max": Variable(
        "largest entry of the attention base distribution q = softmax(x^T W_QK R^T / sqrt(d_qk)), max over heads",
        "1",
    ),
    "log10_bound": Variable(
        "log10 of the nominal one-layer bound (4 H beta_l / sqrt(d_qk)) r_{l-1}^3 (gamma = 1)", "1"
    ),
    "bound": Variable(
        "nominal one-layer bound (4 H beta_l / sqrt(d_qk)) r_{l-1}^3 (gamma = 1; 0 where it underflows)", "1"
    ),
    "log10_bound_closed": Variable("log10 of the closed form over l layers from the input, gamma = 1", "1"),
    "log10_bound_certified": Variable(
        "log10 of the certified one-layer bound sqrt(A_1 A_inf) r_{l-1} (no LayerNorm)", "1"
    ),
    "slack": Variable("log10(nominal bound / measured residual); negative: above the nominal bound", "1"),
    "log10_gamma_required": Variable("log10 of the gamma that makes the nominal one-layer bound tight", "1"),
    "verdict": Variable(
        "1 respects the nominal bound for the whole bracket, -1 violates it for the whole bracket, "
        "0 undecided, 2 residual at the float64 floor (excluded)",
        "1",
    ),
    "exponent": Variable("empirical exponent log r_{l} / log r_{l-1} of the absolute residual", "1"),
    "exponent_scaled": Variable(
        "log s_l / log s_{l-1} with s = sqrt(4 H beta / sqrt(d_qk)) r (theorem: >= 3 near 0)", "1"
    ),
    "near_limit": Variable("1 where s_{l-1} < limit and r_l is above the float64 floor", "1"),
    "input": Variable("input tokens: prose (BERT init embeddings) or Gaussian", "1"),
    "layernorm": Variable("LayerNorm without affine parameters after each layer (1) or none (0)", "1"),
    "d_qk": Variable("query/key (and value) width per head", "1"),
    "scale": Variable("nominal first-layer factor 4 H beta rbar_0^2 / sqrt(d_qk) that sets beta", "1"),
    "sample": Variable("input sequence (and its network's raw weights)", "1"),
    "layer": Variable("layer (0: the input)", "1"),
    "layer_pair": Variable("layer l of the pair (l-1, l)", "1"),
    "log10_gamma_adversarial": Variable(
        "log10 of the largest gamma one pure-attention layer needs, found by gradient ascent (certified lower bound)",
        "1",
    ),
    "log10_gamma_control": Variable(
        "log10 of the largest gamma found for a negative control (certified lower bound)", "1"
    ),
    "log10_gamma_start": Variable(
        "log10 of the largest gamma among a draw's starting points, before the ascent (certified lower bound)", "1"
    ),
    "search_tokens": Variable("tokens n of the adversarially searched layer", "1"),
    "search_heads": Variable("heads H of the adversarially searched layer", "1"),
    "control_excluded_at_floor": Variable("candidates of the control excluded at the float64 floor", "1"),
    "draw": Variable("independent draw of the adversarial search (best of its starts)", "1"),
    "control": Variable("negative control: skip (X + SA(X)) or layernorm (LN(SA(X)))", "1"),
    "control_draw": Variable("independent draw of the control's search", "1"),
    "worst_x": Variable("input X of the draw with the largest gamma", "1"),
    "worst_w_q": Variable("W_Q of the draw with the largest gamma", "1"),
    "worst_w_k": Variable("W_K of the draw with the largest gamma", "1"),
    "worst_w_v": Variable("W_V of the draw with the largest gamma", "1"),
    "worst_w_o": Variable("W_O of the draw with the largest gamma", "1"),
    "worst_token": Variable("token of the worst draw's input", "1"),
    "worst_feature": Variable("feature of the worst draw's input", "1"),
    "worst_head": Variable("head of the worst draw's weights", "1"),
    "worst_qk": Variable("query/key/value feature of the worst draw's weights", "1"),
}


def _annotate(ds: xr.Dataset) -> xr.Dataset:
    """``long_name`` and ``units`` on every variable and coordinate."""
    describe(ds, VARIABLES)
    ds.attrs.setdefault("title", "san: Theorem 2.2's bound against the measured residual of pure attention")
    return ds


def sweep_inputs(cfg: Mapping[str, Any], prose_embeddings: np.ndarray | None) -> dict[str, np.ndarray]:
    """The input kinds by name: the prose embeddings (when given) truncated to the configured sequences and tokens,
    and Gaussian tokens of the same count."""
    inputs: dict[str, np.ndarray] = {}
    if prose_embeddings is not None:
        inputs["prose"] = np.asarray(prose_embeddings, dtype=np.float64)[: cfg["n_sequences"], : cfg["tokens"]]
    inputs["gaussian"] = gaussian_inputs(cfg["seed"], cfg["n_sequences"], cfg["tokens"], cfg["gaussian_width"])
    return {k: inputs[k] for k in INPUT_KINDS if k in inputs}


def raw_networks(cfg: Mapping[str, Any], d_qk: int, samples: int, width: int) -> tuple[list, list]:
    """One network's raw weights per sample (and their :func:`head_norms`), seeded by ``(seed, d_qk, sample)`` only,
    so every cell of the sweep with this ``d_qk`` and width shares them (paired cells)."""
    rngs = [np.random.default_rng(np.random.SeedSequence([cfg["seed"], d_qk, s])) for s in range(samples)]
    raws = [draw_weights(g, cfg["layers"], cfg["heads"], width, d_qk) for g in rngs]
    return raws, [head_norms(*raw) for raw in raws]


def measure_input(x_in: np.ndarray, cfg: Mapping[str, Any], lns: list[int]) -> list:
    """The sweep cells of one input kind, nested ``[layernorm][d_qk][scale]``: ``beta`` is set from the scale and
    the input's median residual ``rbar_0`` (module docstring)."""
    r0 = float(np.median(min_residual(x_in, cfg["residual_iterations"]).upper))
    nets = {d_qk: raw_networks(cfg, d_qk, x_in.shape[0], x_in.shape[-1]) for d_qk in cfg["d_qk"]}
    return [
        [
            [
                _sweep_cell(x_in, *nets[d_qk], scale * np.sqrt(d_qk) / (4 * cfg["heads"] * r0**2), bool(ln), cfg)
                for scale in cfg["scales"]
            ]
            for d_qk in cfg["d_qk"]
        ]
        for ln in lns
    ]


def assemble(cells: list, kinds: list[str], lns: list[int], cfg: Mapping[str, Any], samples: int) -> xr.Dataset:
    """The measured cells as one dataset over :data:`DIMS`; per-layer quantities of layers 1..L get a NaN input
    layer."""
    data = {}
    for name in cells[0][0][0][0]:
        arr = np.array([[[[c[name] for c in sc] for sc in dq] for dq in ln] for ln in cells])
        if arr.shape[-1] == cfg["layers"]:
            arr = np.concatenate([np.full(arr.shape[:-1] + (1,), np.nan), arr], axis=-1)
        data[name] = (DIMS, arr)
    coords = {
        "input": kinds,
        "layernorm": lns,
        "d_qk": list(cfg["d_qk"]),
        "scale": list(cfg["scales"]),
        "sample": np.arange(samples),
        "layer": np.arange(cfg["layers"] + 1),
    }
    return xr.Dataset(data, coords=coords)


def run(config_slice: Mapping[str, Any], prose_embeddings: np.ndarray | None = None) -> xr.Dataset:
    """The theorem check, in the paper's steps: the random-weight sweep (inputs x LayerNorm x d_qk x scale x sample
    x layer) measured against the bound, then the adversarial search for ``gamma`` and its negative controls
    (:mod:`san.theory.adversarial`), in one dataset.

    ``prose_embeddings``: ``(sequences, tokens, width)`` float64 (the prose input kind is skipped when None).
    """
    cfg = dict(config_slice)  # the schema-validated ``theory`` section, defaults filled in
    inputs = sweep_inputs(cfg, prose_embeddings)
    lns = [int(bool(v)) for v in cfg["layernorm"]]
    cells = [measure_input(x_in, cfg, lns) for x_in in inputs.values()]
    samples = next(iter(inputs.values())).shape[0]
    sweep = analyse(assemble(cells, list(inputs), lns, cfg, samples), cfg["heads"], cfg["float_floor"], cfg["limit"])
    adv = adversarial.run(cfg["adversarial"], cfg["ln_eps"], cfg["residual_iterations"], cfg["float_floor"])
    return _annotate(xr.merge([sweep, adv], combine_attrs="override"))
