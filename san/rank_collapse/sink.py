"""The first-token attention sink, measured on the attention matrices of every variant's forward pass.

Gu et al. (ICLR 2025, "When attention sink emerges in language models") measure a head's sink as the mean, over the
queries of a sequence, of the attention it puts on the first token, ``alpha^{l,h} = (1/T) sum_k A^{l,h}_{k,1}``, and
count a head as a sink head when ``alpha^{l,h}`` exceeds a threshold (their epsilon = 0.3). The rank-collapse job
records ``alpha`` per weights, variant, layer and head, averaged over the input sequences
(:func:`first_token_attention`); the share of sink heads per layer is taken with the threshold of the report's config
(:func:`san.measures.sink.sink_share`), and the relative residual without the first token is the experiment's
``residual_ratio_no_first`` (:data:`san.rank_collapse.spec.METRICS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch only where the attention matrices are measured: the claims read san.measures.sink without it
    import torch


def first_token_attention(attentions: Sequence[torch.Tensor | None]) -> torch.Tensor:
    """Mean attention on the first token of every layer and head: ``(layers, sequences, heads)`` in float64 from
    the attention matrices ``(sequences, heads, queries, keys)`` of each layer (rows sum to one), averaged over all
    queries (Gu et al. 2025's ``alpha``; in a causal model the first query attends only to the first token). A
    layer whose matrices the model did not return is NaN."""
    import torch

    shapes = [a.shape for a in attentions if a is not None]
    if not shapes:
        raise ValueError("no attention matrices to measure the first-token sink on")
    sequences, heads = shapes[0][0], shapes[0][1]
    out = []
    for a in attentions:
        if a is None:
            out.append(torch.full((sequences, heads), float("nan"), dtype=torch.float64))
        else:
            out.append(a[..., 0].double().mean(dim=-1).cpu())
    return torch.stack(out)


def sink_layers(alpha: np.ndarray, layers: int) -> np.ndarray:
    """``alpha`` of the blocks ``(blocks, ...)`` placed on the residual stream's layer axis ``(layers + 1, ...)``:
    block ``l`` writes layer ``l``, and layer 0 (the embedding output) has no attention, so it is NaN."""
    out = np.full((layers + 1, *alpha.shape[1:]), np.nan)
    out[1:] = alpha
    return out
