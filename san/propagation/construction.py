"""Wu et al.'s existential LayerNorm claim tested by a construction (NeurIPS 2024, arXiv 2405.18781, Sec. 5).

The paper states that *for suitable value matrices* self-attention with LayerNorm need not collapse to a rank-one
subspace, and builds counterexamples. A random draw never refutes such a statement, so the workflow builds one value
matrix and one mask for which a rank-2 configuration is an attracting fixed point under LayerNorm, and checks that
inputs near it stay rank 2 with LayerNorm and collapse without it. The construction is this project's own (the
paper's counterexample was not readable in the stored text); it is stated here in full:

* mask: causal, with uniform weights over the allowed keys (query and key weights zero), so token i is replaced by
  ``N(mean_{j <= i} x_j V)``;
* value matrix, acting on the plane spanned by two orthonormal vectors ``u1, u2`` orthogonal to the all-ones vector
  (so the mean-centred LayerNorm acts in that plane as a sphere normalisation): in the basis ``(u1, u2)``, for row
  vectors, ``M = [[1, 0], [-1, 1/2]]``; every other direction is scaled by ``rest`` (< 1/2, it dies out). Token 1 sees
  only itself and settles on ``u1`` (the left eigenvector of eigenvalue 1); token 2 has a fixed point at
  ``(-0.8, 0.6)`` whose perpendicular gain is ``(1 + a) / (1/2) = 0.4 < 1`` (attracting); later tokens settle at
  other angles, so the centred tokens span two dimensions;
* without a normalisation the same layer ``X <- A X V`` is linear with ``e1`` as its only fixed direction: every
  token converges to ``u1`` and the centred tokens to rank one.

Judged by the ratio of the second to the first singular value of the centred tokens (scale-free; never by ``mu``,
which stays large for configurations that are rank one but not at the mean).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from san.core.rng import cpu_generator, randn
from san.propagation.spec import CONSTRUCTION_NORMS

DTYPE = torch.float64
#: the normalisations the construction runs under: the paper's sphere normalisation ``x / ||x||``, the project's
#: mean-centred LayerNorm (no affine parameters) and none
NORMS = CONSTRUCTION_NORMS
#: the construction's value matrix in the basis (u1, u2), row-vector convention ``x <- x V``
PLANE_MATRIX = ((1.0, 0.0), (-1.0, 0.5))
#: token 2's attracting fixed point in the basis (u1, u2): ``N(u1 + x V) = x``
TOKEN2_FIXED = (-0.8, 0.6)
#: LayerNorm epsilon of the construction (tokens have norm of order 1; float64)
EPS = 1e-12


def plane_basis(width: int) -> torch.Tensor:
    """Two orthonormal columns ``(d, 2)`` orthogonal to the all-ones vector (needs ``d >= 3``)."""
    m = torch.eye(width, dtype=DTYPE)[:, :3].clone()
    m[:, 0] = 1.0
    q, _ = torch.linalg.qr(m)
    return q[:, 1:3]


def value_matrix(width: int, rest: float) -> torch.Tensor:
    """``V = U M U^T + rest (I - U U^T)``: :data:`PLANE_MATRIX` on the plane, ``rest`` on every other direction."""
    u = plane_basis(width)
    m = torch.tensor(PLANE_MATRIX, dtype=DTYPE)
    return u @ m @ u.T + rest * (torch.eye(width, dtype=DTYPE) - u @ u.T)


def causal_uniform(tokens: int) -> torch.Tensor:
    """Causal attention with uniform weights over the allowed keys: ``A_ij = 1 / i`` for ``j <= i`` (1-based)."""
    a = torch.tril(torch.ones(tokens, tokens, dtype=DTYPE))
    return a / a.sum(-1, keepdim=True)


def normalise(x: torch.Tensor, norm: str) -> torch.Tensor:
    """``sphere``: ``x / ||x||``; ``layer_norm``: centred over features, unit variance; ``none``: identity."""
    if norm == "sphere":
        return x / x.norm(dim=-1, keepdim=True).clamp_min(EPS)
    if norm == "layer_norm":
        x = x - x.mean(-1, keepdim=True)
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
    if norm == "none":
        return x
    raise ValueError(f"unknown construction norm {norm!r}")


def layer(x: torch.Tensor, a: torch.Tensor, v: torch.Tensor, norm: str) -> torch.Tensor:
    """One layer of the construction: ``N(A X V)`` (post-normalisation, pure attention)."""
    return normalise(a @ x @ v, norm)


def rank2_ratio(x: torch.Tensor) -> torch.Tensor:
    """``s_2 / s_1`` of the centred tokens ``X - 1 mean^T`` (0: rank one or less; NaN where all tokens are equal)."""
    c = x - x.mean(-2, keepdim=True)
    s = torch.linalg.svdvals(c)
    return s[..., 1] / s[..., 0]


def fixed_point(tokens: int, width: int, rest: float, iterations: int = 2000) -> torch.Tensor:
    """The rank-2 equilibrium ``(T, d)`` under the sphere normalisation: token 1 at ``u1``, the others started at
    token 2's fixed point and iterated to convergence (the layer map's fixed point, residual at round-off)."""
    u = plane_basis(width)
    start = torch.tensor([[1.0, 0.0]] + [list(TOKEN2_FIXED)] * (tokens - 1), dtype=DTYPE)
    x, a, v = start @ u.T, causal_uniform(tokens), value_matrix(width, rest)
    for _ in range(iterations):
        x = layer(x, a, v, "sphere")
    return x


def run(config: Mapping[str, Any], depth: int) -> dict[str, np.ndarray]:
    """Inputs near the equilibrium (``draws`` perturbations of relative size ``perturbation``, from the CPU
    generator of ``seed``) through ``depth`` layers under each of :data:`NORMS`. Returns ``ratio``
    ``(norm, draw, layer)`` (:func:`rank2_ratio` per layer, layer 0 the input) and ``equilibrium_ratio`` (the
    equilibrium's own ratio and its one-layer residual ``max |N(A X* V) - X*|``)."""
    t, d, rest = int(config["tokens"]), int(config["width"]), float(config["rest"])
    star = fixed_point(t, d, rest)
    a, v = causal_uniform(t), value_matrix(d, rest)
    noise = randn((int(config["draws"]), t, d), cpu_generator(int(config["seed"])), DTYPE)
    x0 = star + float(config["perturbation"]) * noise
    out = np.full((len(NORMS), x0.shape[0], depth + 1), np.nan)
    for i, norm in enumerate(NORMS):
        x = x0.clone()
        out[i, :, 0] = rank2_ratio(x).numpy()
        for layer_index in range(1, depth + 1):
            x = layer(x, a, v, norm)
            out[i, :, layer_index] = rank2_ratio(x).numpy()
    residual = float((layer(star, a, v, "sphere") - star).abs().max())
    return {"ratio": out, "equilibrium": np.array([float(rank2_ratio(star)), residual])}


__all__ = ["NORMS", "fixed_point", "rank2_ratio", "run", "value_matrix"]
