"""Results of the circle experiment (the paper's Fig. 3): variable descriptions, gathering the per-run datasets of
the sweep into one, and the collapse table. Free of torch, so the gather and table jobs start fast.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from san.core.storage import Variable, describe

DATA_VARIABLES = ("sequence", "copy_loss")  # properties of the data, the same in every run


#: long_name, units and description of every variable and coordinate of a circle result (the plane is
#: dimensionless: "1")
VARIABLES = {
    "trajectory": Variable(
        "token positions X_t of the recurrent rollout",
        "1",
        "states X_t of the recurrent rollout from the first example (t = 0 is the input)",
    ),
    "token_distance": Variable(
        "distance between the two tokens",
        "1",
        "Euclidean distance between the two tokens at step t (0 = collapsed to one point)",
    ),
    "centre_distance": Variable(
        "distance of a token from the circle's centre",
        "1",
        "distance of each token from the circle's centre (the training radius is the target)",
    ),
    "loss": Variable(
        "training loss per example of the epoch",
        "1",
        "training loss per epoch: summed squared error of the epoch / number of examples",
    ),
    "init_loss": Variable(
        "one-step loss per example before training",
        "1",
        "one-step loss over the training set before training (summed squared error / examples)",
    ),
    "copy_loss": Variable(
        "one-step loss per example of the copy predictor",
        "1",
        "loss of the copy predictor X_{t+1} = X_t (a model must beat it to have learnt the rotation)",
    ),
    "final_loss": Variable(
        "one-step loss per example after training",
        "1",
        "one-step loss over the training set after training (summed squared error / examples)",
    ),
    "sequence": Variable(
        "positions of the two training sequences",
        "1",
        "the two training sequences (inputs in order, then the last target): the circle's two arcs",
    ),
    "layer_skip": Variable("variant has a skip connection around the layer", "1", "1 when the variant has layer skip"),
    "step_skip": Variable(
        "variant has a skip connection around the recurrent step", "1", "1 when the variant has step skip"
    ),
    "mlp": Variable("variant has an MLP after attention", "1", "1 when the variant has mlp"),
    "step": Variable("recurrent step t", "1"),
    "token": Variable("token index", "1"),
    "coord": Variable("coordinate axis of the plane", "1"),
    "epoch": Variable("training epoch", "1"),
    "position": Variable("position along a training sequence", "1"),
    "seed": Variable("seed of the initialisation", "1"),
    "hidden_dim": Variable("hidden dimension of the layer", "1"),
    "variant": Variable("architecture variant", "1"),
}


def describe_variables(ds: xr.Dataset, n_points: int, radius: float) -> xr.Dataset:
    """Attach CF ``long_name`` and ``units`` and a longer ``description`` to the variables of a circle result."""
    describe(ds, VARIABLES)
    for flag in ("layer_skip", "step_skip", "mlp"):
        if flag in ds:
            ds[flag].attrs.update(flag_values=np.array([0, 1], dtype=ds[flag].dtype), flag_meanings="off on")
    ds.attrs.update({"n_points": n_points, "radius": radius})
    ds.attrs.setdefault("title", "san: circle experiment (Dong et al. 2021, Fig. 3)")
    return ds


def gather(datasets: Mapping[tuple[str, int, int], xr.Dataset]) -> xr.Dataset:
    """Combine per-job results keyed by ``(variant, hidden_dim, seed)`` into one dataset with those three dims.

    Every combination of the given variants, hidden dims and seeds must be present (a full grid).
    """
    variants = list(dict.fromkeys(k[0] for k in datasets))
    dims = sorted({k[1] for k in datasets})
    seeds = sorted({k[2] for k in datasets})
    missing = [(v, d, s) for v in variants for d in dims for s in seeds if (v, d, s) not in datasets]
    if missing:
        raise ValueError(f"circle results missing for {missing}; the sweep must be a full grid")
    flags = {}
    rows = []
    for v in variants:
        cols = []
        for d in dims:
            per_seed = [datasets[(v, d, s)] for s in seeds]
            per_seed = [ds.drop_vars(DATA_VARIABLES).drop_attrs() for ds in per_seed]
            cols.append(xr.concat(per_seed, dim=pd.Index(seeds, name="seed")))
        rows.append(xr.concat(cols, dim=pd.Index(dims, name="hidden_dim")))
        a = datasets[(v, dims[0], seeds[0])].attrs
        flags[v] = {k: bool(a[k]) for k in ("layer_skip", "step_skip", "mlp")}
    out = xr.concat(rows, dim=pd.Index(variants, name="variant"))
    for key in ("layer_skip", "step_skip", "mlp"):
        out[key] = ("variant", np.array([flags[v][key] for v in variants], dtype=np.int8))
    first = datasets[(variants[0], dims[0], seeds[0])]
    for ds in datasets.values():
        if any(not np.array_equal(ds[name].values, first[name].values) for name in DATA_VARIABLES):
            raise ValueError("circle runs were trained on different data; rerun them with one data config")
    out = out.transpose("variant", "hidden_dim", "seed", ...)
    for name in DATA_VARIABLES:
        out[name] = first[name]
    return out


def collapse_table(ds: xr.Dataset, steps: Sequence[int], threshold: float) -> pd.DataFrame:
    """Per variant and hidden dim, over seeds: token distance after each of ``steps`` (mean, std, min, max), the
    number of seeds that collapsed, i.e. whose final distance is below ``threshold`` times the starting one, the
    median training loss after training and the number of seeds whose loss beats the copy predictor
    ``X_{t+1} = X_t`` (only those learnt to step along the circle)."""
    last = int(ds.step.max())
    bad = [s for s in steps if s > last]
    if bad:
        raise ValueError(f"report steps {bad} exceed the rollout length {last}")
    dist = ds["token_distance"]
    rel_final = dist.sel(step=last) / dist.sel(step=0)
    rows = []
    for v in ds.variant.values:
        for d in ds.hidden_dim.values:
            row: dict[str, object] = {"variant": str(v), "hidden_dim": int(d), "n_seeds": ds.sizes["seed"]}
            for s in steps:
                x = dist.sel(variant=v, hidden_dim=d, step=s).values
                row[f"dist_{s}_mean"] = float(np.mean(x))
                row[f"dist_{s}_std"] = float(np.std(x))
                row[f"dist_{s}_min"] = float(np.min(x))
                row[f"dist_{s}_max"] = float(np.max(x))
            r = rel_final.sel(variant=v, hidden_dim=d).values
            row["n_collapsed"] = int(np.sum(r < threshold))
            final_loss = ds["final_loss"].sel(variant=v, hidden_dim=d).values
            row["final_loss_median"] = float(np.median(final_loss))
            row["n_beat_copy"] = int(np.sum(final_loss < float(ds["copy_loss"])))
            rows.append(row)
    return pd.DataFrame(rows)
