"""Rank collapse along training: the experiment of :mod:`san.rank_collapse.experiment` on every revision of a
checkpoint series, with the revision as a dimension.

A series is one model's revisions (``step0`` = the initialisation, then checkpoints), possibly trained with several
seeds. Each revision is one weight set of :func:`san.rank_collapse.experiment.run`, so every measure (the four
variants' residual ratios, the first-token sink) is the one of Fig. 2; the result's ``weights`` dimension becomes
``revision`` with the training step and the tokens seen as coordinates (from the folders' manifests, else from the
revision's name, :mod:`san.models.revisions`), and the seeds are stacked along ``seed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr

from san.core.storage import Variable, describe
from san.models.folders import read_manifest
from san.models.revisions import step_of, tokens_of
from san.rank_collapse.experiment import VARIABLES, run

SERIES_VARIABLES = {
    **VARIABLES,
    "revision": Variable("revision of the model (checkpoint name)", "1"),
    "step": Variable("training step of the revision", "1", "NaN where neither the manifest nor the name states it"),
    "tokens_seen": Variable("training tokens seen at the revision", "1", "NaN where unknown"),
    "seed": Variable("training seed of the series", "1"),
}


def _step_and_tokens(revision: str, folder: Path) -> tuple[float, float]:
    """The training step and tokens seen of a revision: its manifest's ``step``/``tokens_seen`` (an offline series'
    checkpoint), else what its name states; NaN where neither does."""
    manifest = read_manifest(folder)
    step = manifest.get("step", step_of(revision))
    tokens = manifest.get("tokens_seen", tokens_of(revision))
    return (np.nan if step is None else float(step)), (np.nan if tokens is None else float(tokens))


def run_series(
    family: str,
    series: Mapping[int, Mapping[str, str | Path]],
    inputs: xr.Dataset,
    settings: Mapping[str, Any],
    device: torch.device | str = "cpu",
    log: Any = None,
) -> xr.Dataset:
    """The rank-collapse measures of every revision of every seed: ``series`` maps each seed to its revisions'
    model folders (the same revision names for every seed), ``inputs`` is the tokenised input every revision reads
    (one tokenizer for the series), ``settings`` the ``rank_collapse`` config slice. Dimensions: those of
    :func:`san.rank_collapse.experiment.run` with ``revision`` for ``weights``, and ``seed``."""
    seeds = list(series)
    names = [list(series[s]) for s in seeds]
    if any(n != names[0] for n in names):
        raise ValueError(
            f"the seeds of a series must have the same revisions, got {dict(zip(seeds, names, strict=True))}"
        )
    parts = []
    for seed in seeds:
        folders = {rev: Path(f) for rev, f in series[seed].items()}
        ds = run(family, folders, dict.fromkeys(folders, inputs), settings, device, log)
        parts.append(ds.rename(weights="revision").drop_attrs())
    out = xr.concat(parts, dim=xr.DataArray(seeds, dims="seed", name="seed"))
    first = series[seeds[0]]
    steps, tokens = zip(*(_step_and_tokens(rev, Path(f)) for rev, f in first.items()), strict=True)
    out = out.assign_coords(step=("revision", list(steps)), tokens_seen=("revision", list(tokens)))
    out.attrs = {
        "title": "san: rank collapse along training, one series of checkpoints (Dong et al. 2021, Fig. 2)",
        "manifests": {str(s): {r: read_manifest(f) for r, f in series[s].items()} for s in seeds},
        "input_sha256": inputs.attrs["input_sha256"],
    }
    return describe(out, SERIES_VARIABLES)
