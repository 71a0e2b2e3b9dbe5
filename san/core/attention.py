"""Multi-head self-attention with addressable heads (the paper's Eq. 1).

``SA(X) = sum_h P_h X W^V_h W^O_h + 1 b_O^T`` with ``P_h = softmax(X W^Q_h (X W^K_h)^T / sqrt(d_h))``.
Query, key and value maps are one fused linear layer (one kernel launch instead of three); per-head slices of the
value and output maps are exposed so that path decompositions (Sec. 2.1) can evaluate single heads.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def softmax_last(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension. Rows of at most 32 elements are normalised with explicit ops, several
    times faster on CPUs than ``torch.softmax``'s kernel for such short rows (equal up to rounding; the shift by the
    row maximum is detached, which leaves values and gradients unchanged since softmax is shift-invariant)."""
    if scores.shape[-1] > 32:
        return torch.softmax(scores, dim=-1)
    e = (scores - scores.detach().amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


class MultiHeadSelfAttention(nn.Module):
    """H-head self-attention on ``(batch, tokens, dim)`` inputs with per-head access.

    Args:
        dim: model (hidden) dimension d.
        n_heads: number of heads H; ``dim`` must be divisible by it (head size ``d_h = dim / H``).
        dropout: dropout on the attention probabilities while training.
    """

    def __init__(self, dim: int, n_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if dim % n_heads != 0:
            raise ValueError(f"hidden dimension {dim} is not divisible by the number of heads {n_heads}")
        self.dim = dim
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.dropout = dropout

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Project ``x`` to per-head queries, keys, values of shape ``(batch, H, tokens, d_h)``."""
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return q, k, v

    def attention_probs(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Row-stochastic attention matrices ``P_h`` of every head, shape ``(batch, H, tokens, tokens)``.

        ``mask`` (optional, ``(batch, tokens)`` bool, True for real tokens) removes padding keys.
        """
        q, k, _ = self._split(x)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        return torch.softmax(scores, dim=-1)

    def head_forward(self, x: torch.Tensor, head: torch.Tensor | int, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Output of single heads, ``P_h X W^V_h W^O_h`` (with the value bias), *without* the output bias.

        ``head`` is an int (one head for the whole batch) or a long tensor of shape ``(batch,)`` choosing a head
        per batch element, which lets many paths be evaluated as one batched computation (Sec. 2.1). Only the
        chosen heads' slices of the fused projections are computed. ``mask`` is as in :meth:`attention_probs`.
        """
        if not torch.is_tensor(head) or head.dim() == 0:
            return self._single_head(x, int(head), mask)
        if head.shape != x.shape[:1]:
            raise ValueError(f"head must be an int or of shape {tuple(x.shape[:1])}, got {tuple(head.shape)}")
        out = x.new_empty(x.shape[0], x.shape[1], self.dim)
        for h in torch.unique(head).tolist():
            rows = (head == h).nonzero().squeeze(1)
            out[rows] = self._single_head(x[rows], h, None if mask is None else mask[rows])
        return out

    def _single_head(self, x: torch.Tensor, head: int, mask: torch.Tensor | None) -> torch.Tensor:
        """``P_h X W^V_h W^O_h`` (value bias included, output bias excluded) of one head for the whole batch."""
        if not 0 <= head < self.n_heads:
            raise ValueError(f"head {head} out of range for {self.n_heads} heads")
        b, n, _ = x.shape
        dh = self.head_dim
        w = self.qkv.weight.view(3, self.n_heads, dh, self.dim)[:, head].reshape(3 * dh, self.dim)
        bias = self.qkv.bias.view(3, self.n_heads, dh)[:, head].reshape(3 * dh)
        q, k, v = nn.functional.linear(x, w, bias).view(b, n, 3, dh).unbind(2)  # (batch, tokens, d_h) each
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
        ctx = softmax_last(scores) @ v
        return nn.functional.linear(ctx, self.out.weight[:, head * dh : (head + 1) * dh])

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Sum over heads plus output bias: ``SA(X)`` of Eq. 1, shape ``(batch, tokens, dim)``.

        ``mask`` is as in :meth:`attention_probs`; dropout acts on the attention probabilities while training.
        """
        q, k, v = self._split(x)
        ctx = nn.functional.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=None if mask is None else mask[:, None, None, :],
            dropout_p=self.dropout if self.training else 0.0,
        )
        b, _, n, _ = ctx.shape
        return self.out(ctx.transpose(1, 2).reshape(b, n, self.dim))
