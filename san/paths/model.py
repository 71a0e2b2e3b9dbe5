"""The self-attention network (SAN) of the path-effectiveness experiment (the paper's Fig. 4).

A BERT-style encoder without MLP blocks: an input embedding ``X_0``, then ``L`` post-LN self-attention layers

    ``X_l = LayerNorm(X_{l-1} + sum_h P_h X_{l-1} W^V_h W^O_h + 1 b_O^T)``          (Eq. 1 plus a skip connection)

and a per-token linear classifier. Expanding the skip connections turns the network into a sum over *paths*, each
taking at every layer either the identity or one head (the paper's path decomposition, Sec. 2.1);
:mod:`san.paths.evaluate` evaluates such paths with the per-head maps that
:class:`~san.core.attention.MultiHeadSelfAttention` exposes.

Inputs are either tokens (sorting, memorisation: word plus learned position embeddings, a linear map, LayerNorm)
or 2-D points (convex hull, circle: a linear map of the coordinates, or two linear maps with a GELU between, then
LayerNorm; no position embeddings since the input is a set). Dropout acts while training on the embedding, the
attention probabilities, the attention output and the classifier input, as in BERT and the authors' code.

Speed (these models are tiny, so a training step costs overhead, not arithmetic): dropout masks are drawn in bulk
from numpy's PCG64 generator (:class:`DropoutMasks`), and while training each layer is one autograd node with a
hand-written backward (:mod:`san.paths.fused`; :meth:`SAN.set_fused` switches back to autograd over the explicit
formulation of :meth:`SANLayer.attention`, which uses the same masks). In eval mode the layer calls
:meth:`MultiHeadSelfAttention.forward` unchanged; the three formulations are tested to agree.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from san.core.attention import MultiHeadSelfAttention, softmax_last
from san.paths.fused import SANLayerFunction


@dataclass(frozen=True)
class SANConfig:
    """Architecture of a :class:`SAN`.

    Args:
        input_kind: ``"tokens"`` (integer ids) or ``"points"`` (real coordinates).
        n_layers: depth L.
        n_heads: heads per layer H.
        dim: hidden dimension d (divisible by H).
        n_classes: labels of the per-token classifier.
        vocab_size: token vocabulary (tokens only).
        max_len: number of learned position embeddings (tokens only).
        point_dim: coordinates per point (points only).
        point_mlp: points only: embed with ``Linear -> GELU -> Linear`` (convex hull) instead of one ``Linear``.
        dropout: dropout probability while training.
        layer_norm_eps: epsilon of every LayerNorm (BERT's 1e-12), also of the affine-free ones of path evaluation.
    """

    input_kind: Literal["tokens", "points"]
    n_layers: int
    n_heads: int
    dim: int
    n_classes: int
    vocab_size: int = 0
    max_len: int = 0
    point_dim: int = 2
    point_mlp: bool = False
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12

    def __post_init__(self) -> None:
        if self.input_kind not in ("tokens", "points"):
            raise ValueError(f"input_kind must be 'tokens' or 'points', got {self.input_kind!r}")
        if self.dim % self.n_heads:
            raise ValueError(f"dim {self.dim} is not divisible by n_heads {self.n_heads}")
        if self.input_kind == "tokens" and (self.vocab_size < 1 or self.max_len < 1):
            raise ValueError("a token SAN needs vocab_size >= 1 and max_len >= 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SANConfig:
        return cls(**d)


class DropoutMasks:
    """Source of inverted-dropout masks drawn from numpy's PCG64 generator, in bulk.

    A mask keeps each element independently with probability ``1 - q / 2^16`` where ``q = round(p 2^16)`` (for
    ``p = 0.1``: drop probability 0.100006) and scales kept elements by ``1 / (1 - p)``. Masks are consecutive
    slices of a pool of ``pool_size`` elements refilled at once (raw 64-bit PCG64 words split into four 16-bit
    draws, compared and scaled in numpy), because drawing each small mask separately costs a call's overhead that
    is a sizeable part of a training step of the tiny SANs of Fig. 4 (``benchmarks/bench_paths.py``). Seeded, hence
    reproducible: the same seed and sequence of requests give the same masks. Masks are read-only views.
    """

    def __init__(self, seed: int = 0, pool_size: int = 1 << 20) -> None:
        self.pool_size = pool_size
        self.seed(seed)

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self._pool: torch.Tensor | None = None
        self._key: tuple[float, torch.dtype, torch.device] | None = None
        self._pos = 0

    def get_state(self) -> dict[str, Any]:
        """Everything the next masks depend on (the generator's state, the pool and the position in it)."""
        pool = None if self._pool is None else self._pool.clone()
        return {"rng": self.rng.bit_generator.state, "pool": pool, "key": self._key, "pos": self._pos}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue exactly where :meth:`get_state` was taken."""
        self.rng.bit_generator.state = state["rng"]
        self._pool, self._key, self._pos = state["pool"], state["key"], state["pos"]

    def _refill(self, n: int, p: float, like: torch.Tensor) -> None:
        size = max(n, self.pool_size)
        threshold = round(p * 65536) - 32768  # uniform int16 >= threshold: kept
        draws = self.rng.bit_generator.random_raw(-(-size // 4)).view(np.int16)[:size]
        scale = np.float64(1.0 / (1.0 - p))
        keep = np.multiply(draws >= threshold, scale, dtype=np.float64 if like.dtype == torch.float64 else np.float32)
        self._pool = torch.from_numpy(keep).to(device=like.device, dtype=like.dtype)
        self._key = (p, like.dtype, like.device)
        self._pos = 0

    def fill(self, out: torch.Tensor, sizes: list[int], p: float) -> None:
        """Write into the flat ``out`` the masks that consecutive :meth:`mask` calls of ``sizes`` elements would
        return, one after the other: the same stream, in one copy when they all lie in the current pool (a batched
        model draws all of a step's masks of one seed at once this way)."""
        total = sum(sizes)
        if self._pool is not None and self._key == (p, out.dtype, out.device) and self._pos + total <= len(self._pool):
            out.copy_(self._pool[self._pos : self._pos + total])
            self._pos += total
            return
        start = 0
        for n in sizes:
            out[start : start + n].copy_(self.mask(torch.Size((n,)), p, out))
            start += n

    @torch.compiler.disable  # host-side bookkeeping: run eagerly under torch.compile instead of guarding on it
    def mask(self, shape: torch.Size, p: float, like: torch.Tensor) -> torch.Tensor:
        """A float mask of ``shape`` (dtype and device of ``like``): 0 or ``1 / (1 - p)``."""
        n = math.prod(shape)
        if self._pool is None or self._key != (p, like.dtype, like.device) or self._pos + n > len(self._pool):
            self._refill(n, p, like)
        assert self._pool is not None
        out = self._pool[self._pos : self._pos + n].view(shape)
        self._pos += n
        return out


class Dropout(nn.Module):
    """Inverted dropout with masks from a shared :class:`DropoutMasks` (identity in eval mode or for p = 0)."""

    def __init__(self, p: float, masks: DropoutMasks) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p
        self.masks = masks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        return x * self.masks.mask(x.shape, self.p, x)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class TokenEmbedding(nn.Module):
    """``LayerNorm(Linear(E_word[x] + E_pos))``: word plus learned position embeddings, a linear map, LayerNorm."""

    def __init__(self, cfg: SANConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.position = nn.Embedding(cfg.max_len, cfg.dim)
        self.linear = nn.Linear(cfg.dim, cfg.dim)
        self.norm = nn.LayerNorm(cfg.dim, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] > self.position.num_embeddings:
            raise ValueError(f"sequence of {x.shape[1]} tokens exceeds max_len {self.position.num_embeddings}")
        return self.norm(self.linear(self.word(x) + self.position.weight[: x.shape[1]]))


class PointEmbedding(nn.Module):
    """``LayerNorm(Linear(x))``, or ``LayerNorm(Linear(GELU(Linear(x))))`` with ``point_mlp``; equivariant to order."""

    def __init__(self, cfg: SANConfig) -> None:
        super().__init__()
        self.linear = nn.Linear(cfg.point_dim, cfg.dim)
        self.linear2 = nn.Linear(cfg.dim, cfg.dim) if cfg.point_mlp else None
        self.norm = nn.LayerNorm(cfg.dim, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        if self.linear2 is not None:
            h = self.linear2(nn.functional.gelu(h))
        return self.norm(h)


class SANLayer(nn.Module):
    """``LayerNorm(X + Dropout(SA(X)))``: multi-head self-attention with a skip connection, no MLP block."""

    def __init__(self, cfg: SANConfig, masks: DropoutMasks) -> None:
        super().__init__()
        self.attn = MultiHeadSelfAttention(cfg.dim, cfg.n_heads, dropout=cfg.dropout)
        self.attn_dropout = Dropout(cfg.dropout, masks)
        self.dropout = Dropout(cfg.dropout, masks)
        self.norm = nn.LayerNorm(cfg.dim, eps=cfg.layer_norm_eps)
        self.fused = True  # training mode: one autograd node with a hand-written backward (san.paths.fused)

    def attention(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``SA(X)``: :meth:`MultiHeadSelfAttention.forward` in eval mode; while training the same computation
        with explicit batched products and dropout on the attention probabilities."""
        attn = self.attn
        if not self.training:
            return attn(x, mask)
        b, n, _ = x.shape
        q, k, v = attn.qkv(x).view(b, n, 3, attn.n_heads, attn.head_dim).unbind(2)  # (b, n, H, d_h) each
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * (1.0 / math.sqrt(attn.head_dim))
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        probs = self.attn_dropout(softmax_last(scores))
        ctx = torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, n, attn.dim)
        return attn.out(ctx)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.training and self.fused:
            return self.fused_forward(x, mask)
        return self.norm(x + self.dropout(self.attention(x, mask)))

    def fused_forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The training-mode layer as one :class:`~san.paths.fused.SANLayerFunction` (hand-written backward), with the
        same dropout masks, drawn in the same order, as the autograd formulation."""
        b, n, d = x.shape
        attn, p = self.attn, self.dropout.p
        keep_p = keep_o = None
        if p > 0.0:
            keep_p = self.dropout.masks.mask(torch.Size((b * attn.n_heads, n, n)), p, x)
            keep_o = self.dropout.masks.mask(torch.Size((b * n, d)), p, x)
        return SANLayerFunction.apply(
            x,
            attn.qkv.weight,
            attn.qkv.bias,
            attn.out.weight,
            attn.out.bias,
            self.norm.weight,
            self.norm.bias,
            keep_p,
            keep_o,
            mask,
            attn.n_heads,
            self.norm.eps,
        )


class SAN(nn.Module):
    """Self-attention network with skip connections and a per-token classifier (the models of Fig. 4).

    ``forward(inputs, mask)`` returns logits of shape ``(batch, tokens, n_classes)``; ``mask`` (bool,
    ``(batch, tokens)``, True for real tokens) hides padding from attention. :meth:`embed` gives ``X_0``,
    ``layers[l].attn`` the addressable heads of layer ``l`` and ``classifier`` the output map, which is all that
    path evaluation needs.
    """

    def __init__(self, cfg: SANConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.dropout_masks = DropoutMasks()
        self.embedding: nn.Module = TokenEmbedding(cfg) if cfg.input_kind == "tokens" else PointEmbedding(cfg)
        self.embed_dropout = Dropout(cfg.dropout, self.dropout_masks)
        self.layers = nn.ModuleList(SANLayer(cfg, self.dropout_masks) for _ in range(cfg.n_layers))
        self.classifier_dropout = Dropout(cfg.dropout, self.dropout_masks)
        self.classifier = nn.Linear(cfg.dim, cfg.n_classes)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialisation of the authors' code: BERT's N(0, 0.02) for embeddings, queries, keys and the other
        linear maps, zero biases, unit LayerNorms; PyTorch's default Kaiming-uniform for the value and output maps
        of every head (which the authors kept as raw parameters), so that each head starts with an O(1) gain."""
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
            if isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        d = self.cfg.dim
        bound = 1.0 / math.sqrt(d)  # kaiming_uniform_(a=sqrt(5)) of a (d, d) map
        for layer in self.layers:
            nn.init.uniform_(layer.attn.qkv.weight[2 * d :], -bound, bound)
            nn.init.uniform_(layer.attn.out.weight, -bound, bound)

    def set_fused(self, fused: bool) -> None:
        """Train every layer as one :class:`~san.paths.fused.SANLayerFunction` (hand-written backward, the default) or
        through autograd op by op (:meth:`SANLayer.attention`); both compute the same function, with the same
        dropout masks. Eval mode always uses :meth:`MultiHeadSelfAttention.forward`."""
        for layer in self.layers:
            layer.fused = fused

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:
        """The input embedding ``X_0`` of shape ``(batch, tokens, dim)`` (dropout only while training)."""
        return self.embed_dropout(self.embedding(inputs))

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embed(inputs)
        for layer in self.layers:
            x = layer(x, mask)
        return self.classifier(self.classifier_dropout(x))


def save_san(model: SAN, path: str, metadata: dict[str, str] | None = None) -> None:
    """Write the weights as safetensors with the architecture (JSON) in the file's metadata."""
    import json

    from safetensors.torch import save_file

    meta = {"san_config": json.dumps(model.cfg.to_dict(), sort_keys=True), **(metadata or {})}
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, path, metadata=meta)


def load_san(path: str, device: torch.device | str = "cpu") -> tuple[SAN, dict[str, str]]:
    """Rebuild a :class:`SAN` from a file written by :func:`save_san`; returns the model (eval mode) and metadata."""
    import json

    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(path, framework="pt") as fh:
        meta = dict(fh.metadata() or {})
    if "san_config" not in meta:
        raise ValueError(f"{path} has no san_config metadata: not written by san.paths.model.save_san")
    model = SAN(SANConfig.from_dict(json.loads(meta["san_config"])))
    model.load_state_dict(load_file(path, device=str(device)))
    return model.to(device).eval(), meta


def save_seeds(models: list[SAN], seeds: list[int], path: str, metadata: dict[str, str] | None = None) -> None:
    """Write the models of several seeds of one architecture as one safetensors file: every weight stacked on a
    leading seed dimension, the architecture and the seeds (JSON) in the metadata."""
    import json

    from safetensors.torch import save_file

    if len(models) != len(seeds) or len({m.cfg for m in models}) != 1:
        raise ValueError("save_seeds needs one model per seed, all of one architecture")
    meta = {"san_config": json.dumps(models[0].cfg.to_dict(), sort_keys=True), "seeds": json.dumps(list(seeds))}
    states = [m.state_dict() for m in models]
    stacked = {k: torch.stack([st[k].detach().cpu() for st in states]).contiguous() for k in states[0]}
    save_file(stacked, path, metadata={**meta, **(metadata or {})})


def load_seeds(path: str, device: torch.device | str = "cpu") -> tuple[list[SAN], list[int], dict[str, str]]:
    """The models (eval mode), seeds and metadata of a file written by :func:`save_seeds`."""
    import json

    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(path, framework="pt") as fh:
        meta = dict(fh.metadata() or {})
    if "san_config" not in meta or "seeds" not in meta:
        raise ValueError(f"{path} has no san_config/seeds metadata: not written by san.paths.model.save_seeds")
    cfg, seeds = SANConfig.from_dict(json.loads(meta["san_config"])), json.loads(meta["seeds"])
    stacked = load_file(path, device=str(device))
    models = []
    for i in range(len(seeds)):
        model = SAN(cfg)
        model.load_state_dict({k: v[i] for k, v in stacked.items()})
        models.append(model.to(device).eval())
    return models, seeds, meta
