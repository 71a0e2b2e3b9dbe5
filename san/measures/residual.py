"""Token-uniformity measures of the paper (Sec. 2.2): the residual ``res(X) = X - 1 x^T`` and its norms."""

from __future__ import annotations

import torch


def norm_1inf(a: torch.Tensor) -> torch.Tensor:
    """Composite norm ``||A||_{1,inf} = sqrt(||A||_1 ||A||_inf)`` over the last two dims (the paper's Sec. 2.2).

    ``||A||_1`` is the largest absolute column sum and ``||A||_inf`` the largest absolute row sum.
    """
    abs_a = a.abs()
    norm_1 = abs_a.sum(dim=-2).amax(dim=-1)
    norm_inf = abs_a.sum(dim=-1).amax(dim=-1)
    return torch.sqrt(norm_1 * norm_inf)


def mean_residual(x: torch.Tensor) -> torch.Tensor:
    """``res(X) = X - 1 x^T`` with ``x`` the token mean (the Frobenius-optimal ``x``; what the paper's Fig. 2 used).

    ``x`` has shape ``(..., tokens, dim)``; ``res(X) = 0`` exactly when all tokens are equal (rank-1 output).
    """
    return x - x.mean(dim=-2, keepdim=True)


def relative_residual(x: torch.Tensor) -> torch.Tensor:
    """``||res(X)||_{1,inf} / ||X||_{1,inf}``: the y axis of the paper's Fig. 2, per leading batch element.

    Zero for token-uniform (rank-1 ``1 x^T``) inputs and invariant to rescaling ``X``.
    """
    return norm_1inf(mean_residual(x)) / norm_1inf(x)


def without_token(x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """``x`` ``(sequences, tokens, dim)`` without the token at ``position[i]`` of each sequence ``i``:
    ``(sequences, tokens - 1, dim)``, the other tokens in order."""
    tokens = x.shape[-2]
    keep = torch.arange(tokens, device=x.device)[None, :] != position.to(x.device)[:, None]
    return x[keep].reshape(x.shape[0], tokens - 1, x.shape[-1])


def relative_residual_frobenius(x: torch.Tensor) -> torch.Tensor:
    """``||res(X)||_F / ||X||_F``: the Frobenius-norm companion of :func:`relative_residual` (every entry counts by
    its square, so a few very large rows, e.g. a decoder's first token, weigh less than in the composite norm)."""
    return torch.linalg.matrix_norm(mean_residual(x)) / torch.linalg.matrix_norm(x)


def rank1_relative_residual(p: torch.Tensor) -> torch.Tensor:
    """``||P - P_1||_F / ||P||_F`` with ``P_1`` the best rank-1 approximation of ``P`` (Eckart-Young, via SVD).

    Used for products of attention matrices along paths (the paper's appendix figure "chained attention").
    """
    s = torch.linalg.svdvals(p)
    return torch.sqrt((s[..., 1:] ** 2).sum(dim=-1)) / torch.sqrt((s**2).sum(dim=-1))
