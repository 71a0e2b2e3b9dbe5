"""Giorlandino & Goldt's signal-propagation theory of a post-LN transformer block at initialisation (numpy only).

The state is the pairwise correlation p of two tokens (their cosine after LayerNorm; the squared norm is 1 per
component). One block maps p to p' through the attention sub-block and the MLP sub-block, each followed by
LayerNorm (ICLR 2026, arXiv 2505.24333, Sec. 3: the self-attention update from the Random Energy Model, then the
block with residual strengths; their reference code ``theory_update_general.py``/``theory_update_relu.py`` implements
the same map). The equations as implemented here:

* attention (REM condensation): with logits of std ``beta sqrt(log T)`` the part of the logits that varies across
  keys has std ``beta sqrt(1 - p) sqrt(log T)``, a REM over T states with critical inverse temperature
  ``beta_c(p) = sqrt(2 / (1 - p))``. Below it the softmax spreads over ~T keys and the output of every query is the
  common component of the values; above it the weights condense on O(1) keys with mean participation
  ``Y = sum_j w_j^2 = 1 - beta_c / beta``. Per component of the value-weighted output: cross covariance
  ``p_att = p`` and self covariance ``q_att = p + (1 - p) Y`` (``Y = 0`` below ``beta_c``).
* post-LN attention sub-block ``LN(a x + b (A x W_V + b_V))``: ``p_0 = (b^2 (var_v p_att + var_b) + a^2 p) /
  (b^2 (var_v q_att + var_b) + a^2)`` (the skip and the branch are uncorrelated since W_V is independent of x).
* ReLU MLP (arc-cosine kernel, Cho & Saul 2009): pre-activations ``q_1 = var_w + var_b``, ``p_1 = var_w p_0 +
  var_b``, ``c = p_1 / q_1``; ``q_M = var_w q_1 / 2 + var_b``, ``p_M = var_w q_1 rho(c) / 2 + var_b`` with
  ``rho(c) = (sqrt(1 - c^2) + c (pi - arccos c)) / pi``.
* post-LN MLP sub-block: ``p' = (b^2 p_M + a^2 p_0) / (b^2 q_M + a^2)``.

Assumptions (where the simulation can differ): infinite width d (Gaussian pre-activations, self-averaging norms and
overlaps, LayerNorm's feature mean negligible); infinite sequence length T with logits scaled by sqrt(log T) (the REM
limit; at finite T the softmax never fully spreads, ``sum_j w_j^2 >= 1/T``, and the transition is smoothed);
exchangeable tokens with one common pairwise correlation; a full mask; independent Gaussian weights in every layer;
post-LN only. G&G use one residual strength per sub-block with branch weight 1 (``b = 1`` here).

Finite T (:class:`FiniteOverlaps`): the same recursion with the REM limit replaced by the T-key softmax averaged
exactly (Monte Carlo over Gaussian logits of std ``beta sqrt(log T) sqrt(1 - p)``, two queries' logits correlated by
p): self overlap ``Y_T = E sum_j w_j^2`` (>= 1/T: the softmax never fully spreads) and cross overlap
``Y_x = E sum_j w_j w'_j`` between two queries, so ``q_att = p + (1 - p) Y_T`` and ``p_att = p + (1 - p) Y_x``. As
T grows ``Y_T`` tends to the REM value and ``Y_x`` to 0, the infinite-T update above. No parameter is fitted: the
finite-T correction is the difference between the two.
"""

from __future__ import annotations

import math

import numpy as np


def critical_beta(p: float) -> float:
    """The REM critical inverse temperature ``beta_c(p) = sqrt(2 / (1 - p))`` at token correlation p (infinite for
    p = 1: aligned tokens give constant logits and the softmax never condenses)."""
    return math.inf if p >= 1.0 else math.sqrt(2.0 / (1.0 - p))


def attention_overlap(beta: float, p: float) -> float:
    """The REM participation ``Y = E sum_j w_j^2``: 0 below ``beta_c(p)`` (rank-collapse side) and
    ``1 - beta_c / beta`` above (entropy-collapse side)."""
    bc = critical_beta(p)
    return 0.0 if beta <= bc else 1.0 - bc / beta


def relu_kernel(c: float) -> float:
    """``rho(c) = (sqrt(1 - c^2) + c (pi - arccos c)) / pi``: ``E[relu(u) relu(v)] = q rho(c) / 2`` for unit-variance
    Gaussians of correlation c scaled to variance q (the arc-cosine kernel of degree 1)."""
    c = min(1.0, max(-1.0, c))
    return (math.sqrt(1.0 - c * c) + c * (math.pi - math.acos(c))) / math.pi


class FiniteOverlaps:
    """The softmax overlaps of T keys at finite T: ``(Y_T, Y_x)`` for ``(beta, p)`` (see the module docstring),
    averaged over ``normals`` ``(draws, 2, T)`` standard normal draws (the caller draws them from a seeded CPU
    generator; the same draws for every ``(beta, p)``, so the curve is smooth in both)."""

    def __init__(self, normals: np.ndarray) -> None:
        self.normals = np.asarray(normals, dtype=float)
        self.seq_len = int(self.normals.shape[-1])

    def __call__(self, beta: float, p: float) -> tuple[float, float]:
        if p >= 1.0:
            return 1.0, 1.0
        p = max(-1.0, float(p))
        sigma = beta * math.sqrt(math.log(self.seq_len) * (1.0 - p))
        g, h = self.normals[:, 0], self.normals[:, 1]
        w1 = _softmax(sigma * g)
        w2 = _softmax(sigma * (p * g + math.sqrt(max(0.0, 1.0 - p * p)) * h))
        return float((w1 * w1).sum(-1).mean()), float((w1 * w2).sum(-1).mean())


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def attention_step(
    p: float, beta: float, var_v: float, var_b: float, skip: float, branch: float = 1.0, overlaps=None
) -> float:
    """Correlation after the post-LN attention sub-block (the REM attention update, then LayerNorm); NaN where the
    sub-block's output vanishes (no skip, no bias and orthogonal tokens). ``overlaps``: a :class:`FiniteOverlaps`
    for the finite-T update (None: the infinite-T REM limit, cross overlap 0)."""
    if p >= 1.0:
        return 1.0
    y, y_cross = (attention_overlap(beta, p), 0.0) if overlaps is None else overlaps(beta, p)
    p_att, q_att = p + (1.0 - p) * y_cross, p + (1.0 - p) * y
    b2, a2 = branch**2, skip**2
    den = b2 * (var_v * q_att + var_b) + a2
    return (b2 * (var_v * p_att + var_b) + a2 * p) / den if den > 0 else math.nan


def mlp_step(p: float, var_w: float, var_b: float, skip: float, branch: float = 1.0) -> float:
    """Correlation after the post-LN ReLU MLP sub-block."""
    if p >= 1.0:
        return 1.0
    q1, p1 = var_w + var_b, var_w * p + var_b
    q_m = var_w * q1 / 2.0 + var_b
    p_m = var_w * q1 * relu_kernel(p1 / q1) / 2.0 + var_b
    b2, a2 = branch**2, skip**2
    return (b2 * p_m + a2 * p) / (b2 * q_m + a2)


def block_step(
    p: float,
    beta: float,
    var_v: float = 0.2,
    var_b: float = 4e-4,
    var_w: float = 0.2,
    skip: float = 1.0,
    branch: float = 1.0,
    mlp: bool = True,
    overlaps=None,
) -> float:
    """One post-LN block: attention sub-block, then (if ``mlp``) the MLP sub-block (``overlaps``: see
    :func:`attention_step`)."""
    p = attention_step(p, beta, var_v, var_b, skip, branch, overlaps)
    return mlp_step(p, var_w, var_b, skip, branch) if mlp else p


def recursion(p0: float, beta: float, depth: int, **block) -> np.ndarray:
    """Token correlation at layers ``0..depth`` from ``p0`` (``block``: the keyword arguments of
    :func:`block_step`)."""
    out = [float(p0)]
    for _ in range(depth):
        out.append(block_step(out[-1], beta, **block))
    return np.asarray(out)


def overlap_curve(p: np.ndarray, beta: float, overlaps=None) -> np.ndarray:
    """Predicted participation ``Y_l`` of layer l's attention given the correlation ``p_{l-1}`` of its input
    (NaN at layer 0, which has no attention); ``overlaps``: a :class:`FiniteOverlaps` for finite T (None: REM)."""
    y = [attention_overlap(beta, float(x)) if overlaps is None else overlaps(beta, float(x))[0] for x in p[:-1]]
    return np.concatenate([[np.nan], y])


def critical_statistic(betas: np.ndarray, overlap: np.ndarray, condensed: float) -> float:
    """The critical beta read off participations at the last layer: above the transition the REM gives
    ``Y = 1 - beta_c / beta``, so each clearly condensed point (``Y > condensed``) gives ``beta_c = beta (1 - Y)``;
    the median over those points (NaN if none is condensed). Applied alike to a simulation and to a recursion's
    predicted ``Y``, so that both are the same statistic."""
    est = [float(b) * (1.0 - float(y)) for b, y in zip(betas, overlap, strict=True) if y > condensed]
    return float(np.median(est)) if est else float("nan")


def critical_beta_at_depth(p0: float, depth: int, lo: float = 0.05, hi: float = 50.0, **block) -> float:
    """The smallest beta at which the last layer's attention condenses: ``beta = beta_c(p_{L-1}(beta))`` with
    ``p_{L-1}`` from :func:`recursion` (the predicted rank-collapse / entropy-collapse boundary at fixed depth).

    Scans a log grid for the first condensed point, then bisects; NaN if there is none in ``[lo, hi]``.
    """

    def condensed(beta: float) -> bool:
        p = recursion(p0, beta, depth - 1, **block)[-1]
        return beta > critical_beta(p)

    grid = np.geomspace(lo, hi, 400)
    flags = [condensed(b) for b in grid]
    if not any(flags):
        return float("nan")
    i = flags.index(True)
    if i == 0:
        return float(grid[0])
    a, b = grid[i - 1], grid[i]
    for _ in range(60):
        m = 0.5 * (a + b)
        a, b = (a, m) if condensed(m) else (m, b)
    return float(b)
