"""The self-attention network (SAN) of the path-effectiveness experiment (the paper's Fig. 4), for S seeds at once.

A BERT-style encoder without MLP blocks: an input embedding ``X_0``, then ``L`` post-LN self-attention layers

    ``X_l = LayerNorm(X_{l-1} + sum_h P_h X_{l-1} W^V_h W^O_h + 1 b_O^T)``          (Eq. 1 plus a skip connection)

and a per-token linear classifier. Expanding the skip connections turns the network into a sum over *paths*, each
taking at every layer either the identity or one head (the paper's path decomposition, Sec. 2.1);
:mod:`san.paths.evaluate` evaluates such paths with the per-head weights that :meth:`SeedAttention.head_weights`
exposes.

Inputs are either tokens (sorting, memorisation: word plus learned position embeddings, a linear map, LayerNorm)
or 2-D points (convex hull, circle: a linear map of the coordinates, or two linear maps with a GELU between, then
LayerNorm; no position embeddings since the input is a set). Dropout acts while training on the embedding, the
attention probabilities, the attention output and the classifier input, as in BERT and the authors' code.

**One network on a seed axis.** A :class:`SAN` holds the networks of S >= 1 seeds of one architecture: every
weight, input and output carries a leading seed dimension. Seeds share no parameter, so the gradient of the sum of
their losses is each seed's own and Adam/AdamW, elementwise, update each seed as it would alone. A seed's weights come
from its own CPU generator (:func:`san.core.rng.cpu_generator`), its dropout masks from its own :class:`DropoutMasks`
(numpy's PCG64, in bulk), so its numbers depend neither on the device nor on the other seeds. While training, several
seeds run one batched product per weight and pay the per-step overhead once; one seed, and every seed in eval mode,
runs the 2-D products of a lone network (:func:`san.paths.fused.seed_linear`). Each training layer is one autograd
node with a hand-written backward (:mod:`san.paths.fused`; ``fused = False``: :meth:`SANLayer.autograd_forward`, the
same masks); in eval mode :meth:`SeedAttention.forward`. The three are tested to agree.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from san.core.attention import softmax_last
from san.core.rng import cpu_generator
from san.paths.fused import SANLayerFunction, seed_linear


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
        """Continue exactly where :meth:`get_state` was taken. The pool goes back to the device its key names (a
        checkpoint is read onto the CPU), so that the next masks come from it on the training's device."""
        pool, key = state["pool"], state["key"]
        self.rng.bit_generator.state = state["rng"]
        self._pool = None if pool is None or key is None else pool.to(device=key[2], dtype=key[1])
        self._key, self._pos = key, state["pos"]

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


class SeedLinear(nn.Module):
    """One affine map ``x W_s^T + b_s`` per seed: ``weight`` ``(S, out, in)``, ``bias`` ``(S, out)``; inputs
    ``(S, ..., in)``. Batched over the seeds while training, seed by seed in eval mode (:func:`seed_linear`)."""

    def __init__(self, n_seeds: int, d_in: int, d_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_seeds, d_out, d_in))
        self.bias = nn.Parameter(torch.empty(n_seeds, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] == 1:  # nn.functional.linear of a lone network (its product for contiguous inputs)
            return nn.functional.linear(x.squeeze(0), self.weight.squeeze(0), self.bias.squeeze(0)).unsqueeze(0)
        out = seed_linear(x.reshape(x.shape[0], -1, x.shape[-1]), self.weight, self.bias, batched=self.training)
        return out.view(*x.shape[:-1], -1)


class SeedEmbedding(nn.Module):
    """One embedding table per seed, ``weight`` ``(S, entries, dim)``."""

    def __init__(self, n_seeds: int, n_entries: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_seeds, n_entries, dim))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows of seed s's table for ``ids[s]``: ``(S, ...)`` -> ``(S, ..., dim)`` (one lookup for all seeds)."""
        s_, n_entries = self.weight.shape[:2]
        if s_ == 1:
            return nn.functional.embedding(ids.squeeze(0), self.weight.squeeze(0)).unsqueeze(0)
        offset = (torch.arange(s_, device=ids.device) * n_entries).view(s_, *[1] * (ids.ndim - 1))
        return nn.functional.embedding(ids + offset, self.weight.flatten(0, 1))


class SeedLayerNorm(nn.Module):
    """One LayerNorm per seed, affine ``weight``, ``bias`` ``(S, dim)``: each seed's ``nn.functional.layer_norm``
    (one seed, and eval mode), or while training several seeds the affine-free normalisation of all rows and one
    per-seed affine map."""

    def __init__(self, n_seeds: int, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_seeds, dim))
        self.bias = nn.Parameter(torch.empty(n_seeds, dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s_, w, b, d = x.shape[0], self.weight, self.bias, x.shape[-1:]
        if s_ == 1:  # squeeze, not select: its backward is a view, not a copy into zeros
            return nn.functional.layer_norm(x.squeeze(0), d, w.squeeze(0), b.squeeze(0), self.eps).unsqueeze(0)
        if not self.training:
            return torch.stack([nn.functional.layer_norm(x[i], d, w[i], b[i], self.eps) for i in range(s_)])
        xhat = nn.functional.layer_norm(x.reshape(s_, -1, d[0]), d, eps=self.eps)
        return torch.addcmul(b[:, None, :], xhat, w[:, None, :]).view(x.shape)


class TokenEmbedding(nn.Module):
    """``LayerNorm(Linear(E_word[x] + E_pos))``: word plus learned position embeddings, a linear map, LayerNorm."""

    def __init__(self, cfg: SANConfig, n_seeds: int) -> None:
        super().__init__()
        self.word = SeedEmbedding(n_seeds, cfg.vocab_size, cfg.dim)
        self.position = SeedEmbedding(n_seeds, cfg.max_len, cfg.dim)
        self.linear = SeedLinear(n_seeds, cfg.dim, cfg.dim)
        self.norm = SeedLayerNorm(n_seeds, cfg.dim, cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[2] > self.position.weight.shape[1]:
            raise ValueError(f"sequence of {x.shape[2]} tokens exceeds max_len {self.position.weight.shape[1]}")
        return self.norm(self.linear(self.word(x) + self.position.weight[:, None, : x.shape[2]]))


class PointEmbedding(nn.Module):
    """``LayerNorm(Linear(x))``, or ``LayerNorm(Linear(GELU(Linear(x))))`` with ``point_mlp``; equivariant to order."""

    def __init__(self, cfg: SANConfig, n_seeds: int) -> None:
        super().__init__()
        self.linear = SeedLinear(n_seeds, cfg.point_dim, cfg.dim)
        self.linear2 = SeedLinear(n_seeds, cfg.dim, cfg.dim) if cfg.point_mlp else None
        self.norm = SeedLayerNorm(n_seeds, cfg.dim, cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        if self.linear2 is not None:
            h = self.linear2(nn.functional.gelu(h))
        return self.norm(h)


class SeedAttention(nn.Module):
    """Multi-head self-attention (Eq. 1) of every seed, laid out as
    :class:`~san.core.attention.MultiHeadSelfAttention`: one fused query-key-value map ``qkv`` (rows query, key,
    value, head-major within each) and the output map ``out``, each with a leading seed dimension."""

    def __init__(self, n_seeds: int, dim: int, n_heads: int) -> None:
        super().__init__()
        self.dim, self.n_heads, self.head_dim = dim, n_heads, dim // n_heads
        self.qkv = SeedLinear(n_seeds, dim, 3 * dim)
        self.out = SeedLinear(n_seeds, dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``SA(X)`` of every seed (no dropout): ``x`` ``(S, b, n, d)``, ``mask`` ``(S, b, n)`` bool (True for real
        tokens) or None; :meth:`MultiHeadSelfAttention.forward`'s computation."""
        s_, b, n, d = x.shape
        q, k, v = self.qkv(x).view(s_ * b, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        ctx = nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=None if mask is None else mask.reshape(s_ * b, 1, 1, n)
        )
        return self.out(ctx.transpose(1, 2).reshape(s_, b, n, d))

    def head_weights(self, head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Head ``head``'s query-key-value rows ``(S, 3 d_h, d)``, biases ``(S, 3 d_h)`` and output columns
        ``(S, d, d_h)`` (one seed: a view, several: a copy; the layouts :mod:`san.paths.evaluate` multiplies)."""
        s_, h, dh, d = self.qkv.weight.shape[0], self.n_heads, self.head_dim, self.dim
        w = self.qkv.weight.view(s_, 3, h, dh, d)[:, :, head].reshape(s_, 3 * dh, d)
        bias = self.qkv.bias.view(s_, 3, h, dh)[:, :, head].reshape(s_, 3 * dh)
        w_o = self.out.weight[:, :, head * dh : (head + 1) * dh]
        return w, bias, w_o if s_ == 1 else w_o.contiguous()


class SANLayer(nn.Module):
    """``LayerNorm(X + Dropout(SA(X)))`` of every seed: multi-head self-attention with a skip connection, no MLP."""

    def __init__(self, cfg: SANConfig, n_seeds: int) -> None:
        super().__init__()
        self.attn = SeedAttention(n_seeds, cfg.dim, cfg.n_heads)
        self.norm = SeedLayerNorm(n_seeds, cfg.dim, cfg.layer_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        keep_p: torch.Tensor | None = None,
        keep_o: torch.Tensor | None = None,
        fused: bool = True,
    ) -> torch.Tensor:
        """``x`` ``(S, b, n, d)``; ``keep_p`` ``(S, b H, n, n)`` and ``keep_o`` ``(S, b n, d)`` dropout masks (training
        only) or None. Eval mode: :meth:`SeedAttention.forward`; training: the fused layer or its autograd twin."""
        if not self.training:
            return self.norm(x + self.attn(x, mask))
        if not fused:
            return self.autograd_forward(x, mask, keep_p, keep_o)
        a, norm = self.attn, self.norm
        weights = (a.qkv.weight, a.qkv.bias, a.out.weight, a.out.bias, norm.weight, norm.bias)
        return SANLayerFunction.apply(x, *weights, keep_p, keep_o, mask, a.n_heads, norm.eps)

    def autograd_forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, keep_p: torch.Tensor | None, keep_o: torch.Tensor | None
    ) -> torch.Tensor:
        """The training-mode layer op by op under autograd (explicit batched products, dropout on the attention
        probabilities): the reference of :class:`~san.paths.fused.SANLayerFunction`, and what ``compile`` traces."""
        attn = self.attn
        s_, b, n, d = x.shape
        q, k, v = attn.qkv(x).view(s_, b, n, 3, attn.n_heads, attn.head_dim).unbind(3)  # (S, b, n, H, d_h) each
        scores = torch.einsum("sbqhd,sbkhd->sbhqk", q, k) * (1.0 / math.sqrt(attn.head_dim))
        if mask is not None:
            scores = scores.masked_fill(~mask[:, :, None, None, :], float("-inf"))
        probs = softmax_last(scores)
        if keep_p is not None:
            probs = probs * keep_p.view(probs.shape)
        o = attn.out(torch.einsum("sbhqk,sbkhd->sbqhd", probs, v).reshape(s_, b, n, d))
        return self.norm(x + (o if keep_o is None else o * keep_o.view(o.shape)))


class SAN(nn.Module):
    """Self-attention networks with skip connections and a per-token classifier (the models of Fig. 4), one per seed
    of ``seeds``, stacked (see the module docstring). ``forward(inputs, mask)``: every seed's batch, ``(S, batch,
    tokens)`` tokens or ``(S, batch, tokens, 2)`` points, and padding ``mask`` (True for real tokens) -> logits
    ``(S, batch, tokens, n_classes)``. :meth:`embed` gives ``X_0``, ``layers[l].attn`` the heads of layer ``l``,
    ``classifier`` the output map: all that path evaluation needs. ``fused``: see :meth:`SANLayer.forward`."""

    def __init__(self, cfg: SANConfig, seeds: list[int]) -> None:
        super().__init__()
        if len(seeds) < 1:
            raise ValueError("a SAN needs at least one seed")
        self.cfg, self.seeds, self.fused = cfg, [int(s) for s in seeds], True
        n = len(self.seeds)
        self.embedding: nn.Module = TokenEmbedding(cfg, n) if cfg.input_kind == "tokens" else PointEmbedding(cfg, n)
        self.layers = nn.ModuleList(SANLayer(cfg, n) for _ in range(cfg.n_layers))
        self.classifier = SeedLinear(n, cfg.dim, cfg.n_classes)
        self.masks = [DropoutMasks(seed) for seed in self.seeds]
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Initialisation of the authors' code: BERT's N(0, 0.02) for embeddings, queries, keys and the other
        linear maps, zero biases, unit LayerNorms; PyTorch's default Kaiming-uniform for the value and output maps
        of every head (which the authors kept as raw parameters), so that each head starts with an O(1) gain.

        Seed s draws from ``cpu_generator(s)``, in module order: the ``torch.nn`` constructors' default draws (then
        overwritten), then the draws above; so its weights are those of the network built from ``torch.nn`` modules
        after ``torch.manual_seed(s)`` and re-initialised, on any device."""
        d = self.cfg.dim
        bound = 1.0 / math.sqrt(d)  # kaiming_uniform_(a=sqrt(5)) of a (d, d) map
        for i, seed in enumerate(self.seeds):
            gen = cpu_generator(seed)
            for module in self.modules():  # the constructors' draws
                if isinstance(module, SeedEmbedding):
                    module.weight[i].normal_(generator=gen)
                elif isinstance(module, SeedLinear):
                    module.weight[i].uniform_(generator=gen)
                    module.bias[i].uniform_(generator=gen)
            for module in self.modules():
                if isinstance(module, SeedLinear | SeedEmbedding):
                    module.weight[i].normal_(0.0, 0.02, generator=gen)
                if isinstance(module, SeedLinear):
                    module.bias[i].zero_()
                if isinstance(module, SeedLayerNorm):
                    module.weight[i].fill_(1.0)
                    module.bias[i].zero_()
            for layer in self.layers:
                layer.attn.qkv.weight[i, 2 * d :].uniform_(-bound, bound, generator=gen)
                layer.attn.out.weight[i].uniform_(-bound, bound, generator=gen)

    def embed(self, inputs: torch.Tensor) -> torch.Tensor:
        """The input embedding ``X_0`` of every seed, ``(S, batch, tokens, dim)`` (before dropout)."""
        return self.embedding(inputs)

    def step_masks(self, x: torch.Tensor, b: int, n: int) -> list[torch.Tensor] | None:
        """Every dropout mask of one training step of every seed, drawn into one ``(S, total)`` buffer (one
        :meth:`DropoutMasks.fill` per seed): the embedding's ``(S, b n, d)``, then per layer the attention's
        ``(S, b H, n, n)`` and the output's ``(S, b n, d)``, then the classifier input's (one seed: views of its pool).
        None without dropout."""
        cfg, p = self.cfg, self.cfg.dropout
        if p == 0.0:
            return None
        d, h = cfg.dim, cfg.n_heads
        shapes = [(b * n, d)] + [(b * h, n, n), (b * n, d)] * cfg.n_layers + [(b * n, d)]
        if len(self.masks) == 1:  # one seed: views of its pool, asked for one by one (the same stream)
            return [self.masks[0].mask(torch.Size((1, *sh)), p, x) for sh in shapes]
        sizes = [math.prod(sh) for sh in shapes]
        buf = torch.empty(len(self.masks), sum(sizes), dtype=x.dtype, device=x.device)
        for row, m in zip(buf, self.masks, strict=True):
            m.fill(row, sizes, p)
        views, start = [], 0
        for sh, size in zip(shapes, sizes, strict=True):
            views.append(buf[:, start : start + size].view(len(self.masks), *sh))
            start += size
        return views

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, n = inputs.shape[1], inputs.shape[2]
        x = self.embed(inputs)
        keeps = self.step_masks(x, b, n) if self.training else None
        if keeps is None:
            for layer in self.layers:
                x = layer(x, mask, fused=self.fused)
            return self.classifier(x)
        x = x * keeps[0].view(x.shape)
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, keeps[1 + 2 * i], keeps[2 + 2 * i], self.fused)
        return self.classifier(x * keeps[-1].view(x.shape))

    def member(self, i: int) -> SAN:
        """Seed ``i``'s network alone, a stack of one (eval mode, a copy of its weights): for references and tests."""
        model = SAN(self.cfg, [self.seeds[i]]).to(next(self.parameters()))
        model.load_state_dict({k: v[i : i + 1].detach().clone() for k, v in self.state_dict().items()})
        return model.eval()

    def save(self, path: str, metadata: dict[str, str] | None = None) -> None:
        """Write the stacked weights as safetensors with the architecture and the seeds (JSON) in the metadata."""
        meta = {"san_config": json.dumps(self.cfg.to_dict(), sort_keys=True), "seeds": json.dumps(self.seeds)}
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        save_file(state, path, metadata={**meta, **(metadata or {})})

    @classmethod
    def load(cls, path: str, device: torch.device | str = "cpu") -> tuple[SAN, dict[str, str]]:
        """The network (eval mode) and metadata of a file written by :meth:`save`."""
        with safe_open(path, framework="pt") as fh:
            meta = dict(fh.metadata() or {})
        if "san_config" not in meta or "seeds" not in meta:
            raise ValueError(f"{path} has no san_config/seeds metadata: not written by san.paths.model.SAN.save")
        model = cls(SANConfig.from_dict(json.loads(meta["san_config"])), json.loads(meta["seeds"]))
        model.load_state_dict(load_file(path, device="cpu"))
        return model.to(device).eval(), meta
