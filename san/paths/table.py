"""The path-effectiveness table (the paper's Fig. 4 as numbers) and the seed statistics the figures share.

Free of matplotlib: the table's rule reruns only when the results or this module change, never on a restyling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import xarray as xr

from san.paths.spec import TASK_TITLES


def task_name(ds: xr.Dataset) -> str:
    """The task a result belongs to (its ``task`` attribute)."""
    return str(ds.attrs.get("task", "task"))


def task_title(ds: xr.Dataset, titles: Mapping[str, str] | None = None) -> str:
    """Panel title of a task's results: ``titles[name]`` if given, else the task's title (a variant: followed by
    its name, e.g. "Sorting (sorting_10k)")."""
    name = task_name(ds)
    if titles and titles.get(name):
        return titles[name]
    if name in TASK_TITLES:
        return TASK_TITLES[name]
    kind = str(ds.attrs.get("task_kind", name))
    return f"{TASK_TITLES.get(kind, kind)} ({name})"


def mean_over_seeds(da: xr.DataArray) -> xr.DataArray:
    """The mean over the ``seed`` dimension (``da`` unchanged without one)."""
    return da.mean("seed") if "seed" in da.dims else da


def seed_band(da: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """Mean over seeds and the band the figures draw around it: the lowest and highest seed (the seeds' range;
    ``da`` without a seed dimension: a band of zero width)."""
    if "seed" not in da.dims:
        return da, da, da
    return da.mean("seed"), da.min("seed"), da.max("seed")


def summary_table(datasets: Sequence[xr.Dataset]) -> pd.DataFrame:
    """One row per task: full-model accuracy (mean, lowest and highest seed) and chance accuracy (mean over seeds),
    the largest range over seeds (highest minus lowest seed) of an accuracy by path length, then the mean accuracy
    over seeds and repeats for every (number of paths, path length) as columns ``acc_n{n_paths}_k{k}``."""
    rows = []
    for ds in datasets:
        full = seed_band(ds["full_model_accuracy"])
        row: dict[str, float | str] = {
            "task": task_name(ds),
            "full_model": float(full[0]),
            "full_model_lowest_seed": float(full[1]),
            "full_model_highest_seed": float(full[2]),
            "chance": float(mean_over_seeds(ds["chance_accuracy"])),
            "n_seeds": int(ds.sizes.get("seed", 1)),
        }
        by_seed = ds["accuracy"].mean("repeat")
        spread = by_seed.max("seed") - by_seed.min("seed") if "seed" in by_seed.dims else 0.0 * by_seed
        row["seed_range_max"] = float(spread.max())
        mean = mean_over_seeds(by_seed)
        for n in ds["n_paths"].values:
            for k in ds["path_length"].values:
                row[f"acc_n{int(n)}_k{int(k)}"] = float(mean.sel(n_paths=n, path_length=k))
        rows.append(row)
    return pd.DataFrame(rows).set_index("task")
