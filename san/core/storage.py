"""Labelled results on disk: xarray datasets written atomically to netCDF with provenance attributes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import xarray as xr

from san.core.provenance import provenance_attrs


def write_netcdf(ds: xr.Dataset, path: str | Path, config: Any, seed: int | None = None, **extra: Any) -> Path:
    """Write ``ds`` to ``path`` with provenance attributes; the file appears only once it is complete.

    The dataset's own attributes and ``extra`` are kept (values other than str/int/float as JSON strings).

    The dataset is written to a temporary file in the same folder and renamed into place, so an interrupted job
    never leaves a half-written result behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = ds.copy()
    ds.attrs = provenance_attrs(config, seed=seed, **ds.attrs, **extra)
    fd, tmp = tempfile.mkstemp(suffix=".nc.part", dir=path.parent)
    os.close(fd)
    try:
        ds.to_netcdf(tmp, engine="netcdf4")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_netcdf(path: str | Path) -> xr.Dataset:
    """Load a result file fully into memory (and close it), with a clear error when it is missing."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"result file {path} does not exist: run the workflow rule that produces it first")
    with xr.open_dataset(path, engine="netcdf4") as ds:
        return ds.load()
