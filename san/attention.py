"""Multi-head self-attention with addressable heads (the paper's Eq. 1).

``SA(X) = sum_h P_h X W^V_h W^O_h + 1 b_O^T`` with ``P_h = softmax(X W^Q_h (X W^K_h)^T / sqrt(d_h))``.
Query, key and value maps are one fused linear layer (one kernel launch instead of three); per-head slices of the
value and output maps are exposed so that path decompositions (Sec. 2.1) can evaluate single heads.
"""

from __future__ import annotations

import math

import torch
from torch import nn


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

    def attention_probs(self, x: torch.Tensor) -> torch.Tensor:
        """Row-stochastic attention matrices ``P_h`` of every head, shape ``(batch, H, tokens, tokens)``."""
        q, k, _ = self._split(x)
        return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.head_dim), dim=-1)

    def head_forward(self, x: torch.Tensor, head: torch.Tensor | int) -> torch.Tensor:
        """Output of single heads, ``P_h X W^V_h W^O_h`` (with the value bias), *without* the output bias.

        ``head`` is an int (one head for the whole batch) or a long tensor of shape ``(batch,)`` choosing a head
        per batch element, which lets many paths be evaluated as one batched computation (Sec. 2.1).
        """
        b = x.shape[0]
        q, k, v = self._split(x)
        idx = torch.as_tensor(head, device=x.device).expand(b) if not torch.is_tensor(head) or head.dim() == 0 else head
        ar = torch.arange(b, device=x.device)
        q, k, v = q[ar, idx], k[ar, idx], v[ar, idx]  # (batch, tokens, d_h)
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.head_dim), dim=-1)
        ctx = p @ v
        w_o = self.out.weight.view(self.dim, self.n_heads, self.head_dim)[:, idx].permute(1, 2, 0)  # (b, d_h, dim)
        return ctx @ w_o

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Sum over heads plus output bias: ``SA(X)`` of Eq. 1, shape ``(batch, tokens, dim)``."""
        q, k, v = self._split(x)
        ctx = nn.functional.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0
        )
        b, _, n, _ = ctx.shape
        return self.out(ctx.transpose(1, 2).reshape(b, n, self.dim))
