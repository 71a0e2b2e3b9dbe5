"""Rank collapse in real architectures (the paper's Sec. 4, Fig. 2) and chained attention along paths (appendix).

For each variant the model runs with hidden states for every layer; per layer ``l`` and sequence the relative
residual ``||res(X_l)||_{1,inf} / ||X_l||_{1,inf}`` is recorded (layer 0 is the embedding output fed to layer 1).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from san.ablations import variant
from san.metrics import rank1_relative_residual, relative_residual


def _forward_batches(model: PreTrainedModel, input_ids: torch.Tensor, batch_size: int, **kwargs) -> Iterator:
    """Model outputs for consecutive batches of ``input_ids`` (full-length sequences, no padding)."""
    device = next(model.parameters()).device
    if model.config.model_type == "xlnet":
        kwargs["use_mems"] = False
    for start in range(0, input_ids.shape[0], batch_size):
        ids = input_ids[start : start + batch_size].to(device)
        yield model(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)


@torch.inference_mode()
def layer_residuals(model: PreTrainedModel, input_ids: torch.Tensor, batch_size: int) -> np.ndarray:
    """Relative residual of every layer's output for every sequence: array ``(layers + 1, sequences)``."""
    chunks = []
    for out in _forward_batches(model, input_ids, batch_size, output_hidden_states=True):
        states = out.hidden_states
        expected = model.config.num_hidden_layers + 1
        if len(states) != expected:
            raise RuntimeError(f"model returned {len(states)} hidden states, expected {expected} (layers + input)")
        chunks.append(torch.stack([relative_residual(h) for h in states]).cpu())
    return torch.cat(chunks, dim=1).double().numpy()


def residuals_by_variant(
    model: PreTrainedModel,
    family: str,
    input_ids: torch.Tensor,
    variants: Sequence[str],
    batch_size: int,
    albert_no_mlp: str = "identity_linears",
) -> np.ndarray:
    """Relative residuals for each variant: array ``(variants, layers + 1, sequences)`` (Fig. 2's data)."""
    out = []
    for name in tqdm(variants, desc="variants", leave=False):
        with variant(model, family, name, albert_no_mlp):
            out.append(layer_residuals(model, input_ids, batch_size))
    return np.stack(out)


@torch.inference_mode()
def attention_matrices(model: PreTrainedModel, input_ids: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Attention matrices of the unmodified model: tensor ``(layers, sequences, heads, tokens, tokens)`` on CPU."""
    chunks = []
    for out in _forward_batches(model, input_ids, batch_size, output_attentions=True):
        att = out.attentions
        if not att or att[0] is None:
            raise RuntimeError("the model returned no attention matrices; load it with attn_implementation='eager'")
        chunks.append(torch.stack([a.cpu() for a in att]))
    return torch.cat(chunks, dim=1)


def sample_paths(n_layers: int, n_heads: int, n_sequences: int, depth: int, n_paths: int, rng: np.random.Generator):
    """``n_paths`` paths of ``depth`` layers: sorted distinct layers, a head per layer, and a sequence each."""
    layers = np.stack([np.sort(rng.choice(n_layers, size=depth, replace=False)) for _ in range(n_paths)])
    heads = rng.integers(n_heads, size=(n_paths, depth))
    seqs = rng.integers(n_sequences, size=n_paths)
    return layers, heads, seqs


def path_products(attn: torch.Tensor, layers: np.ndarray, heads: np.ndarray, seqs: np.ndarray) -> torch.Tensor:
    """Products ``P_{h_d} ... P_{h_1}`` of attention matrices along paths (later layers multiply on the left)."""
    seq_t = torch.as_tensor(seqs)
    prod = attn[layers[:, 0], seq_t, heads[:, 0]]
    for j in range(1, layers.shape[1]):
        prod = attn[layers[:, j], seq_t, heads[:, j]] @ prod
    return prod


def path_product_residuals(attn: torch.Tensor, n_paths: int, seed: int) -> dict[str, np.ndarray]:
    """Rank-1 residual of attention products along ``n_paths`` random paths of every depth 1..L.

    Returns arrays of shape ``(depth, path)``: ``rank1`` (relative Frobenius residual of the best rank-1
    approximation), ``uniformity`` (relative ``||res(P)||_{1,inf}``), and the sampled ``sequence`` per path.
    """
    n_layers, n_seq, n_heads = attn.shape[:3]
    rng = np.random.default_rng(seed)
    rank1, unif, seq_idx = [], [], []
    for depth in range(1, n_layers + 1):
        layers, heads, seqs = sample_paths(n_layers, n_heads, n_seq, depth, n_paths, rng)
        prod = path_products(attn, layers, heads, seqs)
        rank1.append(rank1_relative_residual(prod).numpy())
        unif.append(relative_residual(prod).numpy())
        seq_idx.append(seqs)
    return {"rank1": np.stack(rank1), "uniformity": np.stack(unif), "sequence": np.stack(seq_idx)}
