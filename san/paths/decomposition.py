"""Exact path-length decomposition of a trained SAN with skip connections (the paper's Sec. 2.1, Fig. 4).

The paper writes a SAN with skips as a sum over paths: at each layer a path takes the skip or one head, and its
*length* k is the number of layers where it takes a head (``C(L, k) H^k`` paths of length k). With every layer's
attention matrices ``P_h`` and LayerNorm scales ``sigma`` *frozen* at their values in the model's own forward pass,
each post-LN layer ``X_l = LN(X_{l-1} + sum_h P_h X_{l-1} W^V_h W^O_h + 1 b^T)`` is affine in ``X_{l-1}``:

- attention: ``P_h (X W^V_h + 1 b_{V,h}^T) W^O_h = P_h X W^V_h W^O_h + 1 b_{V,h}^T W^O_h`` since ``P_h`` is
  row-stochastic, so the value bias becomes a constant ``c = b_O + sum_h W^O_h b_{V,h}`` per token;
- LayerNorm: ``LN(z) = gamma * (z - mean(z)) / sigma + beta`` with ``sigma`` frozen is linear in ``z`` except the
  shift ``beta``: the mean-centring and the scaling act on every part alike.

So the final hidden state splits *exactly* into ``X_L = sum_{k=0..L} Y_k + C``: ``Y_k`` is the sum of the
``C(L, k) H^k`` paths of length k applied to the input embedding, and ``C`` collects the constants (the attention
constant ``c`` and the shift ``beta`` of every layer, each entering at its layer and then carried through the later
layers' frozen maps, skip and heads alike). Convention: the embedding output ``X_0`` (its own biases and LayerNorm
included) is the length-0 input, i.e. ``Y_0`` before the first layer. A dynamic programme over layers computes
all parts with ``L (L + 3) / 2`` frozen multi-head applications instead of enumerating ``(H + 1)^L`` paths: at layer
l every part passes the skip unchanged (same k) and every head (k + 1), then the frozen LayerNorm.

The classifier is linear, so the logits of a partial sum ``C + sum_{k<=K} Y_k`` are the classifier applied to it;
``K = L`` gives back the model's own logits. This answers "how much of the accuracy do paths of length <= K carry"
exactly, with the model's attention; the sampled protocol of :mod:`san.paths.evaluate` (the paper's Fig. 4)
instead recomputes each path's attention from the path's own state and renormalises it without the residual, a
different question.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import xarray as xr

from san.core.storage import describe
from san.paths.results import VARIABLES

if TYPE_CHECKING:
    from san.paths.model import SAN, SeedAttention

log = logging.getLogger("san")

#: float64 bytes of the parts of one chunk of inputs (all parts of all lengths), bounding memory
CHUNK_BYTES = 16 * 2**20


@dataclass
class FrozenPass:
    """The quantities of one forward pass that the decomposition freezes.

    ``embedding``: ``X_0`` ``(b, n, d)``; ``probs[l]``: attention matrices of layer l ``(b, H, n, n)``;
    ``sigma[l]``: LayerNorm scales ``sqrt(var(z) + eps)`` of layer l's pre-norm input ``(b, n, 1)``;
    ``output``: the final hidden state ``X_L`` of the model's own forward ``(b, n, d)``.
    """

    embedding: torch.Tensor
    probs: list[torch.Tensor]
    sigma: list[torch.Tensor]
    output: torch.Tensor


@dataclass
class Decomposition:
    """``output = parts.sum(0) + constant`` (up to round-off): ``parts[k]`` is ``Y_k``, the sum of all paths of
    length k, ``(L + 1, b, n, d)``; ``constant`` is ``C`` ``(b, n, d)``; ``output`` the model's ``X_L``."""

    parts: torch.Tensor
    constant: torch.Tensor
    output: torch.Tensor

    @property
    def reconstruction(self) -> torch.Tensor:
        return self.parts.sum(0) + self.constant


@torch.no_grad()
def frozen_pass(model: SAN, inputs: torch.Tensor, mask: torch.Tensor | None = None) -> FrozenPass:
    """Run the model (eval mode) layer by layer and record ``X_0``, every ``P_h``, every LayerNorm ``sigma`` and
    the final hidden state (each layer as :class:`~san.core.attention.MultiHeadSelfAttention` computes it, with
    the queries, keys and values projected once)."""
    x = model.embed(inputs[None])[0]
    embedding, probs, sigma = x, [], []
    for layer in model.layers:
        attn = layer.attn
        b, n, d = x.shape
        q, k, v = attn.qkv(x[None])[0].view(b, n, 3, attn.n_heads, attn.head_dim).permute(2, 0, 3, 1, 4)  # (b,H,n,dh)
        scores = q @ k.transpose(-1, -2) / math.sqrt(attn.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        p = torch.softmax(scores, dim=-1)
        z = x + attn.out((p @ v).transpose(1, 2).reshape(1, b, n, d))[0]
        probs.append(p)
        sigma.append(torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + layer.norm.eps))
        x = layer.norm(z[None])[0]
    return FrozenPass(embedding, probs, sigma, x)


def attention_constant(attn: SeedAttention) -> torch.Tensor:
    """The per-token constant that attention adds whatever its input: ``b_O + sum_h W^O_h b_{V,h}`` ``(d,)``
    (value biases pass row-stochastic attention unchanged)."""
    d = attn.dim
    return attn.out.bias[0] + attn.out.weight[0] @ attn.qkv.bias[0, 2 * d :]


def frozen_attention(parts: torch.Tensor, probs: torch.Tensor, attn: SeedAttention) -> torch.Tensor:
    """The linear part of multi-head attention with frozen ``P_h``: ``sum_h P_h Y W^V_h W^O_h`` for each of a stack
    of parts ``(P, b, n, d)`` (no biases), with ``probs`` ``(b, H, n, n)``. The parts share one product with each
    ``P_h`` (they are laid side by side in its columns)."""
    p, b, n, d = parts.shape
    heads, dh = attn.n_heads, attn.head_dim
    v = (parts @ attn.qkv.weight[0, 2 * d :].T).view(p, b, n, heads, dh).permute(1, 3, 2, 0, 4)  # (b, H, n, P, dh)
    ctx = probs @ v.reshape(b, heads, n, p * dh)
    ctx = ctx.view(b, heads, n, p, dh).permute(3, 0, 2, 1, 4).reshape(p, b, n, d)
    return ctx @ attn.out.weight[0].T


def frozen_norm_(parts: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The linear part of a LayerNorm with frozen ``sigma``, in place: ``(z - mean(z)) * gamma / sigma`` (shift
    excluded); ``scale`` is ``gamma / sigma`` ``(b, n, d)``."""
    return parts.sub_(parts.mean(-1, keepdim=True)).mul_(scale)


@torch.no_grad()
def decompose(model: SAN, inputs: torch.Tensor, mask: torch.Tensor | None = None) -> Decomposition:
    """Split the model's final hidden state into the parts ``Y_0..Y_L`` by path length and the constant ``C``.

    Dynamic programme over layers on a stack ``[C, Y_0, .., Y_L]``: at layer l the active parts ``[C, Y_0, .., Y_l]``
    go through the frozen attention once; the attention of ``Y_k`` joins ``Y_{k+1}`` and that of ``C`` stays in
    ``C``; every part keeps its skip; ``C`` receives the layer's attention constant; then all parts pass the frozen
    LayerNorm (``C`` also its shift). Works in the model's dtype; use float64 for round-off-level reconstruction.
    """
    fp = frozen_pass(model, inputs, mask)
    stack = fp.embedding.new_zeros(len(model.layers) + 2, *fp.embedding.shape)
    stack[1] = fp.embedding
    constant_live = False  # C stays exactly 0 until a nonzero bias or shift enters (always, at initialisation)
    for depth, (layer, probs, sigma) in enumerate(zip(model.layers, fp.probs, fp.sigma, strict=True)):
        first = 0 if constant_live else 1
        through = frozen_attention(stack[first : depth + 2], probs, layer.attn)
        stack[2 : depth + 3] += through[1 - first :]
        if constant_live:
            stack[0] += through[0]
        stack[0] += attention_constant(layer.attn)
        frozen_norm_(stack[: depth + 3], layer.norm.weight[0] / sigma)
        stack[0] += layer.norm.bias[0]
        constant_live = constant_live or bool(stack[0].any())
    return Decomposition(stack[1:], stack[0], fp.output)


def length_logits(model: SAN, dec: Decomposition) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of ``C + sum_{k<=K} Y_k`` for K = 0..L and of ``C + Y_k`` for k = 0..L, each ``(L + 1, b, n,
    classes)``: the classifier is linear, so they are sums of its linear map of every ``Y_k`` and its affine map
    of ``C``."""
    parts, constant = dec.parts @ model.classifier.weight[0].T, model.classifier(dec.constant[None])[0]
    return constant + parts.cumsum(0), constant + parts


def part_norms(dec: Decomposition, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Frobenius norms over each input's real tokens of every ``Y_k`` ``(L + 1, b)`` and of ``C`` ``(b,)``."""
    parts, constant = dec.parts, dec.constant
    if mask is not None:
        keep = mask[..., None].to(parts.dtype)
        parts, constant = parts * keep, constant * keep
    return torch.linalg.vector_norm(parts, dim=(-2, -1)), torch.linalg.vector_norm(constant, dim=(-2, -1))


def initial_model(trained: SAN) -> SAN:
    """The untrained SAN of a trained one (every seed): its architecture built from the seeds' own generators, as the
    training builds it."""
    from san.paths.model import SAN

    return SAN(trained.cfg, trained.seeds).eval()


def _chunks(n_inputs: int, per_input_bytes: int) -> Iterator[slice]:
    step = max(1, CHUNK_BYTES // max(1, per_input_bytes))
    for start in range(0, n_inputs, step):
        yield slice(start, min(start + step, n_inputs))


@dataclass
class StateSummary:
    """Per weight state: the measured quantities of :func:`run` (numpy, float64)."""

    reconstruction_error: float
    norms: np.ndarray  # (b, L + 1)
    constant_norms: np.ndarray  # (b,)
    truncated_accuracy: np.ndarray  # (L + 1,)
    truncated_agreement: np.ndarray  # (L + 1,)
    single_length_accuracy: np.ndarray  # (L + 1,)
    full_accuracy: float


@torch.no_grad()
def summarise(model: SAN, inputs: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None = None) -> StateSummary:
    """Decompose every input (float64, in chunks) and measure reconstruction, norms and accuracies.

    Accuracy counts tokens with a label >= 0, as :func:`san.paths.evaluate.model_accuracy`; norms and the
    reconstruction error are over real tokens (``mask``).
    """
    model = copy.deepcopy(model).to(torch.float64).eval()
    cfg = model.cfg
    n_parts = cfg.n_layers + 2
    per_input = 8 * inputs.shape[1] * (3 * n_parts * cfg.dim + cfg.n_heads * inputs.shape[1] * cfg.n_layers)
    error, norms, cnorms = 0.0, [], []
    correct_t = torch.zeros(cfg.n_layers + 1, dtype=torch.float64)
    agree_t, correct_s = torch.zeros_like(correct_t), torch.zeros_like(correct_t)
    correct_full, total = 0.0, 0
    for sl in _chunks(len(inputs), per_input):
        x = inputs[sl] if inputs.dtype == torch.long else inputs[sl].to(torch.float64)
        y = labels[sl]
        m = None if mask is None else mask[sl]
        dec = decompose(model, x, m)
        real = torch.ones(y.shape, dtype=torch.bool) if m is None else m
        error = max(error, float((dec.reconstruction - dec.output).abs()[real].max()))
        pn, cn = part_norms(dec, m)
        norms.append(pn.T.numpy())
        cnorms.append(cn.numpy())
        valid = y >= 0
        full_pred = model.classifier(dec.output[None])[0].argmax(-1)
        truncated, single = length_logits(model, dec)
        trunc_pred, single_pred = truncated.argmax(-1), single.argmax(-1)
        correct_full += float(((full_pred == y) & valid).sum())
        correct_t += ((trunc_pred == y) & valid).sum((1, 2)).double()
        agree_t += ((trunc_pred == full_pred) & valid).sum((1, 2)).double()
        correct_s += ((single_pred == y) & valid).sum((1, 2)).double()
        total += int(valid.sum())
    return StateSummary(
        reconstruction_error=error,
        norms=np.concatenate(norms),
        constant_norms=np.concatenate(cnorms),
        truncated_accuracy=(correct_t / total).numpy(),
        truncated_agreement=(agree_t / total).numpy(),
        single_length_accuracy=(correct_s / total).numpy(),
        full_accuracy=correct_full / total,
    )


def _summaries(
    models: dict[str, SAN], inputs: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None
) -> dict[str, StateSummary]:
    """:func:`summarise` of every weight state, logged."""
    summaries = {}
    for state, m in models.items():
        summaries[state] = s = summarise(m, inputs, labels, mask)
        log.info(
            "%s: reconstruction error %.2e, norm share by length %s, truncated accuracy %s (full %.4f)",
            state,
            s.reconstruction_error,
            np.round((s.norms / s.norms.sum(1, keepdims=True)).mean(0), 3).tolist(),
            np.round(s.truncated_accuracy, 4).tolist(),
            s.full_accuracy,
        )
    return summaries


def run(model: SAN, evs: list[Any], init_model: SAN | None = None, chances: list[float] | None = None) -> xr.Dataset:
    """Exact path-length decomposition of the trained SAN ``model`` of every seed (each seed copied and cast to
    float64; not changed) and of its untrained ``init_model`` (:func:`initial_model`; None: only the trained state),
    seed i on its own evaluation set ``evs[i]`` (``inputs``, ``labels`` < 0 not scored, ``mask`` True for real
    tokens), with the input-blind ``chances[i]`` stored alongside for the claims. A dataset over ``seed``, ``state``
    (trained, init), ``path_length`` k, ``max_path_length`` K and ``sample`` (input). Each seed is decomposed alone
    (the dynamic programme runs on one network's frozen attention, in chunks of inputs)."""
    parts = []
    for i, ev in enumerate(evs):
        models = {"trained": model.member(i)} | ({"init": init_model.member(i)} if init_model is not None else {})
        ds = _dataset(_summaries(models, ev.inputs, ev.labels, ev.mask), model.cfg.n_layers, len(ev.inputs))
        ds.attrs.update(n_heads=model.cfg.n_heads)
        if chances is not None:
            ds["chance_accuracy"] = ((), float(chances[i]))
        parts.append(ds)
    ds = xr.concat(parts, dim="seed", combine_attrs="override")
    ds.coords["seed"] = ("seed", list(model.seeds))
    return describe(ds, VARIABLES)


_CONVENTION = (
    "attention matrices and LayerNorm scales frozen at the model's own forward pass (float64); Y_k: sum "
    "of all paths with heads in exactly k layers, starting from the embedding output X_0 (its biases "
    "and LayerNorm included); C: attention constants b_O + W_O b_V and LayerNorm shifts, each from the "
    "layer where it enters, carried through later layers; logits of a partial sum = classifier(partial)"
)


def _variables(summaries: dict[str, StateSummary]) -> dict[str, Any]:
    """The data variables of :func:`run` from the per-state summaries."""
    states = list(summaries)
    stack = lambda f: np.stack([f(summaries[s]) for s in states])  # noqa: E731
    share = stack(lambda s: s.norms / s.norms.sum(1, keepdims=True))  # (state, sample, length)
    return {
        "reconstruction_error": (("state",), stack(lambda s: s.reconstruction_error)),
        "norm_share": (("state", "path_length"), share.mean(1)),
        "norm_share_per_input": (("state", "sample", "path_length"), share),
        "constant_norm_ratio": (("state",), stack(lambda s: (s.constant_norms / s.norms.sum(1)).mean())),
        "truncated_accuracy": (("state", "max_path_length"), stack(lambda s: s.truncated_accuracy)),
        "truncated_agreement": (("state", "max_path_length"), stack(lambda s: s.truncated_agreement)),
        "single_length_accuracy": (("state", "path_length"), stack(lambda s: s.single_length_accuracy)),
        "full_accuracy": (("state",), stack(lambda s: s.full_accuracy)),
    }


def _dataset(summaries: dict[str, StateSummary], n_layers: int, n_samples: int) -> xr.Dataset:
    """The dataset of :func:`run` over ``state``, ``path_length``, ``max_path_length`` and ``sample``."""
    k = np.arange(n_layers + 1)
    coords = {"state": list(summaries), "path_length": k, "max_path_length": k, "sample": np.arange(n_samples)}
    attrs = {"convention": _CONVENTION, "n_layers": n_layers}
    return describe(xr.Dataset(_variables(summaries), coords=coords, attrs=attrs), VARIABLES)
