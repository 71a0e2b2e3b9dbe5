"""The path-effectiveness evaluation written literally (the paper's Fig. 4 protocol, Eq. 1 one head at a time): a
plain loop over paths and layers, slow and obviously correct, on one seed's network (a :class:`SAN` of one seed, e.g.
:meth:`SAN.member`). The tests hold the batched evaluation (:mod:`san.paths.evaluate`) against it and
``benchmarks/bench_paths.py`` times both; the workflow never runs it."""

from __future__ import annotations

import math

import numpy as np
import torch

from san.paths.model import SAN
from san.paths.spec import PAD, SKIP


def _reference_layer_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps)


def reference_head(model: SAN, layer: int, head: int, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``P_h X W^V_h W^O_h + 1 b_O^T`` of one head, written with explicit per-head matrices (Eq. 1)."""
    attn = model.layers[layer].attn
    d, dh = attn.dim, attn.head_dim
    w, b = attn.qkv.weight[0], attn.qkv.bias[0]
    rows = [slice(part * d + head * dh, part * d + (head + 1) * dh) for part in range(3)]
    q, k, v = (x @ w[r].T + b[r] for r in rows)
    scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1)
    w_o = attn.out.weight[0, :, head * dh : (head + 1) * dh]  # (d, d_h)
    return p @ v @ w_o.T + attn.out.bias[0]


@torch.no_grad()
def reference_path_set_logits(
    model: SAN, inputs: torch.Tensor, path_set: np.ndarray | list[list[int]], mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Logits of the model restricted to one set of paths: a plain loop over paths and layers (slow, for tests
    and the benchmark). ``path_set`` is ``(P, L)``; :data:`PAD` rows are ignored."""
    if len(model.seeds) != 1:
        raise ValueError(f"the reference evaluates one seed's network, got seeds {model.seeds}")
    model.eval()
    eps = model.cfg.layer_norm_eps
    x0 = model.embed(inputs[None])[0]
    total = torch.zeros_like(x0)
    for path in np.asarray(path_set).tolist():
        if all(c == PAD for c in path):
            continue
        x = x0
        for layer, choice in enumerate(path):
            if choice != SKIP:
                x = _reference_layer_norm(reference_head(model, layer, choice, x, mask), eps)
        total = total + x
    return model.classifier(_reference_layer_norm(total, eps)[None])[0]


@torch.no_grad()
def reference_path_set_accuracy(
    model: SAN,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    path_sets: np.ndarray,
    mask: torch.Tensor | None = None,
) -> np.ndarray:
    """Accuracy of each set of ``path_sets`` ``(..., P, L)`` with :func:`reference_path_set_logits`, one at a time."""
    sets = np.asarray(path_sets)
    flat = sets.reshape(-1, *sets.shape[-2:])
    valid = labels >= 0
    acc = [
        int(((reference_path_set_logits(model, inputs, s, mask).argmax(-1) == labels) & valid).sum()) / int(valid.sum())
        for s in flat
    ]
    return np.asarray(acc).reshape(sets.shape[:-2])
