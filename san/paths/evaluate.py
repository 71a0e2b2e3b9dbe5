"""Paths through a SAN with skip connections (the paper's Sec. 2.1 and Fig. 4).

Expanding ``X_l = X_{l-1} + SA_l(X_{l-1})`` layer by layer writes the network as a sum over *paths*: at each
layer a path takes either the skip (identity) or one of the H heads. A path's *length* k is the number of
layers where it takes a head; there are ``C(L, k) H^k`` such paths out of ``(H+1)^L``.

Protocol of the paper's experiment (the authors' ``no_sub_path`` evaluation), for a set of paths:

1. every path starts from the input embedding ``X_0``;
2. at a skip layer the state passes unchanged; at a head layer ``h`` of layer ``l`` the state becomes
   ``LN(P_h(X) X W^V_h W^O_h + 1 b_O^T)`` -- the head's attention is computed from the path's own current
   state, and ``LN`` is a LayerNorm *without* affine parameters and *without* the residual;
3. the final states of all paths of the set are summed, normalised by an affine-free LayerNorm and classified.

Paths are encoded as int arrays of length L with :data:`SKIP` (-1) or a head index per layer; :data:`PAD` (-2)
rows stand for "no path" in padded batches of sets. :func:`evaluate_path_sets` evaluates every path of every set,
every seed of a :class:`~san.paths.model.SAN` on its own inputs, in one batched computation over a prefix tree (paths
that share their first layers share that computation; every head computation is one product over the seeds);
:func:`san.paths.reference.reference_path_set_logits` is the slow, obviously-correct loop over paths used to test
it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from san.core.attention import softmax_last
from san.paths.fused import seed_linear
from san.paths.spec import PAD, SKIP

if TYPE_CHECKING:  # only the interface is used: layers[l].attn, embed, classifier, cfg, seeds
    from san.paths.model import SAN


def sample_paths(n_layers: int, n_heads: int, length: int, n_paths: int, rng: np.random.Generator) -> np.ndarray:
    """``n_paths`` paths of length ``length`` drawn uniformly among the ``C(L, k) H^k`` such paths (with
    replacement): the k head layers uniformly without replacement, each layer's head uniformly."""
    if not 0 <= length <= n_layers:
        raise ValueError(f"path length {length} outside 0..{n_layers}")
    paths = np.full((n_paths, n_layers), SKIP, dtype=np.int64)
    for p in paths:
        layers = rng.choice(n_layers, size=length, replace=False)
        p[layers] = rng.integers(0, n_heads, size=length)
    return paths


def sample_path_sets(n_layers: int, n_heads: int, n_paths: list[int], n_repeats: int, seed: int) -> np.ndarray:
    """Path sets of the experiment, shape ``(len(n_paths), L+1, n_repeats, max(n_paths), L)``.

    Entry ``[i, k, r]`` holds ``n_paths[i]`` fresh paths of length k (then :data:`PAD` rows); every set is drawn
    independently from one seeded stream.
    """
    rng = np.random.default_rng(seed)
    out = np.full((len(n_paths), n_layers + 1, n_repeats, max(n_paths), n_layers), PAD, dtype=np.int64)
    for i, n in enumerate(n_paths):
        for k in range(n_layers + 1):
            for r in range(n_repeats):
                out[i, k, r, :n] = sample_paths(n_layers, n_heads, k, n, rng)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Batched evaluation


@dataclass
class PrefixTree:
    """Distinct path prefixes, level by level.

    ``parents[l]`` and ``choices[l]`` describe the nodes after layer ``l``: the index of the node they extend
    (after layer ``l-1``; the root is the embedding) and the layer's choice (:data:`SKIP` or a head). ``leaf[p]``
    is the node of path ``p`` after the last layer.
    """

    parents: list[torch.Tensor]
    choices: list[torch.Tensor]
    leaf: torch.Tensor

    @property
    def n_nodes(self) -> list[int]:
        return [len(p) for p in self.parents]

    @property
    def n_head_evaluations(self) -> int:
        """Single-head computations per input needed by the tree (skips cost nothing)."""
        return int(sum((c >= 0).sum() for c in self.choices))


def prefix_tree(paths: torch.Tensor, n_heads: int) -> PrefixTree:
    """Build the :class:`PrefixTree` of ``paths`` ``(N, L)``."""
    if paths.ndim != 2 or (paths < SKIP).any() or (paths >= n_heads).any():
        raise ValueError("paths must be (N, L) with entries SKIP (-1) or a head index in [0, n_heads)")
    node = torch.zeros(paths.shape[0], dtype=torch.long)
    parents, choices = [], []
    base = n_heads + 1
    for layer in range(paths.shape[1]):
        key = node * base + (paths[:, layer] + 1)
        uniq, node = torch.unique(key, return_inverse=True)
        parents.append(uniq // base)
        choices.append(uniq % base - 1)
    return PrefixTree(parents, choices, node)


def _normalise(x: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last dimension without affine parameters."""
    return nn.functional.layer_norm(x, x.shape[-1:], eps=eps)


def _flatten_sets(path_sets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(..., P, L)`` padded sets -> real paths ``(N, L)``, the set index of each ``(N,)`` and the set count."""
    sets = path_sets.reshape(-1, *path_sets.shape[-2:])
    real = (sets != PAD).all(dim=-1)
    if ((sets == PAD).any(dim=-1) & ~(sets == PAD).all(dim=-1)).any():
        raise ValueError("a path mixes PAD with real entries")
    set_idx, slot = real.nonzero(as_tuple=True)
    return sets[set_idx, slot], set_idx, sets.shape[0]


@dataclass
class _HeadGroup:
    """The nodes of one tree level that take one head: their parents' state rows and their own (contiguous) rows."""

    layer: int
    head: int
    parent_rows: torch.Tensor
    start: int
    stop: int


class _PathSetEvaluator:
    """The batched computation shared by :func:`path_set_logits` and :func:`evaluate_path_sets`, for every seed of a
    :class:`~san.paths.model.SAN`.

    Every distinct prefix that ends with a head gets one row of a state buffer (row 0: the embedding); a prefix
    ending with a skip reuses its parent's row, so skips cost neither compute nor copies. Rows are numbered level by
    level and, within a level, head by head, so that all nodes of a level taking head h are one contiguous block
    computed by one head computation on their gathered parent rows, for all seeds at once (weights stacked on the
    seed dimension; one seed computes the 2-D products of :meth:`MultiHeadSelfAttention.head_forward`).
    """

    def __init__(self, model: SAN, path_sets: torch.Tensor | np.ndarray) -> None:
        model.eval()
        self.model, self.n_seeds = model, len(model.seeds)
        self.device = next(model.parameters()).device
        path_sets = torch.as_tensor(path_sets, dtype=torch.long)
        self.batch_shape = path_sets.shape[:-2]
        paths, set_idx, self.n_sets = _flatten_sets(path_sets)
        cfg = model.cfg
        if paths.shape[1] != cfg.n_layers:
            raise ValueError(f"paths have {paths.shape[1]} layers, the model {cfg.n_layers}")
        self.tree = prefix_tree(paths, cfg.n_heads)
        self.groups: list[_HeadGroup] = []
        node_row = torch.zeros(1, dtype=torch.long)  # the root is row 0
        n_rows = 1
        for layer, (parent, choice) in enumerate(zip(self.tree.parents, self.tree.choices, strict=True)):
            row = node_row[parent]  # skips keep their parent's row
            for head in range(cfg.n_heads):
                nodes = (choice == head).nonzero().squeeze(1)
                if len(nodes):
                    group = _HeadGroup(
                        layer, head, node_row[parent[nodes]].to(self.device), n_rows, n_rows + len(nodes)
                    )
                    self.groups.append(group)
                    row[nodes] = torch.arange(group.start, group.stop)
                    n_rows = group.stop
            node_row = row
        self.n_rows = n_rows
        leaf_row = node_row[self.tree.leaf] if cfg.n_layers else torch.zeros_like(set_idx)
        # sums[s] = sum of the final states of the paths of set s: a sparse (sets x rows) count matrix
        dtype = next(model.parameters()).dtype
        counts = torch.sparse_coo_tensor(
            torch.stack([set_idx, leaf_row]),
            torch.ones(len(set_idx), dtype=dtype),
            (self.n_sets, n_rows),
            check_invariants=True,
        )
        self.counts = counts.coalesce().to(self.device)
        self.heads = {(g.layer, g.head): model.layers[g.layer].attn.head_weights(g.head) for g in self.groups}

    def chunk_size(self, n_tok: int, memory_mb: float) -> int:
        """Inputs per chunk (of every seed) so that the state buffer and the largest head computation of all seeds
        fit in ``memory_mb`` (a budget of a few tens of MiB keeps the working set in cache)."""
        d = self.model.cfg.dim
        widest = max([1, self.n_sets, *(g.stop - g.start for g in self.groups)])
        per_input = 4 * n_tok * (self.n_rows * d + widest * (3 * d + n_tok) + self.n_sets * d)
        return max(1, max(1, int(memory_mb * 2**20 // per_input)) // self.n_seeds)

    def _heads(self, xs: torch.Tensor, g: _HeadGroup, m: torch.Tensor | None) -> torch.Tensor:
        """``P_h X W^V_h W^O_h + 1 b_O^T`` of head ``g.head`` of layer ``g.layer`` of every seed, as
        :meth:`~san.core.attention.MultiHeadSelfAttention.head_forward` plus the output bias: ``xs``
        ``(S, rows, n, d)``, ``m`` ``(S rows, n)`` or None."""
        w, bias, w_o = self.heads[(g.layer, g.head)]
        b_o = self.model.layers[g.layer].attn.out.bias
        s_, rows, n, d = xs.shape
        dh = w.shape[1] // 3
        q, k, v = seed_linear(xs.view(s_, rows * n, d), w, bias).view(s_ * rows, n, 3, dh).unbind(2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
        if m is not None:
            scores = scores.masked_fill(~m[:, None, :], float("-inf"))
        ctx = (softmax_last(scores) @ v).view(s_, rows * n, dh)
        if s_ == 1:  # head_forward's product, then the bias
            return (seed_linear(ctx, w_o) + b_o[:, None, :]).view(s_, rows, n, d)
        return seed_linear(ctx, w_o, b_o).view(s_, rows, n, d)

    def logits(self, x: torch.Tensor, m: torch.Tensor | None) -> torch.Tensor:
        """Logits ``(S, sets, batch, tokens, classes)`` of every set, every seed's network on its own batch of inputs
        ``x[s]`` (``m[s]``: its padding mask)."""
        model, eps = self.model, self.model.cfg.layer_norm_eps
        s_, b, n_tok, dim = x.shape[0], x.shape[1], x.shape[2], model.cfg.dim
        emb = model.embed(x)
        states = emb.new_empty(s_, self.n_rows, b, n_tok, dim)
        states[:, 0] = emb
        for g in self.groups:
            xs = states.index_select(1, g.parent_rows).view(s_, -1, n_tok, dim)  # (S, nodes b, n, d)
            mm = None if m is None else m[:, None].expand(s_, len(g.parent_rows), b, n_tok).reshape(-1, n_tok)
            out = _normalise(self._heads(xs, g, mm), eps)
            states[:, g.start : g.stop] = out.view(s_, -1, b, n_tok, dim)
        sums = torch.stack([torch.sparse.mm(self.counts, st.view(self.n_rows, -1)) for st in states])
        hidden = _normalise(sums.view(s_, -1, dim), eps)
        logits = seed_linear(hidden, model.classifier.weight, model.classifier.bias)
        return logits.view(s_, self.n_sets, b, n_tok, -1)


def _chunks(
    inputs: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None, size: int, device: torch.device
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    """Consecutive chunks of ``size`` inputs of every seed's set ``(S, N, ...)``, on ``device``."""
    for start in range(0, inputs.shape[1], size):
        sl = slice(start, start + size)
        yield inputs[:, sl].to(device), labels[:, sl].to(device), None if mask is None else mask[:, sl].to(device)


@torch.no_grad()
def path_set_logits(
    model: SAN, inputs: torch.Tensor, path_sets: torch.Tensor | np.ndarray, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Logits of every seed's network restricted to each set of paths, ``(S, *sets, batch, tokens, classes)``, in
    one batch (``inputs`` ``(S, batch, tokens, ...)``: every seed's inputs)."""
    ev = _PathSetEvaluator(model, path_sets)
    out = ev.logits(inputs.to(ev.device), None if mask is None else mask.to(ev.device))
    return out.reshape(ev.n_seeds, *ev.batch_shape, *out.shape[2:])


@torch.no_grad()
def evaluate_path_sets(
    model: SAN,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor | None = None,
    path_sets: torch.Tensor | np.ndarray | None = None,
    memory_mb: float = 32.0,
) -> torch.Tensor:
    """Token accuracy ``(S, *path_sets.shape[:-2])`` (float64) of every seed's network (a :class:`SAN` of S seeds)
    restricted to each set of ``path_sets`` ``(..., P, L)`` (:data:`PAD` rows allowed for smaller sets; the same sets
    for every seed), on every seed's evaluation set ``inputs``, ``labels`` (< 0: not scored), ``mask``, stacked
    ``(S, N, tokens, ...)``.

    All paths of all sets form one prefix tree: shared prefixes are computed once, skips cost nothing, and each
    (layer, head) is one head computation over all tree nodes that take it, for all seeds; each set's sum of final
    states is a sparse matrix product. The inputs are processed in chunks sized to the ``memory_mb`` budget.
    """
    ev = _PathSetEvaluator(model, path_sets)
    correct = torch.zeros(ev.n_seeds, ev.n_sets, dtype=torch.float64, device=ev.device)
    total = torch.zeros(ev.n_seeds, dtype=torch.float64, device=ev.device)
    for x, y, m in _chunks(inputs, labels, mask, ev.chunk_size(inputs.shape[2], memory_mb), ev.device):
        pred = ev.logits(x, m).argmax(-1)  # (S, sets, b, n)
        valid = y >= 0
        correct += ((pred == y[:, None]) & valid[:, None]).sum(dim=(2, 3)).double()
        total += valid.sum(dim=(1, 2)).double()
    return (correct / total[:, None]).cpu().reshape(ev.n_seeds, *ev.batch_shape)


@torch.no_grad()
def model_accuracy(
    model: SAN, inputs: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None, batch_size: int = 256
) -> np.ndarray:
    """Token accuracy of every seed's full network (all paths: the normal forward pass) on its own evaluation set
    (``inputs`` ``(S, N, tokens, ...)``), ``(S,)``."""
    model.eval()
    device = next(model.parameters()).device
    correct = torch.zeros(len(model.seeds), dtype=torch.long, device=device)
    total = torch.zeros_like(correct)
    for x, y, m in _chunks(inputs, labels, mask, batch_size, device):
        valid = y >= 0
        correct += ((model(x, m).argmax(-1) == y) & valid).sum(dim=(1, 2))
        total += valid.sum(dim=(1, 2))
    return np.array([c / t for c, t in zip(correct.tolist(), total.tolist(), strict=True)])
