"""Several seeds of one path-effectiveness SAN trained as one batched model (the paper's Fig. 4, with a seed spread).

The SANs of Fig. 4 are so small that a training step costs per-operation overhead far more than arithmetic. N seeds
of the same architecture therefore train as one :class:`EnsembleSAN`: every weight of :class:`~san.paths.model.SAN`
stacked on a leading seed dimension, each matrix product a batched one over the seeds, one optimiser step for all.
The per-step overhead is paid once for N models.

Each member is the model that a single-seed run with its seed builds: its initial weights come from
``torch.manual_seed(seed)`` followed by :class:`~san.paths.model.SAN` (so they are bit-identical to it), and its
dropout masks from its own :class:`~san.paths.model.DropoutMasks` seeded with its seed and asked for the same shapes
in the same order (all of a step's masks of a seed in one :meth:`~san.paths.model.DropoutMasks.fill` into one
stacked buffer, which yields the same stream as the single model's mask-by-mask requests). Members share no
parameter, so the gradient of the sum of their losses is each member's own gradient, and Adam/AdamW, elementwise,
update each member as it would alone. The batched products (``bmm`` instead of the single model's ``mm``) may round
differently in the last bit; the tests bound the difference.

:class:`EnsembleLayerFunction` is :class:`san.paths.fused.SANLayerFunction` (Eq. 1 of that module, one post-LN layer
with a hand-written backward) with the seed dimension added.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from san.core.attention import softmax_last
from san.paths.model import SAN, DropoutMasks, SANConfig


def _ln_stats(r: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Affine-free LayerNorm of the rows of ``r`` ``(m, d)``: normalised rows, means and reciprocal deviations."""
    return torch.native_layer_norm(r, (r.shape[-1],), None, None, eps)


def _softmax_(s: torch.Tensor) -> torch.Tensor:
    """:func:`~san.core.attention.softmax_last` computed in place in ``s`` (the same operations, hence the same
    values; no temporaries for the scores of all seeds)."""
    if s.shape[-1] > 32:
        return softmax_last(s)
    p = s.sub_(s.amax(dim=-1, keepdim=True)).exp_()
    return p.div_(p.sum(dim=-1, keepdim=True))


class EnsembleLayerFunction(torch.autograd.Function):
    """One training-mode post-LN SAN layer for S stacked models, with a hand-written backward.

    ``x`` ``(S, b, n, d)``; ``w_qkv`` ``(S, 3d, d)``, ``b_qkv`` ``(S, 3d)``, ``w_o`` ``(S, d, d)``, ``b_o``,
    ``ln_w``, ``ln_b`` ``(S, d)``; ``keep_p`` ``(S, b H, n, n)`` and ``keep_o`` ``(S, b n, d)`` dropout masks (any
    strides: views of one buffer of a step's masks) or None;
    ``key_mask`` ``(S, b, n)`` bool or None. The LayerNorm's affine map is applied per seed after the affine-free
    normalisation.
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
        x2 = x.reshape(s_, b * n, d)
        qkv = torch.baddbmm(b_qkv[:, None, :], x2, w_qkv.transpose(1, 2))  # (S, b n, 3d)
        heads = qkv.view(s_, b, n, 3, h, dh).permute(3, 0, 1, 4, 2, 5).reshape(3, s_ * b * h, n, dh)
        q, k, v = heads[0], heads[1], heads[2]
        scale = 1.0 / math.sqrt(dh)
        s = torch.bmm(q, k.transpose(1, 2)).mul_(scale)  # (S b H, n, n)
        if key_mask is not None:
            s.view(s_, b, h, n, n).masked_fill_(~key_mask[:, :, None, None, :], float("-inf"))
        p = _softmax_(s)
        pd = p if keep_p is None else (p.view(keep_p.shape) * keep_p).view(p.shape)
        c = torch.bmm(pd, v).view(s_, b, h, n, dh).transpose(2, 3).reshape(s_, b * n, d)
        o = torch.baddbmm(b_o[:, None, :], c, w_o.transpose(1, 2))
        r = x2 + o if keep_o is None else torch.addcmul(x2, o, keep_o)
        xhat, mean, rstd = _ln_stats(r.view(s_ * b * n, d), eps)
        y = torch.addcmul(ln_b[:, None, :], xhat.view(s_, b * n, d), ln_w[:, None, :])
        ctx.save_for_backward(x2, heads, p, pd, c, r, xhat, mean, rstd, w_qkv, w_o, ln_w, keep_p, keep_o)
        ctx.dims = (s_, b, n, d, h, dh, scale)
        return y.view(s_, b, n, d)

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        x2, heads, p, pd, c, r, xhat, mean, rstd, w_qkv, w_o, ln_w, keep_p, keep_o = ctx.saved_tensors
        s_, b, n, d, h, dh, scale = ctx.dims
        q, k, v = heads[0], heads[1], heads[2]
        gy = gy.reshape(s_, b * n, d)
        g_ln_w = (gy * xhat.view(s_, b * n, d)).sum(1)
        g_ln_b = gy.sum(1)
        gxhat = (gy * ln_w[:, None, :]).view(s_ * b * n, d)
        gr = torch.ops.aten.native_layer_norm_backward(
            gxhat, r.view(s_ * b * n, d), (d,), mean, rstd, None, None, [True, False, False]
        )[0].view(s_, b * n, d)
        go = gr if keep_o is None else gr * keep_o
        g_w_o = torch.bmm(go.transpose(1, 2), c)
        g_b_o = go.sum(1)
        gc = torch.bmm(go, w_o).view(s_, b, n, h, dh).transpose(2, 3).reshape(s_ * b * h, n, dh)
        g_heads = torch.empty_like(heads)
        torch.bmm(pd.transpose(1, 2), gc, out=g_heads[2])  # dV
        gp = torch.bmm(gc, v.transpose(1, 2))
        if keep_p is not None:
            gp.view(keep_p.shape).mul_(keep_p)
        gs = gp.sub_((gp * p).sum(dim=-1, keepdim=True)).mul_(p).mul_(scale)  # softmax backward, then the scale
        torch.bmm(gs, k, out=g_heads[0])  # dQ
        torch.bmm(gs.transpose(1, 2), q, out=g_heads[1])  # dK
        g_qkv = g_heads.view(3, s_, b, h, n, dh).permute(1, 2, 4, 0, 3, 5).reshape(s_, b * n, 3 * d)
        g_w_qkv = torch.bmm(g_qkv.transpose(1, 2), x2)
        g_b_qkv = g_qkv.sum(1)
        gx = gr.baddbmm_(g_qkv, w_qkv)  # through the skip and the projections
        return gx.view(s_, b, n, d), g_w_qkv, g_b_qkv, g_w_o, g_b_o, g_ln_w, g_ln_b, None, None, None, None, None


def _affine(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Per-seed ``x W^T + b``: ``x`` ``(S, m, k)``, ``weight`` ``(S, n, k)``, ``bias`` ``(S, n)``."""
    return torch.baddbmm(bias[:, None, :], x, weight.transpose(1, 2))


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """Per-seed LayerNorm of ``x`` ``(S, m, d)`` with affine ``weight``, ``bias`` ``(S, d)``."""
    xhat = nn.functional.layer_norm(x, x.shape[-1:], eps=eps)
    return torch.addcmul(bias[:, None, :], xhat, weight[:, None, :])


class EnsembleSAN(nn.Module):
    """S :class:`~san.paths.model.SAN` of one architecture, one per seed, with weights stacked on a seed dimension.

    Training only (the fused layers and dropout always act); :meth:`member` gives seed i's own
    :class:`~san.paths.model.SAN` for evaluation and saving. ``forward(inputs, mask)`` takes the seeds' batches
    stacked, ``(S, b, n)`` tokens or ``(S, b, n, 2)`` points, and returns logits ``(S, b, n, classes)``.
    """

    def __init__(self, cfg: SANConfig, seeds: list[int]) -> None:
        super().__init__()
        self.cfg, self.seeds = cfg, list(seeds)
        states = []
        for seed in self.seeds:
            torch.manual_seed(seed)  # the initialisation of a single-seed run (san.paths.experiment.init_model)
            states.append(SAN(cfg).state_dict())
        self.names = list(states[0])
        self.weights = nn.ParameterList(nn.Parameter(torch.stack([st[k] for st in states])) for k in self.names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.masks = [DropoutMasks(seed) for seed in self.seeds]

    def w(self, name: str) -> torch.Tensor:
        """The stacked weight of the :class:`~san.paths.model.SAN` parameter ``name``."""
        return self.weights[self.index[name]]

    def member(self, i: int) -> SAN:
        """Seed ``i``'s model as a :class:`~san.paths.model.SAN` (eval mode, a copy of its weights)."""
        model = SAN(self.cfg)
        model.load_state_dict({k: self.w(k)[i].detach().clone() for k in self.names})
        return model.eval()

    def step_masks(self, x: torch.Tensor, b: int, n: int) -> list[torch.Tensor] | None:
        """Every dropout mask of one training step for all seeds, drawn into one ``(S, total)`` buffer (one
        :meth:`~san.paths.model.DropoutMasks.fill` per seed): the embedding's ``(S, b n, d)``, then per layer the
        attention's ``(S, b H, n, n)`` and the output's ``(S, b n, d)``, then the classifier input's; each seed's
        masks are those its single-seed run draws, in the same order. None without dropout."""
        cfg, p = self.cfg, self.cfg.dropout
        if p == 0.0:
            return None
        d, h = cfg.dim, cfg.n_heads
        shapes = [(b * n, d)] + [(b * h, n, n), (b * n, d)] * cfg.n_layers + [(b * n, d)]
        sizes = [math.prod(sh) for sh in shapes]
        buf = torch.empty(len(self.masks), sum(sizes), dtype=x.dtype, device=x.device)
        for row, m in zip(buf, self.masks, strict=True):
            m.fill(row, sizes, p)
        views, start = [], 0
        for sh, size in zip(shapes, sizes, strict=True):
            views.append(buf[:, start : start + size].view(len(self.masks), *sh))
            start += size
        return views

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:
        """``X_0`` of every seed, ``(S, b n, d)`` (before dropout), as :class:`~san.paths.model.TokenEmbedding` or
        :class:`~san.paths.model.PointEmbedding` compute it."""
        cfg, s_, b, n = self.cfg, inputs.shape[0], inputs.shape[1], inputs.shape[2]
        eps, w = cfg.layer_norm_eps, self.w
        if cfg.input_kind == "tokens":
            if n > cfg.max_len:
                raise ValueError(f"sequence of {n} tokens exceeds max_len {cfg.max_len}")
            offset = (torch.arange(s_, device=inputs.device) * cfg.vocab_size).view(s_, 1, 1)
            words = nn.functional.embedding(inputs + offset, w("embedding.word.weight").flatten(0, 1))
            h = (words + w("embedding.position.weight")[:, None, :n]).view(s_, b * n, cfg.dim)
            h = _affine(h, w("embedding.linear.weight"), w("embedding.linear.bias"))
        else:
            h = _affine(inputs.reshape(s_, b * n, -1), w("embedding.linear.weight"), w("embedding.linear.bias"))
            if cfg.point_mlp:
                h = nn.functional.gelu(h)
                h = _affine(h, w("embedding.linear2.weight"), w("embedding.linear2.bias"))
        return _layer_norm(h, w("embedding.norm.weight"), w("embedding.norm.bias"), eps)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        cfg, w = self.cfg, self.w
        s_, b, n, d = inputs.shape[0], inputs.shape[1], inputs.shape[2], cfg.dim
        x = self.embed(inputs)
        keeps = self.step_masks(x, b, n)
        x = (x if keeps is None else x * keeps[0]).view(s_, b, n, d)
        for i in range(cfg.n_layers):
            pre = f"layers.{i}."
            x = EnsembleLayerFunction.apply(
                x,
                w(pre + "attn.qkv.weight"),
                w(pre + "attn.qkv.bias"),
                w(pre + "attn.out.weight"),
                w(pre + "attn.out.bias"),
                w(pre + "norm.weight"),
                w(pre + "norm.bias"),
                None if keeps is None else keeps[1 + 2 * i],
                None if keeps is None else keeps[2 + 2 * i],
                mask,
                cfg.n_heads,
                cfg.layer_norm_eps,
            )
        x = x.view(s_, b * n, d)
        x = x if keeps is None else x * keeps[-1]
        return _affine(x, w("classifier.weight"), w("classifier.bias")).view(s_, b, n, -1)
