"""Hand-written forward and backward of the SAN training step's hot spots (the models of the paper's Fig. 4).

The path-effectiveness SANs are tiny (sorting: 30 sequences of 8 tokens, width 48), so a training step costs
per-operation overhead far more than arithmetic: autograd records a node for every view, permute, softmax part and
dropout product, and CPU kernels for short rows are slow. This module computes one whole post-LN layer,

    ``Y = LayerNorm(X + D_o * (sum_h (D_p * softmax(Q_h K_h^T / sqrt(d_h))) V_h W^O_h + 1 b_O^T))``      (Eq. 1)

(``D_p``, ``D_o``: inverted-dropout masks) as one :class:`torch.autograd.Function` with its gradient written out
by hand: about 15 kernels forward and 18 backward, one autograd node per layer, and in-place work on buffers
that autograd would otherwise keep. The arithmetic is the same as the autograd formulation
(:meth:`san.paths.model.SANLayer.attention`); tests compare both, and the backward with ``gradcheck`` in float64.

Matrix products of float32 CPU tensors go through oneDNN (:func:`linear`) on CPUs with AVX-512, where PyTorch
exposes it, because MKL may keep to its AVX2 code there; on AVX2-only CPUs both libraries run AVX2 code and
oneDNN's per-call overhead makes it the slower one, so MKL is used (the README's performance section has the
measurements). The choice depends only on the CPU, never on timings, so a machine always computes the same numbers;
the arithmetic is IEEE float32 either way.
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


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight.T + bias`` for 2-D ``x`` ``(m, k)`` and ``weight`` ``(n, k)`` (any strides).

    Float32 CPU tensors use oneDNN's matmul (plain float32 arithmetic, no down-conversion) where
    :data:`USE_ONEDNN` (AVX-512 CPUs); everything else, and PyTorch builds without oneDNN, uses
    ``torch.addmm``/``torch.mm``.
    """
    if USE_ONEDNN and x.device.type == "cpu" and x.dtype == torch.float32 and x.shape[0] > 0:
        return _ONEDNN_LINEAR(x, weight, bias, "none", [], "")
    if bias is None:
        return x @ weight.t()
    return torch.addmm(bias, x, weight.t())


class SANLayerFunction(torch.autograd.Function):
    """One training-mode post-LN SAN layer with a hand-written backward (see the module docstring)."""

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
        """``x`` ``(b, n, d)``; ``w_qkv`` ``(3d, d)`` rows ordered query, key, value and head-major within each;
        ``keep_p`` ``(b H, n, n)`` and ``keep_o`` ``(b n, d)`` dropout masks (0 or 1/(1-p)) or None;
        ``key_mask`` ``(b, n)`` bool, True for real tokens, or None."""
        b, n, d = x.shape
        h, dh = n_heads, d // n_heads
        x2 = x.reshape(b * n, d)
        qkv = linear(x2, w_qkv, b_qkv)  # (b n, 3d)
        heads = qkv.view(b, n, 3, h, dh).permute(2, 0, 3, 1, 4).reshape(3, b * h, n, dh)  # one copy
        q, k, v = heads[0], heads[1], heads[2]
        scale = 1.0 / math.sqrt(dh)
        s = torch.bmm(q, k.transpose(1, 2)).mul_(scale)  # (b H, n, n)
        if key_mask is not None:
            s.view(b, h, n, n).masked_fill_(~key_mask[:, None, None, :], float("-inf"))
        p = softmax_last(s)
        pd = p if keep_p is None else p * keep_p
        c = torch.bmm(pd, v).view(b, h, n, dh).transpose(1, 2).reshape(b * n, d)  # heads concatenated
        o = linear(c, w_o, b_o)
        r = x2 + o if keep_o is None else torch.addcmul(x2, o, keep_o)
        y, mean, rstd = torch.native_layer_norm(r, (d,), ln_w, ln_b, eps)
        ctx.save_for_backward(x2, heads, p, pd, c, r, mean, rstd, w_qkv, w_o, ln_w, ln_b, keep_p, keep_o)
        ctx.dims = (b, n, d, h, dh, scale)
        return y.view(b, n, d)

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        x2, heads, p, pd, c, r, mean, rstd, w_qkv, w_o, ln_w, ln_b, keep_p, keep_o = ctx.saved_tensors
        b, n, d, h, dh, scale = ctx.dims
        q, k, v = heads[0], heads[1], heads[2]
        gr, g_ln_w, g_ln_b = torch.ops.aten.native_layer_norm_backward(
            gy.reshape(b * n, d).contiguous(), r, (d,), mean, rstd, ln_w, ln_b, [True, True, True]
        )
        go = gr if keep_o is None else gr * keep_o
        g_w_o = linear(go.t(), c.t())  # (d, d) = go^T c
        g_b_o = go.sum(0)
        gc = linear(go, w_o.t()).view(b, n, h, dh).transpose(1, 2).reshape(b * h, n, dh)
        g_heads = torch.empty_like(heads)
        torch.bmm(pd.transpose(1, 2), gc, out=g_heads[2])  # dV
        gp = torch.bmm(gc, v.transpose(1, 2))  # d(pd)
        if keep_p is not None:
            gp.mul_(keep_p)
        # softmax backward: dS = P * (dP - rowsum(dP * P)), then the 1/sqrt(d_h) scale
        gs = gp.sub_((gp * p).sum(dim=-1, keepdim=True)).mul_(p).mul_(scale)
        torch.bmm(gs, k, out=g_heads[0])  # dQ
        torch.bmm(gs.transpose(1, 2), q, out=g_heads[1])  # dK
        g_qkv = g_heads.view(3, b, h, n, dh).permute(1, 3, 0, 2, 4).reshape(b * n, 3 * d)  # one copy
        g_w_qkv = linear(g_qkv.t(), x2.t())  # (3d, d)
        g_b_qkv = g_qkv.sum(0)
        gx = gr.add_(linear(g_qkv, w_qkv.t()))  # through the skip and the projections
        return gx.view(b, n, d), g_w_qkv, g_b_qkv, g_w_o, g_b_o, g_ln_w, g_ln_b, None, None, None, None, None
