"""Device and dtype selection from config (``device: auto`` picks CUDA when present, else the CPU)."""

from __future__ import annotations

import torch

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(spec: str = "auto") -> torch.device:
    """Turn a config ``device`` value (``auto``, ``cpu``, ``cuda``, ``cuda:N``) into a ``torch.device``.

    ``auto`` falls back to the CPU silently; callers record the resolved device in the result's provenance.
    """
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"config asks for device {spec!r} but CUDA is not available; use device: auto or cpu")
    return device


def resolve_dtype(name: str) -> torch.dtype:
    """Map a config ``dtype`` string to a torch dtype, naming the allowed values on error."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; expected one of {sorted(DTYPES)}") from None


def set_threads(n: int) -> None:
    """Limit torch's intra-op threads to the cores Snakemake granted the job."""
    torch.set_num_threads(max(1, int(n)))
