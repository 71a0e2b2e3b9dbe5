"""Seeded perturbations of result files, and the control values of the rows judged on them: what the tests that
show every near-miss control reads the data it tests share (a control whose value stays put on perturbed data is a
constant or a placebo that does not depend on the data tested)."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

#: the relative size of the multiplicative noise laid on every float measure
NOISE = 0.05


def perturbed(path: Path, out: Path) -> Path:
    """A copy of the result file ``path`` (netCDF or CSV) in ``out`` whose float measures (data variables, columns)
    are each multiplied by ``exp(NOISE * z)``, z standard normal, from a generator seeded by the file's name (the
    same copy every run); another file is returned as it is."""
    seed = int.from_bytes(hashlib.sha256(path.name.encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    target = out / path.relative_to(path.anchor)
    target.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".nc":
        with xr.open_dataset(path) as ds:
            ds = ds.load()
        perturbed_dataset(ds, rng).to_netcdf(target)
    elif path.suffix == ".csv":
        frame = pd.read_csv(path)
        for name in frame.columns:
            if pd.api.types.is_float_dtype(frame[name]):
                frame[name] = frame[name] * np.exp(NOISE * rng.standard_normal(len(frame)))
        frame.to_csv(target, index=False)
    else:
        return path
    return target


def perturbed_dataset(ds: xr.Dataset, rng: np.random.Generator) -> xr.Dataset:
    """``ds`` with every float data variable multiplied by ``exp(NOISE * z)``, z standard normal from ``rng``."""
    ds = ds.copy()
    for name, var in ds.data_vars.items():
        if np.issubdtype(var.dtype, np.floating):
            ds[name] = var * np.exp(NOISE * rng.standard_normal(var.shape))
    return ds


def control_values(sections: dict) -> dict[str, float]:
    """The measured value of every scientific row's control that has a finite one, by ``section.key``."""
    out = {}
    for name, section in sections.items():
        for row in (section or {}).get("verdicts", []) if isinstance(section, dict) else []:
            value = (row.get("positive_control") or {}).get("measured_value")
            if row["kind"] == "scientific" and value is not None and math.isfinite(value):
                out[f"{name}.{row['key']}"] = float(value)
    return out
