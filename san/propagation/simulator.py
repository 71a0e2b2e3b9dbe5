"""Random transformer blocks at initialisation, forward only, in float64 (torch).

One layer is an attention sub-block and optionally an MLP sub-block, each ``x <- a x + b f(N(x))`` (pre-norm),
``x <- N(a x + b f(x))`` (post-norm) or ``x <- a x + b f(x)`` (no norm), with skip weight ``a`` and branch weight
``b`` from the configuration (``a = 0, b = 1``: the paper's SAN / SAN+MLP; ``a = b = 1``: SAN+skip / transformer;
``b = 1/sqrt(L)``: Noci et al.'s depth-scaled branches). Every seed draws its own weights; the seeds run as one batch.

Weights follow Giorlandino & Goldt's simulations: queries and keys ``N(0, beta sqrt(log T) / d)``, so for tokens
with unit-variance components the logits ``q.k / sqrt(d_h)`` have standard deviation ``beta sqrt(log T)`` (their
inverse temperature beta, the scaling under which the softmax over T keys is a Random Energy Model); values
``N(0, var_v / d)`` with bias ``N(0, var_b)``, no output projection (heads are concatenated); a ReLU MLP with
weights ``N(0, var_w / fan_in)`` and biases ``N(0, var_b)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from san.core.rng import cpu_generator, randn
from san.measures.residual import relative_residual
from san.propagation.spec import NORM_EPS, branch_weight

DTYPE = torch.float64


# --- masks and attention ---------------------------------------------------------------------------------------


def allowed_keys(seq_len: int, mask: str, window: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Boolean ``(T, T)`` matrix: query i may attend to key j (Wu et al.'s attention masks, their Sec. 2).

    ``full``: every key; ``causal``: ``j <= i``; ``sliding``: ``|i - j| <= window`` (a local, symmetric band);
    ``sliding_causal``: ``0 <= i - j <= window`` (the one-directional sliding window).
    """
    i = torch.arange(seq_len, device=device)
    diff = i[:, None] - i[None, :]
    if mask == "full":
        return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)
    if mask == "causal":
        return diff >= 0
    if mask == "sliding":
        return diff.abs() <= window
    if mask == "sliding_causal":
        return (diff >= 0) & (diff <= window)
    raise ValueError(f"unknown mask {mask!r}")


def softmax_attention(q: torch.Tensor, k: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Row-stochastic ``softmax(q k^T / sqrt(d_h))`` over the allowed keys; ``q, k``: ``(..., T, d_h)``."""
    logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    logits = logits.masked_fill(~allowed, float("-inf"))
    return torch.softmax(logits, dim=-1)


def centre_attention(a: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """``A - 1 1^T / T`` (Mind the Gap's remedy, removing the top singular direction of a full attention matrix);
    under a mask each row subtracts the uniform row over its allowed keys, so every row sums to zero."""
    uniform = allowed.to(a.dtype)
    return a - uniform / uniform.sum(dim=-1, keepdim=True)


def layer_norm(x: torch.Tensor) -> torch.Tensor:
    """LayerNorm over features without affine parameters: each token centred and scaled to unit variance."""
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return (x - mu) / torch.sqrt(var + NORM_EPS)


def rms_norm(x: torch.Tensor) -> torch.Tensor:
    """RMSNorm without gain: each token scaled to unit mean square."""
    return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + NORM_EPS)


def normalise(x: torch.Tensor, norm: str) -> torch.Tensor:
    """The normalisation ``N`` of a sub-block (identity for ``none``)."""
    if norm in ("post_ln", "pre_ln"):
        return layer_norm(x)
    if norm == "rmsnorm":
        return rms_norm(x)
    if norm == "none":
        return x
    raise ValueError(f"unknown norm {norm!r}")


def sub_block(x: torch.Tensor, f, a: float, b: float, norm: str) -> torch.Tensor:
    """One residual sub-block: ``N(a x + b f(x))`` for post-LN, else ``a x + b f(N(x))`` (``N`` = id for none)."""
    if norm == "post_ln":
        return layer_norm(a * x + b * f(x))
    return a * x + b * f(normalise(x, norm))


# --- weights -------------------------------------------------------------------------------------------------------


def qk_std(beta: float, seq_len: int, width: int) -> float:
    """Std of query and key weights: ``sqrt(beta) (log T)^(1/4) / sqrt(d)``, so logits of unit-variance tokens have
    std ``beta sqrt(log T)`` (Giorlandino & Goldt's REM scaling; their simulations' initialisation)."""
    return math.sqrt(beta) * math.log(seq_len) ** 0.25 / math.sqrt(width)


def draw_layer(gens: list[torch.Generator], p: Mapping[str, Any], width: int, seq_len: int, device) -> dict:
    """One layer's weights for every seed (stacked on dim 0), each seed from its own generator."""

    def normal(shape, std):
        return torch.stack([randn(shape, g, DTYPE, device) for g in gens]) * std

    d, s_qk = width, qk_std(p["beta"], seq_len, width)
    w = {
        "wq": normal((d, d), s_qk),
        "wk": normal((d, d), s_qk),
        "wv": normal((d, d), math.sqrt(p["var_v"] / d)),
        "bv": normal((1, d), math.sqrt(p["var_b"])),
    }
    if p["mlp"]:
        h = max(1, round(p["mlp_ratio"] * d))
        w |= {
            "w1": normal((d, h), math.sqrt(p["var_w"] / d)),
            "b1": normal((1, h), math.sqrt(p["var_b"])),
            "w2": normal((h, d), math.sqrt(p["var_w"] / h)),
            "b2": normal((1, d), math.sqrt(p["var_b"])),
        }
    return w


def attention_forward(
    x: torch.Tensor, w: Mapping[str, torch.Tensor], heads: int, allowed: torch.Tensor, centred: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head self-attention ``concat_h A_h (x W_V + b_V)_h`` for ``x``: ``(S, T, d)``; returns the output and
    the (uncentred) attention matrices ``(S, H, T, T)``."""
    s, t, d = x.shape
    dh = d // heads

    def split(y):
        return y.view(s, t, heads, dh).transpose(1, 2)

    q, k, v = split(x @ w["wq"]), split(x @ w["wk"]), split(x @ w["wv"] + w["bv"])
    a = softmax_attention(q, k, allowed)
    mix = centre_attention(a, allowed) if centred else a
    return (mix @ v).transpose(1, 2).reshape(s, t, d), a


def mlp_forward(x: torch.Tensor, w: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """ReLU MLP ``relu(x W_1 + b_1) W_2 + b_2``."""
    return torch.relu(x @ w["w1"] + w["b1"]) @ w["w2"] + w["b2"]


# --- inputs --------------------------------------------------------------------------------------------------------


def make_input(
    gens: list[torch.Generator],
    kind: str,
    seq_len: int,
    width: int,
    correlation: float,
    device,
    prose: torch.Tensor | None = None,
    seeds: list[int] | None = None,
) -> torch.Tensor:
    """Input tokens ``(S, T, d)`` for each seed.

    ``gaussian``: ``x_i = sqrt(rho) z_0 + sqrt(1 - rho) z_i`` with ``z ~ N(0, I_d)``, so tokens have unit-variance
    components and pairwise correlation rho; ``isometric``: orthonormal rows times ``sqrt(d)`` (``X X^T = d I``, Mind
    the Gap's input, needs ``T <= d``); ``prose``: sequence ``seed mod n`` of the prose embeddings, first T tokens.
    """
    if kind == "prose":
        if prose is None:
            raise ValueError("input 'prose' needs the prose embeddings")
        idx = [s % prose.shape[0] for s in seeds]
        return prose[idx, :seq_len].to(device=device, dtype=DTYPE)
    xs = []
    for g in gens:
        if kind == "gaussian":
            z0 = randn((1, width), g, DTYPE, device)
            z = randn((seq_len, width), g, DTYPE, device)
            xs.append(math.sqrt(correlation) * z0 + math.sqrt(1 - correlation) * z)
        elif kind == "isometric":
            if seq_len > width:
                raise ValueError(f"isometric input needs seq_len <= width, got {seq_len} > {width}")
            q, _ = torch.linalg.qr(randn((width, seq_len), g, DTYPE, device))
            xs.append(q.T * math.sqrt(width))
        else:
            raise ValueError(f"unknown input {kind!r}")
    return torch.stack(xs)


# --- metrics -------------------------------------------------------------------------------------------------------


def mean_cosine(x: torch.Tensor) -> torch.Tensor:
    """Mean pairwise cosine similarity between distinct tokens, per leading batch element (1: all tokens aligned)."""
    u = x / x.norm(dim=-1, keepdim=True)
    g = u @ u.transpose(-1, -2)
    t = x.shape[-2]
    return (g.sum(dim=(-1, -2)) - g.diagonal(dim1=-2, dim2=-1).sum(-1)) / (t * (t - 1))


def squared_singular_values(x: torch.Tensor) -> torch.Tensor:
    """Squared singular values of ``x`` (``(..., T, d)``), largest first, from the eigenvalues of the smaller Gram
    matrix (``X X^T`` or ``X^T X``; cheaper than an SVD, exact to float64 round-off at the top of the spectrum)."""
    g = x @ x.transpose(-1, -2) if x.shape[-2] <= x.shape[-1] else x.transpose(-1, -2) @ x
    return torch.linalg.eigvalsh(g).flip(-1).clamp_min(0.0)


def stable_rank(x: torch.Tensor, s2: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_i s_i^2 / s_1^2`` of the singular values of ``x`` (``||X||_F^2 / ||X||_2^2``; 1 for rank one)."""
    s2 = squared_singular_values(x) if s2 is None else s2
    return s2.sum(-1) / s2[..., 0]


def stable_rank_gram(x: torch.Tensor, s2: torch.Tensor | None = None) -> torch.Tensor:
    """Stable rank of the Gram matrix ``X X^T`` (``sum s_i^4 / s_1^4``), what Mind the Gap's ``stable_ranks.py``
    computes; also 1 for rank one, and smaller than :func:`stable_rank` otherwise."""
    s2 = squared_singular_values(x) if s2 is None else s2
    return (s2**2).sum(-1) / s2[..., 0] ** 2


def mu(x: torch.Tensor) -> torch.Tensor:
    """Wu et al.'s ``mu(X) = ||X - 1 gamma_X||_F`` with ``gamma_X = 1^T X / T`` the mean token (absolute: it also
    shrinks when the token norms shrink, unlike the scale-free relative residual)."""
    return torch.linalg.matrix_norm(x - x.mean(dim=-2, keepdim=True))


def layer_metrics(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-seed metrics of one layer's tokens: mean cosine, the paper's relative residual, Wu et al.'s mu, stable
    ranks."""
    s2 = squared_singular_values(x)
    return {
        "cosine": mean_cosine(x),
        "relative_residual": relative_residual(x),
        "mu": mu(x),
        "stable_rank": stable_rank(x, s2),
        "stable_rank_gram": stable_rank_gram(x, s2),
    }


# --- the forward pass ----------------------------------------------------------------------------------------------


def resolved_width(p: Mapping[str, Any], prose: torch.Tensor | None = None) -> int:
    """The width d of a run: the prose embeddings' width, ``round(width_ratio * T)``, or ``width``."""
    if p["input"] == "prose" and prose is not None:
        return int(prose.shape[-1])
    if p["width_ratio"] > 0:
        return round(p["width_ratio"] * p["seq_len"])
    return int(p["width"])


def simulate(
    p: Mapping[str, Any],
    residual: Mapping[str, Any],
    depth: int,
    seeds: list[int],
    device: torch.device | str = "cpu",
    prose: torch.Tensor | None = None,
) -> dict[str, np.ndarray]:
    """Run ``depth`` random layers with parameters ``p`` (see ``spec.PARAMS``) for every seed.

    Returns ``(n_seeds, depth + 1)`` arrays of the metrics of ``spec.METRICS`` (layer 0: the input;
    ``attention_overlap`` at layer l is ``mean_i sum_j A_ij^2`` of layer l's attention, NaN at layer 0).
    """
    device = torch.device(device)
    gens = [cpu_generator(s) for s in seeds]  # CPU draws: the same sample on every device
    seq_len = p["seq_len"] if prose is None or p["input"] != "prose" else min(p["seq_len"], prose.shape[1])
    width = resolved_width(p, prose)
    x = make_input(gens, p["input"], seq_len, width, p["input_correlation"], device, prose, seeds)
    allowed = allowed_keys(seq_len, p["mask"], p["window"], device)
    a, b = float(residual["skip"]), branch_weight(residual["branch"], depth)
    out = {k: [v] for k, v in layer_metrics(x).items()}
    out["attention_overlap"] = [torch.full((len(seeds),), float("nan"), dtype=DTYPE, device=device)]
    for _ in range(depth):
        w = draw_layer(gens, p, width, seq_len, device)
        probs = []

        def attn(y, w=w, probs=probs):
            o, prob = attention_forward(y, w, p["heads"], allowed, p["centred"])
            probs.append(prob)
            return o

        x = sub_block(x, attn, a, b, p["norm"])
        if p["mlp"]:
            x = sub_block(x, lambda y, w=w: mlp_forward(y, w), a, b, p["norm"])
        for k, v in layer_metrics(x).items():
            out[k].append(v)
        out["attention_overlap"].append(probs[0].pow(2).sum(-1).mean(dim=(-1, -2)))
    return {k: torch.stack(v, dim=1).cpu().numpy() for k, v in out.items()}
