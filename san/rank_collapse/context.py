"""The first-token sink and the first token's norm at several context lengths, in the unmodified model.

Barbero et al. (COLM 2025, "Why do LLMs attend to the first token?") argue that attention sinks keep a deep model
from over-mixing its tokens, so that a model puts more attention on the first token the longer its context and the
deeper the layer. This job runs the unmodified model (the ``transformer`` variant of Fig. 2) on the first ``L`` tokens
of the rank-collapse job's tokenised input sequences for each length ``L`` of ``phenomena.context.seq_lens``, and
records per weight set, length, layer and head Gu et al. (ICLR 2025)'s first-token attention ``alpha`` (the mean
over queries of the attention on token 0: :func:`san.rank_collapse.sink.first_token_attention`), and per sequence
the first token's norm over the median token norm (Queipo-de-Llano et al. 2025's BOS norm) and the massive
activation ratio (Sun et al. 2024) of every layer (:mod:`san.measures.phenomena`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr
from transformers import PreTrainedModel

from san.core.device import ON_CPU, JobPlace
from san.core.storage import Variable, describe
from san.measures.phenomena import PHENOMENA, massive_activation, norm_ratios
from san.rank_collapse.experiment import VARIABLES as RANK_COLLAPSE_VARIABLES
from san.rank_collapse.experiment import residual_stream, stacked, weight_set_measures
from san.rank_collapse.sink import sink_layers
from san.rank_collapse.spec import variant_dtypes

#: the per-sequence measures of every layer, in the order :func:`length_measures` returns them
MEASURES = ("first_token_norm_ratio", "massive_ratio")
#: long_name, units and description of every variable and coordinate of the job's result
VARIABLES = {
    **{name: PHENOMENA[name] for name in MEASURES},
    "first_token_attention": RANK_COLLAPSE_VARIABLES["first_token_attention"],
    "first_token_attention_by_sample": Variable(
        "attention on the first token per input sequence",
        "1",
        "per head and input sequence, the attention on token 0 averaged over the queries (Gu et al. 2025's alpha "
        "before the mean over sequences); layer 0 (the embedding output) has no attention (NaN)",
    ),
    "weights": Variable("weights of the model", "1"),
    "seq_len": Variable("tokens per sequence: the first seq_len tokens of the input sequences", "1"),
    "layer": Variable("layer index", "1"),
    "sample": Variable("input sequence", "1"),
    "head": Variable("attention head index", "1"),
}


def _state_measures(state: torch.Tensor) -> np.ndarray:
    """The measures of :data:`MEASURES` of one state ``(sequences, tokens, width)``: array ``(measures,
    sequences)`` in float64."""
    h = state.detach().to("cpu", torch.float64)
    ratio, _, _ = massive_activation(h)
    _, first = norm_ratios(h)
    return torch.stack([first, ratio]).numpy()


@torch.inference_mode()
def length_measures(
    model: PreTrainedModel, family: str, input_ids: torch.Tensor, batch_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """The measures of :data:`MEASURES` of every layer and sequence of ``input_ids`` (full-length sequences, no
    padding), ``(measures, layers + 1, sequences)``, and the first-token attention of every block, sequence and
    head, ``(layers, sequences, heads)``, from the same forward passes."""
    device = next(model.parameters()).device
    chunks, sinks = [], []
    for start in range(0, input_ids.shape[0], batch_size):
        states = residual_stream(model, family, input_ids[start : start + batch_size].to(device), sinks)
        chunks.append(np.stack([_state_measures(h) for h in states], axis=1))
    return np.concatenate(chunks, axis=2), torch.cat(sinks, dim=1).numpy()


def check_lengths(seq_lens: Sequence[int], tokens: int) -> None:
    """Every length must be at most the input's ``tokens``: the sequences are cut, never padded."""
    longer = [n for n in seq_lens if n > tokens]
    if longer:
        raise ValueError(f"phenomena.context.seq_lens {longer} exceed the input's {tokens} tokens per sequence")


def run(
    family: str,
    models: Mapping[str, str | Path],
    inputs: Mapping[str, xr.Dataset],
    settings: Mapping[str, Any],
    job: JobPlace = ON_CPU,
) -> xr.Dataset:
    """The first-token sink and the first token's norm of the unmodified model at every context length.

    ``models`` maps each weight set to its model folder and ``inputs`` to its tokenised input (``input_ids``, with
    the ``input_sha256`` attribute); ``settings`` holds ``seq_lens`` (each at most the input's tokens: the first
    ``L`` tokens of every sequence), ``batch_size`` and ``dtype`` (the rank-collapse setting: one dtype, or one per
    variant, of which the ``transformer`` variant's is used). ``job``'s memory budget streams a model larger than it
    block by block; the job shape is the rank-collapse job's
    (:func:`san.rank_collapse.experiment.weight_set_measures`)."""
    seq_lens = [int(n) for n in settings["seq_lens"]]
    dtype = variant_dtypes(settings["dtype"], ["transformer"])["transformer"]
    for weights in models:
        check_lengths(seq_lens, inputs[weights]["input_ids"].shape[1])

    def measure(model: PreTrainedModel, ids: torch.Tensor, dtype_name: str, own: list[str]) -> dict[str, tuple]:
        found = [length_measures(model, family, ids[:, :n], settings["batch_size"]) for n in seq_lens]
        alpha = np.stack([sink_layers(a, a.shape[0]) for _, a in found])
        return {"transformer": (np.stack([m for m, _ in found]), alpha)}

    found, manifests, hashes = weight_set_measures(family, models, inputs, "input_ids", {"transformer": dtype}, measure,
                                                   job)  # fmt: skip
    measures, alpha = (stacked(found, ["transformer"], i)[:, 0] for i in (0, 1))
    return _dataset(measures, alpha, list(models), seq_lens, manifests, hashes)


def _dataset(
    arr: np.ndarray,
    alpha: np.ndarray,
    weight_sets: list[str],
    seq_lens: list[int],
    manifests: dict[str, Any],
    hashes: dict[str, str],
) -> xr.Dataset:
    """The result of :func:`run`: the measures ``arr`` ``(weights, seq_lens, measures, layers + 1, sequences)`` and
    the first-token attention ``alpha`` ``(weights, seq_lens, layers + 1, sequences, heads)``, labelled."""
    dims = ("weights", "seq_len", "layer", "sample")
    ds = xr.Dataset(
        {
            **{name: (dims, arr[:, :, i]) for i, name in enumerate(MEASURES)},
            "first_token_attention": (("weights", "seq_len", "layer", "head"), alpha.mean(axis=3)),
            "first_token_attention_by_sample": ((*dims, "head"), alpha),
        },
        coords={
            "weights": ("weights", weight_sets),
            "seq_len": ("seq_len", np.array(seq_lens, dtype=np.int64)),
            "layer": ("layer", np.arange(arr.shape[3])),
            "sample": ("sample", np.arange(arr.shape[4])),
            "head": ("head", np.arange(alpha.shape[4])),
        },
        attrs={
            "title": "san: the first-token sink and norm of the unmodified model at several context lengths",
            "references": "Barbero et al. 2025 (Why do LLMs attend to the first token?); Gu et al. 2025 (When "
            "attention sink emerges in language models); Queipo-de-Llano et al. 2025 (arXiv:2510.06477); Sun et al. "
            "2024 (arXiv:2402.17762)",
            "manifests": manifests,
            "input_sha256": hashes,
        },
    )
    return describe(ds, VARIABLES)
