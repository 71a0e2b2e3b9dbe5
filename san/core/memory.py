"""The memory a model job declares (Snakemake's ``mem_mb``, and ``gpu_mem_mb`` on a GPU), from its model's
parameter count, the dtype, the sequence length and the batch, instead of numbers written by hand per model.

Torch-free: the workflow computes it when it schedules a job, from the acquired model folder (parameters from the
safetensors headers, the shape from ``config.json``). The estimate (:func:`job_memory_mb`) is the interpreter with
its libraries, the weights in the job's dtype (at most the job's memory budget, ``compute.<rule>.memory_budget_mb``,
whose blocks beyond it are streamed: :mod:`san.models.stream`) and the activations of one batch: the residual
stream of every layer (kept for the whole batch by the rank-collapse hooks) and, per block, the attention
probabilities and the MLP's hidden layer; times a margin, and times the attempt, so that a job killed for memory is
retried with more (Snakemake's ``--retries``). ``benchmarks/bench_rank_collapse.py --memory`` checks the estimate
against the peaks it measures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: bytes per number of the config's dtypes
DTYPE_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}
#: resident memory of a job's interpreter after importing torch, transformers and the analysis code (MB; the
#: memory benchmark's "after imports" column measures about 400 MB on CPU-only torch)
INTERPRETER_MB = 600
#: the margin over the estimate (allocator slack, the tensor being converted while a checkpoint loads)
MARGIN = 1.25
#: config.json keys of width, depth, heads and MLP width across transformers' families (first present wins)
SHAPE_KEYS = {
    "width": ("hidden_size", "n_embd", "d_model", "dim"),
    "layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads"),
    "mlp": ("intermediate_size", "n_inner", "d_inner", "ffn_dim", "d_ff", "encoder_ffn_dim"),
}


@dataclass(frozen=True)
class ModelSize:
    """What a model's memory follows from: its parameters, width, blocks, attention heads and MLP width."""

    parameters: int
    width: int
    layers: int
    heads: int
    mlp: int


def _first(config: Mapping[str, Any], keys: Iterable[str], default: int | None = None) -> int:
    for key in keys:
        if isinstance(config.get(key), int):
            return int(config[key])
    if default is None:
        raise ValueError(f"config.json has none of {list(keys)}")
    return default


def checkpoint_parameters(folder: str | Path) -> int:
    """The number of parameters of a model folder's safetensors checkpoint (one file or the shards of its index),
    read from the headers only."""
    from safetensors import safe_open

    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() else []
    files = files or ["model.safetensors"]
    total = 0
    for name in files:
        with safe_open(folder / name, "numpy") as fh:
            total += sum(math.prod(fh.get_slice(k).get_shape()) for k in fh.keys())  # noqa: SIM118 - not a mapping
    return total


def model_size(folder: str | Path) -> ModelSize:
    """The :class:`ModelSize` of an acquired model folder (its checkpoint's headers and ``config.json``; a
    multimodal wrapper's ``text_config``)."""
    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    config = config.get("text_config") or config
    width = _first(config, SHAPE_KEYS["width"])
    return ModelSize(
        parameters=checkpoint_parameters(folder),
        width=width,
        layers=_first(config, SHAPE_KEYS["layers"]),
        heads=_first(config, SHAPE_KEYS["heads"], 1),
        mlp=_first(config, SHAPE_KEYS["mlp"], 4 * width),
    )


def activations_mb(size: ModelSize, dtype: str, seq_len: int, batch: int, attentions: int = 0) -> float:
    """The activations of one batch: the residual stream of every layer (``layers + 1`` states, kept until the
    batch's measures are taken, and their float64 copies), the attention probabilities of every block (returned by
    the forward pass for the first-token sink and the attention products), and one block's attention probabilities
    and MLP hidden layer (with the operands of their products); with ``attentions``, the attention matrices of every
    layer of that many sequences, kept together (the attention products' job) and their copy when they are
    stacked."""
    b = DTYPE_BYTES[dtype]
    stream = batch * seq_len * size.width * (size.layers + 1) * (b + 8)
    returned = batch * size.layers * size.heads * seq_len * seq_len * b
    attention = 3 * batch * size.heads * seq_len * seq_len * b
    mlp = 3 * batch * seq_len * size.mlp * b
    kept = 2 * attentions * size.layers * size.heads * seq_len * seq_len * b
    return (stream + returned + attention + mlp + kept) / 2**20


def weights_mb(size: ModelSize, dtype: str, budget_mb: float | None = None) -> float:
    """The weights in ``dtype`` that a job holds: all of them, or at most its memory budget."""
    full = size.parameters * DTYPE_BYTES[dtype] / 2**20
    return full if budget_mb is None else min(full, float(budget_mb))


def job_memory_mb(
    size: ModelSize,
    dtypes: Iterable[str],
    seq_len: int,
    batch: int,
    budget_mb: float | None = None,
    attempt: int = 1,
    gpu: bool = False,
    attentions: int = 0,
) -> int:
    """The memory (MB) of a job that runs ``size``'s model in each of ``dtypes`` in turn (one weight set at a time)
    on batches of ``batch`` sequences of ``seq_len`` tokens (``attentions``: sequences whose attention matrices are
    kept, :func:`activations_mb`): the largest of interpreter (host memory only, not with ``gpu``), weights (at most
    ``budget_mb``) and activations, times :data:`MARGIN` and ``attempt``, rounded up to 100 MB."""
    need = max(weights_mb(size, d, budget_mb) + activations_mb(size, d, seq_len, batch, attentions) for d in dtypes)
    need = (need + (0 if gpu else INTERPRETER_MB)) * MARGIN * max(1, int(attempt))
    return int(math.ceil(need / 100) * 100)


def declared_mem_mb(
    folders: Iterable[str | Path],
    dtypes: Iterable[str],
    seq_len: int,
    batch: int,
    budget_mb: float | None,
    attempt: int,
    before: int,
    gpu: bool = False,
    attentions: int = 0,
) -> int:
    """What a model job declares (Snakemake's ``mem_mb``, or ``gpu_mem_mb`` with ``gpu``): the largest
    :func:`job_memory_mb` over its model folders (one per weight set, loaded one after the other); ``before`` times
    ``attempt`` while a folder is not acquired yet (Snakemake evaluates a job's resources again once its input
    exists, before it runs)."""
    folders = [Path(f) for f in folders]
    dtypes = list(dtypes)
    if not folders or not all((f / "config.json").is_file() for f in folders):
        return int(before) * max(1, int(attempt))
    return max(
        job_memory_mb(model_size(f), dtypes, seq_len, batch, budget_mb, attempt, gpu, attentions) for f in folders
    )


def gpu_model_for(need_mb: int, models: str) -> str:
    """The GPU model a job asks for: the first of ``models`` (``name:MB`` pairs separated by commas, smallest
    memory first, e.g. ``a100:40960,h100:81920``: a site's ``SAN_SLURM_GPU_MODELS``) whose memory holds ``need_mb``;
    the largest when none does (the job then streams within its budget or fails with the device's error), and ""
    (any GPU) without models. ValueError naming the variable on a malformed entry."""
    pairs = []
    for entry in filter(None, (e.strip() for e in models.split(","))):
        name, _, mb = entry.partition(":")
        if not name or not mb.strip().isdigit():
            raise ValueError(f"SAN_SLURM_GPU_MODELS: {entry!r} is not name:MB (e.g. a100:40960,h100:81920)")
        pairs.append((int(mb), name.strip()))
    if not pairs:
        return ""
    pairs.sort()
    return next((name for mb, name in pairs if mb >= need_mb), pairs[-1][1])
