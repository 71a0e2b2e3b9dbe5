"""Hand-written forward and backward of the SAN training step's hot spots (the paper's Fig. 4), for S stacked seeds.

The path-effectiveness SANs are tiny (sorting: 30 sequences of 8 tokens, width 48), so a training step costs
per-operation overhead far more than arithmetic: autograd records a node for every view, permute, softmax part and
dropout product, and CPU kernels for short rows are slow. This module computes one whole post-LN layer of every
seed,

    ``Y = LayerNorm(X + D_o * (sum_h (D_p * softmax(Q_h K_h^T / sqrt(d_h))) V_h W^O_h + 1 b_O^T))``      (Eq. 1)

(``D_p``, ``D_o``: inverted-dropout masks) as one :class:`torch.autograd.Function` with its gradient written out
by hand: about 15 kernels forward and 18 backward, one autograd node per layer for all seeds, and in-place work on
buffers that autograd would otherwise keep. The arithmetic is the same as the autograd formulation
(:meth:`san.paths.model.SANLayer.autograd_forward`); tests compare both, and the backward with ``gradcheck`` in
float64.

Products of the seeds' weights (:func:`seed_linear`) are one batched product for several seeds and the 2-D product
of a lone model for one seed, which computes exactly what a plain single model computes. Matrix products of float32
CPU tensors go through oneDNN (:func:`linear`) on CPUs with AVX-512, where PyTorch exposes it, because MKL may keep
to its AVX2 code there; on AVX2-only CPUs both libraries run AVX2 code and oneDNN's per-call overhead makes it the
slower one, so MKL is used (the README's performance section has the measurements). The choice depends only on the
CPU, never on timings, so a machine always computes the same numbers; the arithmetic is IEEE float32 either way.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from san.core.attention import softmax_last

_ONEDNN_LINEAR: Any = None
if torch.backends.mkldnn.is_available():
    _ONEDNN_LINEAR = getattr(torch.ops.mkldnn, "_linear_pointwise", None)
#: whether :func:`linear` uses oneDNN for float32 CPU products (only where the CPU has AVX-512, see above)
USE_ONEDNN: bool = _ONEDNN_LINEAR is not None and torch.backends.cpu.get_cpu_capability().startswith("AVX512")


def linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, onednn: bool = True
) -> torch.Tensor:
    """``x @ weight.T + bias`` for 2-D ``x`` ``(m, k)`` and ``weight`` ``(n, k)`` (any strides).

    With ``onednn``, float32 CPU tensors use oneDNN's matmul (plain float32 arithmetic, no down-conversion) where
    :data:`USE_ONEDNN` (AVX-512 CPUs); everything else, and PyTorch builds without oneDNN, uses
    ``torch.addmm``/``torch.mm`` (what ``nn.Linear`` computes).
    """
    if onednn and USE_ONEDNN and x.device.type == "cpu" and x.dtype == torch.float32 and x.shape[0] > 0:
        return _ONEDNN_LINEAR(x, weight, bias, "none", [], "")
    if bias is None:
        return x @ weight.t()
    return torch.addmm(bias, x, weight.t())


def seed_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, onednn: bool = False, batched: bool = True
) -> torch.Tensor:
    """Every seed's ``x_s W_s^T + b_s``: ``x`` ``(S, m, k)``, ``weight`` ``(S, n, k)`` (any strides), ``bias``
    ``(S, n)`` or None; returns ``(S, m, n)``. Several seeds with ``batched``: one batched product (``baddbmm``).
    One seed, or ``batched=False``: each seed's 2-D product (:func:`linear`, with ``onednn``), the arithmetic of a
    lone model, so one seed in a stack computes exactly what it computes alone; a 2-D ``x`` is one seed's own."""
    if x.ndim == 2:
        return linear(x, weight, bias, onednn)
    if x.shape[0] == 1:  # squeeze, not select: its backward is a view, not a copy into zeros
        return linear(x.squeeze(0), weight.squeeze(0), None if bias is None else bias.squeeze(0), onednn).unsqueeze(0)
    if not batched:
        return torch.stack([linear(x[i], weight[i], None if bias is None else bias[i], onednn) for i in range(len(x))])
    if bias is None:
        return torch.bmm(x, weight.transpose(1, 2))
    return torch.baddbmm(bias[:, None, :], x, weight.transpose(1, 2))


def softmax_(s: torch.Tensor) -> torch.Tensor:
    """:func:`~san.core.attention.softmax_last` computed in place in ``s`` (the same operations, hence the same
    values; no temporaries for the scores of all seeds)."""
    if s.shape[-1] > 32:
        return softmax_last(s)
    p = s.sub_(s.amax(dim=-1, keepdim=True)).exp_()
    return p.div_(p.sum(dim=-1, keepdim=True))


class SANLayerFunction(torch.autograd.Function):
    """One training-mode post-LN SAN layer of S stacked seeds, with a hand-written backward (see the module
    docstring).

    ``x`` ``(S, b, n, d)``; ``w_qkv`` ``(S, 3d, d)`` rows ordered query, key, value and head-major within each,
    ``b_qkv`` ``(S, 3d)``, ``w_o`` ``(S, d, d)``, ``b_o``, ``ln_w``, ``ln_b`` ``(S, d)``; ``keep_p``
    ``(S, b H, n, n)`` and ``keep_o`` ``(S, b n, d)`` dropout masks (0 or 1/(1-p), any strides) or None;
    ``key_mask`` ``(S, b, n)`` bool, True for real tokens, or None. For several seeds the LayerNorm's affine map is
    applied per seed after the affine-free normalisation; one seed computes on its own 2-D tensors (the seed
    dimension taken off once) the 2-D products and the affine LayerNorm of a lone model.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        x: torch.Tensor,
        w_qkv: torch.Tensor,
        b_qkv: torch.Tensor,
        w_o: torch.Tensor,
        b_o: torch.Tensor,
        ln_w: torch.Tensor,
        ln_b: torch.Tensor,
        keep_p: torch.Tensor | None,
        keep_o: torch.Tensor | None,
        key_mask: torch.Tensor | None,
        n_heads: int,
        eps: float,
    ) -> torch.Tensor:
        s_, b, n, d = x.shape
        h, dh = n_heads, d // n_heads
        lead = (s_,) if s_ > 1 else ()  # one seed: its own 2-D tensors
        if s_ == 1:
            w_qkv, b_qkv, w_o, b_o, ln_w, ln_b = (t[0] for t in (w_qkv, b_qkv, w_o, b_o, ln_w, ln_b))
        x2 = x.reshape(*lead, b * n, d)
        qkv = seed_linear(x2, w_qkv, b_qkv, onednn=True)  # (S, b n, 3d)
        heads = qkv.view(s_, b, n, 3, h, dh).permute(3, 0, 1, 4, 2, 5).reshape(3, s_ * b * h, n, dh)  # one copy
        q, k, v = heads[0], heads[1], heads[2]
        scale = 1.0 / math.sqrt(dh)
        s = torch.bmm(q, k.transpose(1, 2)).mul_(scale)  # (S b H, n, n)
        if key_mask is not None:
            s.view(s_, b, h, n, n).masked_fill_(~key_mask[:, :, None, None, :], float("-inf"))
        p = softmax_(s)
        pd = p if keep_p is None else (p.view(keep_p.shape) * keep_p).view(p.shape)
        c = torch.bmm(pd, v).view(s_, b, h, n, dh).transpose(2, 3).reshape(*lead, b * n, d)  # heads concatenated
        o = seed_linear(c, w_o, b_o, onednn=True)
        r = x2 + o if keep_o is None else torch.addcmul(x2, o, keep_o.view(o.shape))
        if s_ == 1:
            y, mean, rstd = torch.native_layer_norm(r, (d,), ln_w, ln_b, eps)
            xhat = None
        else:
            xhat, mean, rstd = torch.native_layer_norm(r.view(s_ * b * n, d), (d,), None, None, eps)
            y = torch.addcmul(ln_b[:, None, :], xhat.view(s_, b * n, d), ln_w[:, None, :])
        ctx.save_for_backward(x2, heads, p, pd, c, r, xhat, mean, rstd, w_qkv, w_o, ln_w, ln_b, keep_p, keep_o)
        ctx.dims = (s_, b, n, d, h, dh, scale, lead)
        return y.view(s_, b, n, d)

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        x2, heads, p, pd, c, r, xhat, mean, rstd, w_qkv, w_o, ln_w, ln_b, keep_p, keep_o = ctx.saved_tensors
        s_, b, n, d, h, dh, scale, lead = ctx.dims
        q, k, v = heads[0], heads[1], heads[2]
        if s_ == 1:
            gr, g_ln_w, g_ln_b = torch.ops.aten.native_layer_norm_backward(
                gy.reshape(b * n, d).contiguous(), r, (d,), mean, rstd, ln_w, ln_b, [True, True, True]
            )
        else:
            gy = gy.reshape(s_, b * n, d)
            g_ln_w = (gy * xhat.view(s_, b * n, d)).sum(1)
            g_ln_b = gy.sum(1)
            gxhat = (gy * ln_w[:, None, :]).view(s_ * b * n, d)
            gr = torch.ops.aten.native_layer_norm_backward(
                gxhat, r.view(s_ * b * n, d), (d,), mean, rstd, None, None, [True, False, False]
            )[0].view(s_, b * n, d)
        go = gr if keep_o is None else gr * keep_o.view(gr.shape)
        g_w_o = seed_linear(go.transpose(-1, -2), c.transpose(-1, -2), onednn=True)  # (S, d, d) = go^T c
        g_b_o = go.sum(-2)
        gc = (
            seed_linear(go, w_o.transpose(-1, -2), onednn=True)
            .view(s_, b, n, h, dh)
            .transpose(2, 3)
            .reshape(s_ * b * h, n, dh)
        )
        g_heads = torch.empty_like(heads)
        torch.bmm(pd.transpose(1, 2), gc, out=g_heads[2])  # dV
        gp = torch.bmm(gc, v.transpose(1, 2))  # d(pd)
        if keep_p is not None:
            gp.view(keep_p.shape).mul_(keep_p)
        # softmax backward: dS = P * (dP - rowsum(dP * P)), then the 1/sqrt(d_h) scale
        gs = gp.sub_((gp * p).sum(dim=-1, keepdim=True)).mul_(p).mul_(scale)
        torch.bmm(gs, k, out=g_heads[0])  # dQ
        torch.bmm(gs.transpose(1, 2), q, out=g_heads[1])  # dK
        g_qkv = g_heads.view(3, s_, b, h, n, dh).permute(1, 2, 4, 0, 3, 5).reshape(*lead, b * n, 3 * d)  # one copy
        g_w_qkv = seed_linear(g_qkv.transpose(-1, -2), x2.transpose(-1, -2), onednn=True)  # (S, 3d, d)
        g_b_qkv = g_qkv.sum(-2)
        # through the skip and the projections
        gx = gr.add_(linear(g_qkv, w_qkv.t())) if s_ == 1 else gr.baddbmm_(g_qkv, w_qkv)
        grads = (g_w_qkv, g_b_qkv, g_w_o, g_b_o, g_ln_w, g_ln_b)
        if s_ == 1:
            grads = tuple(g.unsqueeze(0) for g in grads)
        return gx.view(s_, b, n, d), *grads, None, None, None, None, None
