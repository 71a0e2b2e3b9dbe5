"""Labelled results on disk: xarray datasets written atomically to netCDF with provenance attributes, their
variables described from one table per experiment (:func:`describe`), structured attributes as JSON strings."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import xarray as xr

from san.core.provenance import provenance_attrs, unlabelled


class Variable(NamedTuple):
    """How a result variable or coordinate is described: its CF ``long_name`` and ``units`` (``"1"`` for a
    dimensionless number, ``"s"`` for seconds) and, where a label is not enough, a longer ``description``; a
    measure with one exact definition also states its ``formula`` and the papers it follows (CF ``references``)."""

    long_name: str
    units: str
    description: str | None = None
    formula: str | None = None
    references: str | None = None


def describe(ds: Any, table: Mapping[str, Variable]) -> Any:
    """Set ``long_name``, ``units`` and ``description``, ``formula`` and ``references`` (when the table gives them)
    of the variables and coordinates of ``ds`` named in ``table`` (an experiment's one table of its variables,
    ``name -> Variable``); names that ``ds`` does not hold are skipped. Returns ``ds`` (changed in place)."""
    for name, entry in table.items():
        if name in ds.variables:
            var = Variable(*entry)
            ds[name].attrs.update(long_name=var.long_name, units=var.units)
            for key in ("description", "formula", "references"):
                if getattr(var, key) is not None:
                    ds[name].attrs[key] = getattr(var, key)
    return ds


def structured_attr(value: Any) -> str:
    """A structured attribute (a mapping or list of plain values) as the JSON string a netCDF file stores."""
    return json.dumps(value)


def read_structured_attr(ds: Any, key: str) -> Any:
    """The structured attribute ``key`` of ``ds`` (written by :func:`structured_attr`), parsed back."""
    return json.loads(ds.attrs[key])


def part_path(path: str | Path) -> Path:
    """The file a result is written to before it is renamed into place: ``<name>.part`` beside ``path``."""
    path = Path(path)
    return path.with_name(f"{path.name}.part")


def write_netcdf(ds: xr.Dataset, path: str | Path, config: Any, seed: int | None = None, **extra: Any) -> Path:
    """Write ``ds`` to ``path`` with provenance attributes; the file appears only once it is complete.

    The dataset's own attributes and ``extra`` are kept (values other than str/int/float as JSON strings).

    The dataset is written to ``<name>.part`` in the same folder (:func:`part_path`) and renamed into place, so an
    interrupted job never leaves a half-written result behind: a failed write removes the part file, and one left
    by a killed job is replaced by the next write. The file gets the mode every other output gets (the umask's).
    String variables and coordinates are stored as character arrays (CF-1.8); they read back as strings.

    Every variable and coordinate must carry ``long_name`` and ``units`` (:func:`san.core.provenance.unlabelled`;
    an experiment's table through :func:`describe`): a dataset with an unlabelled one is refused with a ValueError
    naming it, before anything is written.
    """
    path = Path(path)
    missing = unlabelled(ds)
    if missing:
        raise ValueError(
            f"result {path}: variables without their CF labels ({', '.join(missing)}); describe every variable "
            "and coordinate with long_name and units (san.core.storage.describe, units '1' where it has none)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = ds.copy()
    ds.attrs = provenance_attrs(config, seed=seed, **{**ds.attrs, **extra})
    # strings as character arrays: CF-1.8 has no variable-length strings
    encoding = {name: {"dtype": "S1"} for name, var in ds.variables.items() if var.dtype.kind in "OU"}
    tmp = part_path(path)
    tmp.unlink(missing_ok=True)
    try:
        ds.to_netcdf(tmp, engine="netcdf4", encoding=encoding)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def read_netcdf(path: str | Path) -> xr.Dataset:
    """Load a result file fully into memory (and close it), with a clear error when it is missing."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"result file {path} does not exist: run the workflow rule that produces it first")
    with xr.open_dataset(path, engine="netcdf4") as ds:
        return ds.load()
