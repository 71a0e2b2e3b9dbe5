"""The paper's residual ``res(X) = X - 1 x^T`` with ``x`` minimising the composite norm (Sec. 2.2), in float64.

The paper defines ``res(X) = X - 1 x^T`` with ``x = argmin_x ||X - 1 x^T||`` and measures it in the composite
``||A||_{1,inf} = sqrt(||A||_1 ||A||_inf)`` (``||A||_1``: largest absolute column sum, ``||A||_inf``: largest
absolute row sum). Fig. 2 and ``san.measures.residual.mean_residual`` use the token mean instead; here ``x`` is
optimised.

``f(x) = ||X - 1x^T||_1 = max_j sum_i |X_ij - x_j|`` and ``g(x) = ||X - 1x^T||_inf = max_i sum_j |X_ij - x_j|`` are
convex, but ``sqrt(f g)`` is not (a geometric mean of convex functions need not be convex), so the composite
minimum is *bracketed*, not solved:

* lower bound (certified): ``min_x f(x) g(x) >= min f * min g``. ``min f`` is exact (column medians: the columns
  separate). ``min g`` is an LP; by LP duality ``min g = max_{w in simplex} sum_j min_c sum_i w_i |X_ij - c|``, so
  every row weighting ``w`` gives a certified lower bound (weighted medians per column). ``w`` is improved by
  exponentiated-gradient ascent; its supergradient is the row-distance vector at the weighted-median point.
* upper bound (attained): ``sqrt(f(x) g(x))`` at the best of the column median (argmin f), the best weighted-median
  point (near-argmin g) and points on the segment between them. This ``x`` is the reported minimiser, and the
  reported ``residual`` is the composite norm of ``X - 1 x^T`` at it: a genuine residual, at most the bracket's
  width above the optimum.

Everything is batched over leading dimensions (``X`` has shape ``(..., tokens, dim)``) and shift-invariant per column.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Residual(NamedTuple):
    """A bracket of ``min_x ||X - 1 x^T||_{1,inf}`` and the attaining ``x`` of its upper end."""

    upper: np.ndarray  #: composite norm of ``X - 1 x^T`` at ``x`` (attained; what is reported as ``res``)
    lower: np.ndarray  #: certified lower bound ``sqrt(min f * LB(min g))``
    x: np.ndarray  #: the minimiser used, shape ``(..., dim)``
    norm_1: np.ndarray  #: ``||X - 1 x^T||_1`` at ``x``
    norm_inf: np.ndarray  #: ``||X - 1 x^T||_inf`` at ``x``


def norm_1(a: np.ndarray) -> np.ndarray:
    """``||A||_1``: the largest absolute column sum over the last two axes."""
    return np.abs(a).sum(axis=-2).max(axis=-1)


def norm_inf(a: np.ndarray) -> np.ndarray:
    """``||A||_inf``: the largest absolute row sum over the last two axes."""
    return np.abs(a).sum(axis=-1).max(axis=-1)


def norm_1inf(a: np.ndarray) -> np.ndarray:
    """The paper's composite ``||A||_{1,inf} = sqrt(||A||_1 ||A||_inf)`` over the last two axes: the same norm as
    :func:`san.measures.residual.norm_1inf`, on float64 numpy arrays (this wing's arithmetic)."""
    return np.sqrt(norm_1(a) * norm_inf(a))


def composite_at(x_mat: np.ndarray, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(f, g) = (||X - 1c^T||_1, ||X - 1c^T||_inf)`` for ``centre`` of shape ``(..., dim)``."""
    dev = np.abs(x_mat - centre[..., None, :])
    return dev.sum(axis=-2).max(axis=-1), dev.sum(axis=-1).max(axis=-1)


def _weighted_medians(sorted_x: np.ndarray, order: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per column, a ``w``-weighted median of ``X`` (a minimiser of ``sum_i w_i |X_ij - c|``); shape ``(..., dim)``.

    ``sorted_x``/``order``: ``X`` sorted along the token axis and the sorting permutation.
    """
    w_sorted = np.take_along_axis(np.broadcast_to(w[..., :, None], order.shape), order, axis=-2)
    cum = np.cumsum(w_sorted, axis=-2)
    k = np.argmax(cum >= 0.5 * cum[..., -1:, :], axis=-2)
    return np.take_along_axis(sorted_x, k[..., None, :], axis=-2)[..., 0, :]


def min_row_norm(x_mat: np.ndarray, iterations: int = 60, step: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Bracket of ``min_x ||X - 1 x^T||_inf``: ``(lower, argmin candidate)``; the upper end is ``g`` at the candidate.

    Dual ascent over row weights ``w`` (exponentiated gradient, step ``step / sqrt(t)`` on gains normalised by their
    mean): each ``w`` certifies ``sum_i w_i g_i(c(w))`` as a lower bound, with ``c(w)`` the weighted medians.
    """
    order = np.argsort(x_mat, axis=-2)
    sorted_x = np.take_along_axis(x_mat, order, axis=-2)
    n = x_mat.shape[-2]
    w = np.full(x_mat.shape[:-1], 1.0 / n)
    best_lower = np.full(x_mat.shape[:-2], -np.inf)
    best_upper = np.full(x_mat.shape[:-2], np.inf)
    best_c = np.zeros(x_mat.shape[:-2] + x_mat.shape[-1:])
    mean_c = np.zeros_like(best_c)
    mean_w = np.zeros_like(w)
    for t in range(1, iterations + 1):
        c = _weighted_medians(sorted_x, order, w)
        mean_c += (c - mean_c) / t  # ergodic average of the best responses: the saddle point's primal part
        mean_w += (w - mean_w) / t
        for cand in (c, mean_c, (mean_w[..., :, None] * x_mat).sum(axis=-2)):
            g = np.abs(x_mat - cand[..., None, :]).sum(axis=-1)
            upper = g.max(axis=-1)
            better = upper < best_upper
            best_upper = np.where(better, upper, best_upper)
            best_c = np.where(better[..., None], cand, best_c)
        g = np.abs(x_mat - c[..., None, :]).sum(axis=-1)  # row distances at c(w): the dual's supergradient at w
        best_lower = np.maximum(best_lower, (w * g).sum(axis=-1))
        scale = np.maximum(g.mean(axis=-1, keepdims=True), np.finfo(float).tiny)
        logits = np.log(np.maximum(w, 1e-300)) + step / np.sqrt(t) * (g / scale - 1.0)
        logits -= logits.max(axis=-1, keepdims=True)
        w = np.exp(logits)
        w /= w.sum(axis=-1, keepdims=True)
    return best_lower, best_c


def min_residual(x_mat: np.ndarray, iterations: int = 60, segment: int = 9, skip_below: float = 0.0) -> Residual:
    """``res(X)`` in the composite norm with an (approximately) minimising ``x`` and a certified lower bound.

    ``iterations``: dual-ascent steps for ``min g``; ``segment``: points tried between argmin f and argmin g.
    ``skip_below``: matrices whose residual at the column median is below ``skip_below * ||X||_{1,inf}`` (float64
    noise) skip the dual ascent: their ``x`` is the median and their lower bound uses uniform row weights.
    """
    x_mat = np.asarray(x_mat, dtype=np.float64)
    batch = x_mat.shape[:-2]
    flat = x_mat.reshape((-1,) + x_mat.shape[-2:])
    median = np.median(flat, axis=-2)
    f_min, g_med = composite_at(flat, median)
    # uniform row weights certify the mean row distance to the median (the unweighted median minimises it)
    g_lower = np.abs(flat - median[:, None, :]).sum(axis=-1).mean(axis=-1)
    c_g = median.copy()
    active = np.sqrt(f_min * g_med) >= skip_below * norm_1inf(flat)
    if active.any():
        lo, c = min_row_norm(flat[active], iterations)
        g_lower[active] = np.maximum(g_lower[active], lo)
        c_g[active] = c
    best = np.full(flat.shape[0], np.inf)
    best_x = median.copy()
    best_f = np.zeros_like(best)
    best_g = np.zeros_like(best)
    for t in np.linspace(0.0, 1.0, segment):
        centre = (1.0 - t) * median + t * c_g
        f, g = composite_at(flat, centre)
        val = np.sqrt(f * g)
        better = val < best
        best = np.where(better, val, best)
        best_f = np.where(better, f, best_f)
        best_g = np.where(better, g, best_g)
        best_x = np.where(better[..., None], centre, best_x)
    lower = np.minimum(np.sqrt(f_min * np.maximum(g_lower, 0.0)), best)
    return Residual(
        upper=best.reshape(batch),
        lower=lower.reshape(batch),
        x=best_x.reshape(batch + x_mat.shape[-1:]),
        norm_1=best_f.reshape(batch),
        norm_inf=best_g.reshape(batch),
    )
