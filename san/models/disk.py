"""The disk space a model job declares (Snakemake's ``disk_mb``, which the Kubernetes and cloud executors request as
the node's ephemeral storage, where a job downloads its inputs when there is no shared filesystem): from the sizes
of the files the job writes or reads, read on the scheduling host before the job runs where those files are there
(a pretrained source's pinned files, an acquired model folder), else the rule's value of workflow/resources.yaml.

Torch-free: the workflow calls it while it schedules jobs."""

from __future__ import annotations

import importlib.metadata
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from san.models.folders import AcquisitionError, package_dir

MB = 1_000_000

#: Disk an acquisition occupies per MB of its source's pinned files, by what it does with them: a package's or a
#: local folder's files are copied into the model folder (and their temporary copy), a zip archive of package parts
#: is reassembled and extracted, and a GGUF file (4-bit quantised in the default's packages) is reassembled and
#: dequantised to float32 beside itself (san.models.sources.gguf): 8 bytes for each byte of 4-bit weights, plus
#: the file; an ONNX graph is read in place and its backbone written as float32 safetensors (at most the file's size).
FOOTPRINT = {"package": 2, "local": 2, "zip": 3, "gguf": 10, "onnx": 1}


def files_mb(paths: Iterable[str | Path]) -> float | None:
    """Total size in MB of ``paths`` (a folder counts every file below it); None when one of them is not on this
    host (not acquired yet, or in a storage bucket)."""
    total = 0
    for path in map(Path, paths):
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        else:
            return None
    return total / MB


def pinned_files(source: Mapping[str, Any]) -> list[Path] | None:
    """The files a pretrained ``source`` (``models.<name>.pretrained``) loads its model from, where they are on this
    host: a package's model folder and a local folder (the files its ``sha256`` pins), the parts of installed
    distributions, an installed distribution's ONNX file; None for a hub source (downloaded by the job) or a package
    that is not installed here."""
    kind = source["source"]
    try:
        if kind == "package":
            folder = package_dir(source["package"]) / source.get("subdir", "model")
            return [folder / name for name in source["sha256"]]
        if kind == "local":
            return [Path(source["path"]) / name for name in source["sha256"]]
        if kind == "package_parts":
            return [
                Path(importlib.metadata.distribution(p["distribution"]).locate_file(p["file"])) for p in source["parts"]
            ]
        if kind == "onnx":
            return [Path(importlib.metadata.distribution(source["distribution"]).locate_file(source["file"]))]
    except (AcquisitionError, importlib.metadata.PackageNotFoundError):
        return None
    return None


def footprint(source: Mapping[str, Any]) -> int:
    """MB an acquisition of ``source`` writes per MB of its pinned files (:data:`FOOTPRINT`; 1 for a source of no
    pinned files here, a hub download)."""
    return FOOTPRINT.get(source.get("format", source["source"]), 1)


def declared_disk_mb(paths: Iterable[str | Path] | None, factor: float, before: int) -> int:
    """What a job declares as ``disk_mb``: ``before`` (the rule's table value, or the model's ``disk_mb``) plus
    ``factor`` times the size of ``paths`` where they are all on this host, else ``before`` alone."""
    size = files_mb(paths) if paths is not None else None
    return int(before) + (math.ceil(factor * size) if size else 0)
