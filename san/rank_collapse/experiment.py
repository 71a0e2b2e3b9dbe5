"""Rank collapse in real architectures (the paper's Sec. 4, Fig. 2).

For each variant the model runs once per batch while forward hooks on its blocks record the residual stream: layer 0
is the input of the first block (the embedding output), layer ``l`` the output of block ``l``. This is the same as
the ``hidden_states`` of the post-norm encoders, but not of the decoders, whose transformers classes replace the last
hidden state by the output of the final norm: here no final norm is ever applied, so every layer of every family is
the raw residual stream (a test checks both conventions). Per layer and sequence three token-uniformity measures are
recorded (:data:`san.rank_collapse.spec.METRICS`): the paper's ``||res(X_l)||_{1,inf} / ||X_l||_{1,inf}``, the same
without the first token, and the Frobenius-norm ratio; and the placebo of the second (:data:`~san.rank_collapse.spec.
PLACEBO`): the paper's ratio without one token drawn at random among the others, per sequence, from the seed
``rank_collapse.control_token_seed``. The same forward passes return the attention matrices, whose mean attention on
the first token per layer and head is recorded too (the first-token sink, :mod:`san.rank_collapse.sink`), and from
the same residual stream the measures of what pretraining does to it (massive activations, high-norm tokens,
spectral compression: :mod:`san.measures.phenomena`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr
from torch import nn
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from san.core.device import ON_CPU, JobPlace, resolve_dtype
from san.core.rng import cpu_generator
from san.core.storage import Variable, describe
from san.measures.phenomena import PHENOMENA, layer_phenomena
from san.measures.residual import relative_residual, relative_residual_frobenius, without_token
from san.models.ablations import variant
from san.models.families import family as family_entry
from san.models.families import of_model
from san.models.folders import read_manifest
from san.models.load import load_model
from san.rank_collapse.sink import first_token_attention, sink_layers
from san.rank_collapse.spec import METRICS, PLACEBO, variant_dtypes, variants_by_dtype

#: the measures stored per layer, in the order of the rows :func:`layer_measures` returns
MEASURES = (*METRICS, *PLACEBO)
#: what the measures of :data:`MEASURES` share: the residual and the layers they are taken at
_STREAM = (
    "res(X) = X - 1 mean_tokens(X); layer 0 is the input of the first block, layer l the output of block l "
    "(the residual stream; a decoder's final norm is not applied)"
)
#: long_name, units and description of every variable and coordinate of the experiment's results (rank collapse
#: per layer, and the attention products along paths of :mod:`san.rank_collapse.attention_products`)
VARIABLES = {
    **{name: Variable(long_name, "1", _STREAM) for name, long_name in METRICS.items()},
    **{
        name: Variable(long_name, "1", f"{_STREAM}; the token each sequence leaves out is its coordinate control_token")
        for name, long_name in PLACEBO.items()
    },
    "control_token": Variable(
        "position of the token residual_ratio_no_random excludes",
        "1",
        "one per input sequence, drawn uniformly among the positions 1 .. tokens - 1 (never the first) by a CPU "
        "generator seeded with rank_collapse.control_token_seed: the placebo of residual_ratio_no_first",
    ),
    "weights": Variable("weights of the model", "1"),
    "variant": Variable("architecture variant", "1"),
    "dtype": Variable("floating point type of the variant's forward passes", "1"),
    "layer": Variable("layer index", "1"),
    "sample": Variable("input sequence", "1"),
    "rank1_residual": Variable("relative residual of the best rank-1 approximation ||P - P_1||_F / ||P||_F", "1"),
    "uniformity_residual": Variable("relative residual ||P - 1 mean_rows(P)||_{1,inf} / ||P||_{1,inf}", "1"),
    "sequence": Variable("input sequence index", "1"),
    "depth": Variable("path length", "1"),
    "path": Variable("sampled path", "1"),
    "first_token_attention": Variable(
        "mean attention on the first token",
        "1",
        "per head, the attention on token 0 averaged over the queries and the input sequences (Gu et al. 2025's "
        "sink measure alpha); layer l is block l's attention, layer 0 (the embedding output) has none (NaN)",
    ),
    "first_token_attention_by_sample": Variable(
        "attention on the first token per input sequence",
        "1",
        "per head and input sequence, the attention on token 0 averaged over the queries (Gu et al. 2025's alpha of "
        "one sequence, whose share of sink heads the claims count per sequence); layer 0 has none (NaN)",
    ),
    "head": Variable("attention head index", "1"),
    **PHENOMENA,
}


def _forward(model: PreTrainedModel, ids: torch.Tensor, **kwargs) -> Any:
    """The model on full-length sequences ``ids`` (no padding; the family's forward keywords, e.g. XLNet without
    memories)."""
    entry = of_model(model)
    kwargs = {**kwargs, **(entry.forward_kwargs if entry else {})}
    if entry is not None and entry.row.modality == "image":  # an image encoder reads pixel values
        return model(pixel_values=ids, **kwargs)
    return model(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)


def _forward_batches(model: PreTrainedModel, input_ids: torch.Tensor, batch_size: int, **kwargs) -> Iterator:
    """Model outputs for consecutive batches of ``input_ids``."""
    device = next(model.parameters()).device
    for start in range(0, input_ids.shape[0], batch_size):
        yield _forward(model, input_ids[start : start + batch_size].to(device), **kwargs)


def _stream_tensor(output: Any) -> torch.Tensor:
    """The hidden state of a block's output (a tensor, or the first element of a tuple)."""
    return output[0] if isinstance(output, tuple | list) else output


@torch.inference_mode()
def residual_stream(
    model: PreTrainedModel, family: str, input_ids: torch.Tensor, sink: list[torch.Tensor] | None = None
) -> list[torch.Tensor]:
    """The residual stream of one batch: the input of the first block, then every block's output (``layers + 1``
    tensors ``(sequences, tokens, width)``), recorded by forward hooks; no final norm is applied. With a list
    ``sink``, the same forward pass returns the attention matrices and their first-token attention ``(layers,
    sequences, heads)`` (:func:`san.rank_collapse.sink.first_token_attention`) is appended to it."""
    states: list[torch.Tensor] = []
    entry = family_entry(family)
    blocks = list(entry.layers(model))

    def first_input(module: nn.Module, args: tuple, kwargs: dict) -> None:
        if not states:
            states.append(args[0] if args else kwargs["hidden_states"])

    def output(module: nn.Module, args: tuple, kwargs: dict, out: Any) -> None:
        states.append(_stream_tensor(out))

    handles = [blocks[0].register_forward_pre_hook(first_input, with_kwargs=True)]
    handles += [b.register_forward_hook(output, with_kwargs=True) for b in blocks]
    try:
        out = _forward(model, input_ids, **({"output_attentions": True} if sink is not None else {}))
    finally:
        for h in handles:
            h.remove()
    expected = model.config.num_hidden_layers + 1
    if len(states) != expected:
        raise RuntimeError(f"recorded {len(states)} residual-stream states, expected {expected} (layers + input)")
    if sink is not None:
        attentions = getattr(out, "attentions", None) or [None] * (expected - 1)
        if all(a is None for a in attentions):  # a variant whose attention returns no matrices: unmeasured
            heads = int(model.config.num_attention_heads)
            sink.append(torch.full((expected - 1, input_ids.shape[0], heads), float("nan"), dtype=torch.float64))
        else:
            sink.append(first_token_attention(attentions))
    return [s.transpose(0, 1) for s in states] if entry.tokens_first else states


def uniformity(states: list[torch.Tensor]) -> torch.Tensor:
    """The measures of :data:`METRICS` for every state and sequence: tensor ``(metrics, layers + 1, sequences)``,
    computed in float64 whatever the states' dtype (the residual ``X - 1 mean(X)`` cancels most of ``X``)."""
    states = [h.double() for h in states]
    measures = {
        "residual_ratio": relative_residual,
        "residual_ratio_no_first": lambda h: relative_residual(h[..., 1:, :]),
        "residual_ratio_frobenius": relative_residual_frobenius,
    }
    return torch.stack([torch.stack([measures[m](h) for h in states]) for m in METRICS])


def control_tokens(sequences: int, tokens: int, seed: int) -> torch.Tensor:
    """The token each sequence's placebo measure leaves out (:data:`PLACEBO`): one position per sequence, uniform
    among ``1 .. tokens - 1`` (never the first token, whose exclusion it is the placebo of), from a CPU generator
    seeded with ``seed`` (``rank_collapse.control_token_seed``)."""
    if tokens < 2:
        raise ValueError(f"rank_collapse.control_token_seed: a sequence of {tokens} token(s) has none but the first")
    return torch.randint(1, tokens, (sequences,), generator=cpu_generator(seed))


def placebo(states: list[torch.Tensor], control_token: torch.Tensor) -> torch.Tensor:
    """The measures of :data:`PLACEBO` for every state and sequence: tensor ``(placebos, layers + 1, sequences)`` in
    float64, the paper's ratio without the token ``control_token[i]`` of sequence ``i``."""
    return torch.stack([torch.stack([relative_residual(without_token(h.double(), control_token)) for h in states])])


def layer_residuals(model: PreTrainedModel, family: str, input_ids: torch.Tensor, batch_size: int) -> np.ndarray:
    """The measures of :data:`METRICS` for every layer of every sequence: array ``(metrics, layers + 1, sequences)``
    (full-length sequences, no padding)."""
    device = next(model.parameters()).device
    chunks = [
        uniformity(residual_stream(model, family, input_ids[start : start + batch_size].to(device))).cpu()
        for start in range(0, input_ids.shape[0], batch_size)
    ]
    return torch.cat(chunks, dim=2).double().numpy()


def layer_measures(
    model: PreTrainedModel,
    family: str,
    input_ids: torch.Tensor,
    batch_size: int,
    *,
    control_token: torch.Tensor,
    factor: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`layer_residuals` followed by the placebo without ``control_token`` (:func:`placebo`) and, from the same
    forward passes, the first-token attention of every block, head and sequence: arrays ``(measures, layers + 1,
    sequences)`` (:data:`MEASURES`) and ``(layers, sequences, heads)``; with a ``factor``
    (``rank_collapse.massive_token_factor``) also the measures of :data:`san.measures.phenomena.PHENOMENA`, array
    ``(measures, layers + 1, sequences)`` (else None)."""
    device = next(model.parameters()).device
    chunks, sinks, phenomena = [], [], []
    whole = MEASURES.index("residual_ratio")
    for start in range(0, input_ids.shape[0], batch_size):
        states = residual_stream(model, family, input_ids[start : start + batch_size].to(device), sinks)
        own = control_token[start : start + batch_size]
        chunks.append(torch.cat([uniformity(states).cpu(), placebo(states, own).cpu()]))
        if factor is not None:
            phenomena.append(layer_phenomena(states, factor, chunks[-1][whole]))
    found = np.concatenate(phenomena, axis=2) if phenomena else None
    return torch.cat(chunks, dim=2).double().numpy(), torch.cat(sinks, dim=1).numpy(), found


def residuals_by_variant(
    model: PreTrainedModel,
    family: str,
    input_ids: torch.Tensor,
    variants: Sequence[str],
    batch_size: int,
    albert_no_mlp: str = "identity_linears",
    *,
    control_token: torch.Tensor,
    factor: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Relative residuals for each variant: array ``(variants, measures, layers + 1, sequences)`` (Fig. 2's data and
    the placebo without ``control_token``, :func:`layer_measures`), and the first-token attention of each variant,
    block, sequence and head: array ``(variants, layers + 1, sequences, heads)``, NaN at layer 0
    (:func:`san.rank_collapse.sink.sink_layers`); with a ``factor`` the measures of
    :data:`san.measures.phenomena.PHENOMENA` of each variant, array ``(variants, measures, layers + 1, sequences)``
    (else None)."""
    out, sinks, phenomena = [], [], []
    # disable=None: no bar unless stderr is a terminal (a job's log file gets no carriage-return updates)
    for name in tqdm(variants, desc="variants", leave=False, disable=None):
        with variant(model, family, name, albert_no_mlp):
            residuals, alpha, found = layer_measures(
                model, family, input_ids, batch_size, control_token=control_token, factor=factor
            )
        out.append(residuals)
        sinks.append(sink_layers(alpha, alpha.shape[0]))
        phenomena.append(found)
    return np.stack(out), np.stack(sinks), None if factor is None else np.stack(phenomena)


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


def load_weight_set(
    folder: str | Path,
    family: str,
    dtype_name: str,
    device: torch.device | str,
    budget_mb: float | None,
    key: str,
    log: Any = None,
    what: str = "",
) -> PreTrainedModel:
    """One weight set in one dtype on ``device``; with a budget it is placed there as it loads (its streamed blocks
    stay on the meta device until a forward pass reaches them). With a ``log``, says there what was loaded
    (``what``: the weight set and its variants) and how a streamed model's blocks are held."""
    if budget_mb is None:
        model = load_model(folder, family, resolve_dtype(dtype_name)).to(device)
    else:
        model = load_model(folder, family, resolve_dtype(dtype_name), device, budget_mb, key)
    if log is not None:
        log.info("%s on %s in %s: %s", what, device, dtype_name, type(model).__name__)
        _log_streaming(log, model, key)
    return model


def _log_streaming(log: Any, model: PreTrainedModel, key: str) -> None:
    """Say in the job's log how a streamed model's blocks are held and streamed."""
    streaming = getattr(model, "san_streaming", None)
    if streaming is not None:
        plan = streaming.plan
        log.info(
            "%s: %d of %d blocks held, %d streamed from the checkpoint (weights %.0f MB, at most %.0f MB in memory)",
            key, plan.held, plan.blocks, plan.streamed, plan.weights_bytes() / 2**20, plan.peak_bytes() / 2**20,
        )  # fmt: skip


def weight_set_measures(
    family: str,
    models: Mapping[str, str | Path],
    inputs: Mapping[str, xr.Dataset],
    key: str,
    dtypes: Mapping[str, str],
    measure: Callable[[PreTrainedModel, torch.Tensor, str, list[str]], Mapping[str, tuple]],
    job: JobPlace,
) -> tuple[dict[str, dict[str, tuple]], dict[str, Any], dict[str, str]]:
    """The job shape of every rank-collapse job, text and images alike: each weight set of ``models`` (name ->
    model folder) loaded once per dtype of ``dtypes`` (variant -> dtype name, :func:`load_weight_set` on
    ``job``'s device and memory budget), its input ``inputs[weights][key]`` (``input_ids`` or ``pixel_values``) as
    a tensor, and ``measure(model, input, dtype_name, variants)`` the measures of that dtype's variants, by variant.
    Returns those measures by weight set and variant, the folders' manifests and the inputs' ``input_sha256`` by
    weight set (the attributes ``manifests`` and ``input_sha256`` of every result)."""
    found: dict[str, dict[str, tuple]] = {}
    manifests, hashes = {}, {}
    for weights, folder in models.items():
        data = torch.as_tensor(inputs[weights][key].values)
        found[weights] = {}
        for dtype_name, own in variants_by_dtype(dtypes).items():
            model = load_weight_set(folder, family, dtype_name, job.device, job.budget_mb, job.budget_key, job.log,
                                    f"{weights} weights ({own})")  # fmt: skip
            found[weights].update(measure(model, data, dtype_name, own))
            del model
        manifests[weights] = read_manifest(folder)
        hashes[weights] = inputs[weights].attrs["input_sha256"]
    return found, manifests, hashes


def stacked(found: Mapping[str, Mapping[str, tuple]], variants: Sequence[str], index: int) -> np.ndarray:
    """Measure ``index`` of :func:`weight_set_measures`' result as one array ``(weights, variants, ...)``."""
    return np.stack([np.stack([by_variant[v][index] for v in variants]) for by_variant in found.values()])


def run(
    family: str,
    models: Mapping[str, str | Path],
    inputs: Mapping[str, xr.Dataset],
    settings: Mapping[str, Any],
    job: JobPlace = ON_CPU,
) -> xr.Dataset:
    """Fig. 2's data for one model: the relative residual per weights, variant, layer and input sequence.

    ``models`` maps each weight set (``init``, ``pretrained``) to its model folder and ``inputs`` to its tokenised
    input (``input_ids``, with the ``input_sha256`` attribute); ``settings`` is the ``rank_collapse`` config slice
    (``variants``, ``dtype``: one for all variants or one per variant, ``batch_size``, ``albert_no_mlp``,
    ``control_token_seed``: the seed of the placebo's excluded tokens, :func:`control_tokens`, the same for every
    weight set, stored as the coordinate ``control_token``; ``massive_token_factor``: the measures of
    :data:`san.measures.phenomena.PHENOMENA` are recorded beside); each weight set is loaded once per dtype
    (:func:`weight_set_measures`) on ``job``'s device, and the dtype of each variant is the coordinate ``dtype``. The
    models' manifests and the inputs' hashes go into the attributes ``manifests`` and ``input_sha256``. With a
    ``job.budget_mb`` (the job's ``compute.rank_collapse.memory_budget_mb``, named by ``job.budget_key`` in errors)
    the blocks of a model whose weights exceed it are streamed from the checkpoint as each forward pass reaches them
    (:mod:`san.models.stream`): the hooks see the same residual stream, the numbers are those of the model held in
    memory.
    """
    variants = list(settings["variants"])
    dtypes = variant_dtypes(settings["dtype"], variants)
    if "control_token_seed" not in settings:
        raise KeyError("the rank_collapse settings lack config key rank_collapse.control_token_seed")
    shape = torch.as_tensor(inputs[next(iter(models))]["input_ids"].values).shape
    control = control_tokens(shape[0], shape[1], settings["control_token_seed"])

    def measure(model: PreTrainedModel, ids: torch.Tensor, dtype_name: str, own: list[str]) -> dict[str, tuple]:
        got = residuals_by_variant(
            model, family, ids, own, settings["batch_size"], settings["albert_no_mlp"], control_token=control,
            factor=settings["massive_token_factor"],
        )  # fmt: skip
        return dict(zip(own, zip(*got, strict=True), strict=True))

    found, manifests, hashes = weight_set_measures(family, models, inputs, "input_ids", dtypes, measure, job)
    ds = _dataset(stacked(found, variants, 0), stacked(found, variants, 1), list(models), variants, dtypes, manifests,
                  hashes, control.numpy())  # fmt: skip
    return with_phenomena(ds, stacked(found, variants, 2), ("weights", "variant", "layer", "sample"))


def _dataset(
    arr: np.ndarray,
    alpha: np.ndarray,
    weight_sets: list[str],
    variants: list[str],
    dtypes: Mapping[str, str],
    manifests: dict[str, Any],
    hashes: dict[str, str],
    control: np.ndarray,
) -> xr.Dataset:
    """The result of :func:`run`: the measures ``arr`` (weights, variants, measures, layers + 1, sequences) and the
    first-token attention ``alpha`` (weights, variants, layers + 1, sequences, heads; kept per sequence and averaged
    over them), labelled and described; ``control``: the placebo's excluded token per sequence (the coordinate
    ``control_token``)."""
    dims = ("weights", "variant", "layer", "sample")
    ds = xr.Dataset(
        {
            **{name: (dims, arr[:, :, i]) for i, name in enumerate(MEASURES)},
            "first_token_attention": (("weights", "variant", "layer", "head"), alpha.mean(axis=3)),
            "first_token_attention_by_sample": ((*dims, "head"), alpha),
        },
        coords={
            "weights": ("weights", weight_sets),
            "variant": ("variant", variants),
            "dtype": ("variant", [dtypes[v] for v in variants]),
            "layer": ("layer", np.arange(arr.shape[3])),
            "sample": ("sample", np.arange(arr.shape[4])),
            "control_token": ("sample", control),
            "head": ("head", np.arange(alpha.shape[4])),
        },
        attrs={
            "title": "san: rank collapse of one model's layer outputs (Dong et al. 2021, Fig. 2)",
            "manifests": manifests,
            "input_sha256": hashes,
        },
    )
    return describe(ds, VARIABLES)


def with_phenomena(ds: xr.Dataset, arr: np.ndarray, dims: tuple[str, ...]) -> xr.Dataset:
    """``ds`` with the measures of :data:`san.measures.phenomena.PHENOMENA` added: ``arr`` ``(weights, variants,
    measures, layers + 1, inputs)`` as one variable each on ``dims`` (float64; the token and dimension of the
    largest activation as int64), described with their definitions, formulas and references."""
    data = {
        name: (dims, arr[:, :, i].astype(np.int64) if name in ("massive_token", "massive_dim") else arr[:, :, i])
        for i, name in enumerate(PHENOMENA)
    }
    return describe(ds.assign(data), PHENOMENA)
