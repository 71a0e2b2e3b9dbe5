"""Where a torch job runs: its device from the config's ``compute.<rule>`` entry, its CPU threads, one GPU per job,
the float settings that make a GPU give the CPU's numbers, the memory budget of a model job (``memory_budget_mb``:
the weights it may hold, beyond which blocks are streamed, :mod:`san.models.stream`), and what the results record
of it.

``auto`` picks CUDA when a GPU is visible and the CPU otherwise, and says so in the job's log when a job that
declared a GPU runs on the CPU. ``cuda``/``cuda:N`` without CUDA is an error naming the config key. A job asked to
run on ``auto`` or ``cuda`` claims a free GPU of those visible (:mod:`san.core.gpus`), so GPU jobs that run at the
same time use different devices.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, NamedTuple

import torch

from san.core.gpus import claim_gpu, visible_gpus

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

#: cuBLAS's workspace setting for deterministic results (set before CUDA starts; torch's own requirement).
CUBLAS_WORKSPACE = ":4096:8"

log = logging.getLogger("san")


def resolve_device(spec: str = "auto", key: str = "device", gpu_declared: bool = False) -> torch.device:
    """Turn a config device (``auto``, ``cpu``, ``cuda``, ``cuda:N``) into a ``torch.device``.

    ``auto`` and ``cuda`` claim a free visible GPU (one per job); ``cuda:N`` is that GPU. ``key`` names the config
    entry in errors; ``gpu_declared`` (the job reserved a GPU) makes a CPU result of ``auto`` a warning in the log.
    """
    if spec == "auto" and not torch.cuda.is_available():
        if gpu_declared:
            built = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            log.warning(
                "%s is auto and no CUDA device is visible (torch %s, %s): this job reserved a GPU but runs on the "
                "CPU (a GPU environment: envs/torch-cuda.yaml)",
                key,
                torch.__version__,
                built,
            )
        return torch.device("cpu")
    if spec == "cpu":
        return torch.device("cpu")
    try:
        device = torch.device("cuda" if spec == "auto" else spec)
    except RuntimeError as exc:
        raise ValueError(f"{key}: {spec!r} is not a device; expected auto, cpu, cuda or cuda:N") from exc
    if device.type != "cuda":
        raise ValueError(f"{key}: {spec!r} is not a device; expected auto, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise RuntimeError(
            f"{key} is {spec!r} but CUDA is not available here (torch {torch.__version__}); set it to auto or cpu, "
            "or install a CUDA build of torch (envs/torch-cuda.yaml)"
        )
    count = torch.cuda.device_count()
    if device.index is not None:
        if device.index >= count:
            raise RuntimeError(f"{key} is {spec!r} but only {count} CUDA device(s) are visible")
        return device
    ids = visible_gpus() or [str(i) for i in range(count)]
    index = claim_gpu(ids[:count], log=log)
    return torch.device("cuda", index)


def job_device(compute: Mapping[str, Any], threads: int, train: bool = False) -> torch.device:
    """The device of one job from its ``compute`` slice (``device``, ``key``, ``gpu``: what the rule passes), with
    its CPU threads set, and the settings that make CUDA compute what the CPU computes: no TF32 matrix products and,
    for a training (``train``), deterministic algorithms, so a resumed training gives the same numbers there too."""
    set_threads(threads)
    if train:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    device = resolve_device(compute["device"], compute.get("key", "device"), bool(compute.get("gpu")))
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        if train:
            deterministic(device)
    log.info("device %s (%s), %d CPU threads", device, compute.get("key", "device"), torch.get_num_threads())
    return device


def deterministic(device: torch.device) -> None:
    """On CUDA, deterministic algorithms (cuBLAS with a fixed workspace, ``CUBLAS_WORKSPACE_CONFIG=:4096:8``, set
    before the first CUDA product; cuDNN without benchmarking), so that a rerun or a resumed training gives the same
    numbers there too. Nothing on the CPU, whose kernels are deterministic already."""
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False


def resolve_dtype(name: str) -> torch.dtype:
    """Map a config ``dtype`` string to a torch dtype, naming the allowed values on error."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; expected one of {sorted(DTYPES)}") from None


def memory_budget(compute: Mapping[str, Any]) -> tuple[int | None, str]:
    """The memory budget (MB) of a model job from its ``compute`` slice, and the config key that sets it (named in
    errors): ``compute.<rule>.memory_budget_mb``, None when the whole model is held."""
    return compute.get("memory_budget_mb"), compute.get("memory_budget_key", "memory_budget_mb")


def set_threads(n: int) -> None:
    """Limit torch's intra-op threads to the cores Snakemake granted the job."""
    torch.set_num_threads(max(1, int(n)))


class JobPlace(NamedTuple):
    """Where a model job loads its weight sets (:func:`san.rank_collapse.experiment.load_weight_set`): the device
    (:func:`job_device`), the job's log, and the memory budget in MB above which a weight set is streamed block by
    block, with the config key that sets it (:func:`memory_budget`), named in errors."""

    device: torch.device | str = "cpu"
    log: Any = None
    budget_mb: float | None = None
    budget_key: str = "memory_budget_mb"


#: a job on the CPU, without a log or a memory budget (every weight set held in memory)
ON_CPU = JobPlace()
