"""Rank collapse in real architectures (the paper's Sec. 4, Fig. 2).

For each variant the model runs with hidden states for every layer; per layer ``l`` and sequence the relative
residual ``||res(X_l)||_{1,inf} / ||X_l||_{1,inf}`` is recorded (layer 0 is the embedding output fed to layer 1).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from san.core.device import resolve_dtype
from san.core.metrics import relative_residual
from san.rank_collapse.ablations import variant
from san.rank_collapse.models import load_model, read_manifest


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
    # disable=None: no bar unless stderr is a terminal (a job's log file gets no carriage-return updates)
    for name in tqdm(variants, desc="variants", leave=False, disable=None):
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


def run(
    family: str,
    models: Mapping[str, str | Path],
    inputs: Mapping[str, xr.Dataset],
    settings: Mapping[str, Any],
    device: torch.device | str = "cpu",
    log: Any = None,
) -> xr.Dataset:
    """Fig. 2's data for one model: the relative residual per weights, variant, layer and input sequence.

    ``models`` maps each weight set (``init``, ``pretrained``) to its model folder and ``inputs`` to its tokenised
    input (``input_ids``, with the ``input_sha256`` attribute); ``settings`` is the ``rank_collapse`` config slice
    (``variants``, ``dtype``, ``batch_size``, ``albert_no_mlp``). The models' manifests and the inputs' hashes go
    into the attributes ``manifests`` and ``input_sha256``.
    """
    dtype = resolve_dtype(settings["dtype"])
    data, manifests, hashes = [], {}, {}
    for weights, folder in models.items():
        ids = torch.as_tensor(inputs[weights]["input_ids"].values)
        model = load_model(folder, family, dtype).to(device)
        if log is not None:
            log.info("%s weights on %s in %s: %s", weights, device, dtype, type(model).__name__)
        variants = settings["variants"]
        data.append(
            residuals_by_variant(model, family, ids, variants, settings["batch_size"], settings["albert_no_mlp"])
        )
        manifests[weights] = read_manifest(folder)
        hashes[weights] = inputs[weights].attrs["input_sha256"]
        del model
    arr = np.stack(data)
    return xr.Dataset(
        {
            "residual_ratio": (
                ("weights", "variant", "layer", "sample"),
                arr,
                {
                    "long_name": "relative residual ||res(X_l)||_{1,inf} / ||X_l||_{1,inf}",
                    "units": "1",
                    "description": "res(X) = X - 1 mean_tokens(X); layer 0 is the input of the first layer",
                },
            )
        },
        coords={
            "weights": ("weights", list(models), {"long_name": "weights of the model", "units": "1"}),
            "variant": ("variant", list(settings["variants"]), {"long_name": "architecture variant", "units": "1"}),
            "layer": ("layer", np.arange(arr.shape[2]), {"long_name": "layer index", "units": "1"}),
            "sample": ("sample", np.arange(arr.shape[3]), {"long_name": "input sequence", "units": "1"}),
        },
        attrs={
            "title": "san: rank collapse of one model's layer outputs (Dong et al. 2021, Fig. 2)",
            "manifests": manifests,
            "input_sha256": hashes,
        },
    )
