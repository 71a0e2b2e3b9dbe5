"""The paper's bound on the residual of a pure self-attention network (Theorem 2.2 and its multi-head corollary).

Statement (Sec. 2.2, eq. (2), "simplified"): for any single-head SAN of ``L`` layers with
``||W_QK^l||_1 ||W_V^l||_{1,inf} <= beta`` for every layer ``l`` and for a term ``gamma`` that depends on the
attention entries,

    ||res(SAN(X))||_{1,inf} <= (4 gamma beta / sqrt(d_qk))^((3^L - 1)/2) ||res(X)||_{1,inf}^(3^L),

a doubly exponential convergence to a rank-1 matrix. ``res(X) = X - 1 x^T`` with ``x = argmin_x ||X - 1 x^T||``
(Sec. 2.2), ``||A||_{1,inf} = sqrt(||A||_1 ||A||_inf)``, ``W_QK = W_Q W_K^T`` and ``d_qk`` the query/key width.
The multi-head corollary (no skip connections, ``H`` heads, the condition for every head ``h``) has
``4 gamma beta H / sqrt(d_qk)`` as the base. The closed form is the recursion ``r_l <= (4 gamma H beta_l / sqrt(d_qk))
r_{l-1}^3`` unrolled, which is what holds layer by layer.

How the quantities are evaluated here (``W_V`` is the head's full value map ``W_V,h W_O,h``, the ``W_h`` of the
path decomposition, Theorem 2.1; biases are dropped: ``1 b^T`` does not change ``res``):

* ``beta_l = max_h ||W_QK,h||_1 ||W_V,h W_O,h||_{1,inf}`` from the layer's weights (exact);
* ``gamma`` *nominal*: ``gamma = 1``. The paper leaves ``gamma`` as a term of the attention entries, so the nominal
  bound is indicative, not certified: a measurement above it is reported as a violation of the nominal bound;
* ``gamma`` *required*: ``r_l / ((4 H beta_l / sqrt(d_qk)) r_{l-1}^3)``, the smallest ``gamma`` the data allow;
* ``gamma`` *certified* (derived here, in the theorem's proof strategy: ``X = 1 x^T + R``, the logits split into a
  row-constant part, ``1 r^T`` and ``E = R W_QK R^T / sqrt(d_qk)``; ``P = softmax(1 r^T + E)``, ``q = softmax(r)``):
  ``res(SA(X)) <= || sum_h (P_h - 1 q_h^T) R W_h ||``; ``|E_ij| <= eps = ||W_QK||_1 ||R||_1 ||R||_inf / sqrt(d_qk)``
  gives ``|P_ij / q_j - 1| <= e^{2 eps} - 1``, hence ``||P - 1q^T||_inf <= e^{2 eps} - 1`` and
  ``||P - 1q^T||_1 <= n max_j q_j (e^{2 eps} - 1)``. With ``A_1 = sum_h n q_max,h (e^{2 eps_h} - 1) ||W_h||_1`` and
  ``A_inf = sum_h (e^{2 eps_h} - 1) ||W_h||_inf``: ``r_{l} <= sqrt(A_1 A_inf) r_{l-1}``. For one head this is
  ``(4 beta / sqrt(d_qk)) gamma r^3`` with ``gamma = sqrt(n q_max) psi(2 eps) / 2``, ``psi(z) = (e^z - 1)/z``: a
  certified per-layer bound (no LayerNorm) that depends on the attention's base distribution ``q``, as the paper
  says ``gamma`` does.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

LOG10_4 = np.log10(4.0)


def log10_step_bound(r: np.ndarray, beta: np.ndarray, d_qk: int, heads: int = 1, gamma: float = 1.0) -> np.ndarray:
    """``log10`` of the one-layer bound ``(4 gamma H beta / sqrt(d_qk)) r^3`` on the next layer's residual."""
    with np.errstate(divide="ignore"):
        return LOG10_4 + np.log10(gamma * heads * beta / np.sqrt(d_qk)) + 3.0 * np.log10(r)


def log10_closed_bound(r0: np.ndarray, betas: np.ndarray, d_qk: int, heads: int = 1, gamma: float = 1.0) -> np.ndarray:
    """``log10`` of the closed form after each of ``L`` layers: ``prod_l c_l^(3^(L-l)) r_0^(3^L)``.

    ``betas``: shape ``(..., L)`` (``beta_l`` per layer; with equal ``beta`` this is the paper's
    ``(4 gamma H beta / sqrt(d_qk))^((3^L - 1)/2) r_0^(3^L)``). Returns shape ``(..., L)``: entry ``L-1`` bounds
    the residual after ``L`` layers.
    """
    log_c = LOG10_4 + np.log10(gamma * heads * np.asarray(betas, dtype=np.float64) / np.sqrt(d_qk))
    out = np.empty_like(log_c)
    acc = np.log10(np.asarray(r0, dtype=np.float64))
    for layer in range(log_c.shape[-1]):
        acc = log_c[..., layer] + 3.0 * acc  # the recursion log r_l <= log c_l + 3 log r_{l-1}
        out[..., layer] = acc
    return out


def log10_certified_step(
    norm_1: np.ndarray,
    norm_inf: np.ndarray,
    qk_norm_1: np.ndarray,
    v_norm_1: np.ndarray,
    v_norm_inf: np.ndarray,
    q_max: np.ndarray,
    n_tokens: int,
    d_qk: int,
) -> np.ndarray:
    """``log10`` of the certified one-layer bound ``sqrt(A_1 A_inf) ||R||_{1,inf}`` (module docstring).

    ``norm_1``, ``norm_inf``: ``||R||_1``, ``||R||_inf`` of the input's residual (shape ``(...)``); per-head
    arrays (shape ``(..., H)``): ``||W_QK,h||_1``, ``||W_h||_1``, ``||W_h||_inf`` and ``max_j q_h,j``.
    """
    two_eps = 2.0 * qk_norm_1 * (norm_1 * norm_inf)[..., None] / np.sqrt(d_qk)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        # ln(e^{2 eps} - 1) without overflow: the bound stays finite however large the weights
        ln_growth = np.where(
            two_eps > 1.0, two_eps + np.log1p(-np.exp(-two_eps)), np.log(np.expm1(np.minimum(two_eps, 1.0)))
        )
        ln_a_1 = logsumexp(np.log(n_tokens * q_max * v_norm_1) + ln_growth, axis=-1)
        ln_a_inf = logsumexp(np.log(v_norm_inf) + ln_growth, axis=-1)
        return 0.5 * ((ln_a_1 + ln_a_inf) / np.log(10.0) + np.log10(norm_1) + np.log10(norm_inf))


def exponent(r: np.ndarray, axis: int = -1) -> np.ndarray:
    """Empirical exponent ``log r_{l+1} / log r_l`` along ``axis`` (length shrinks by one).

    For ``r_l = r_0^(3^l)`` it is exactly 3; the theorem's recursion ``r_{l+1} <= c r_l^3`` with ``r_l < 1`` gives
    ``log r_{l+1} / log r_l >= 3 + log c / log r_l``, which tends to at least 3 as ``r_l -> 0``.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        log_r = np.log(np.asarray(r, dtype=np.float64))
        head = np.take(log_r, np.arange(1, log_r.shape[axis]), axis=axis)
        tail = np.take(log_r, np.arange(0, log_r.shape[axis] - 1), axis=axis)
        return head / tail
