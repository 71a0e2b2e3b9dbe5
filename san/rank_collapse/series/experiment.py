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

from san.core.device import JobPlace
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
    "duplicate_of": Variable(
        "revision whose weights this revision serves", "1", "empty: its own weights; else analysed once, as that one"
    ),
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
        ds = run(family, folders, dict.fromkeys(folders, inputs), settings, JobPlace(device, log))
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


def run_hub_series(
    name: str,
    source: Mapping[str, Any],
    out_root: str | Path,
    documents: Any,
    text: Mapping[str, Any],
    settings: Mapping[str, Any],
    device: torch.device | str = "cpu",
    log: Any = None,
) -> xr.Dataset:
    """The rank-collapse measures of every revision of the hub entry ``source`` of model ``name`` (its
    ``revisions``: :func:`san.models.sources.series.expand_revisions`), each acquired into ``out_root/<revision>``,
    tokenised with its own tokenizer (``text``: ``seq_len``, ``n_sequences``, ``seed`` of the ``documents``),
    analysed, and removed unless ``source['keep_revisions']`` (:func:`san.models.store.acquire_series`: one
    revision on disk at a time). A duplicate revision (the weights of an earlier one) is analysed once: its values
    are the earlier revision's, and the coordinate ``duplicate_of`` names that revision (empty for the others).
    Dimensions as :func:`run_series`, one seed (0)."""
    from san.core.text import content_hash, tokenize_documents
    from san.models.folders import load_tokenizer, recorded_family
    from san.models.store import acquire_series

    parts: dict[str, xr.Dataset] = {}
    steps: dict[str, tuple[float, float]] = {}

    def analyse(revision: str, folder: Path) -> None:
        family, _ = recorded_family([folder])
        ids = tokenize_documents(load_tokenizer(folder), documents, text["seq_len"], text["n_sequences"], text["seed"])
        inputs = xr.Dataset({"input_ids": (("sample", "token"), ids)}, attrs={"input_sha256": content_hash(ids)})
        parts[revision] = run(family, {revision: folder}, {revision: inputs}, settings, JobPlace(device, log))
        steps[revision] = _step_and_tokens(revision, folder)

    record = acquire_series(
        name, None, dict(source), out_root, f"models.{name}.pretrained", analyse, bool(source.get("keep_revisions"))
    )
    revisions, same = record["revisions"], record["duplicates"]
    data = [parts[same.get(r, r)].rename(weights="revision").assign_coords(revision=[r]) for r in revisions]
    out = xr.concat([d.drop_attrs() for d in data], dim="revision").expand_dims(seed=[0])
    named = {r: tuple(np.nan if v is None else float(v) for v in (step_of(r), tokens_of(r))) for r in same}
    step, tokens = zip(*({**steps, **named}[r] for r in revisions), strict=True)
    out = out.assign_coords(
        step=("revision", list(step)),
        tokens_seen=("revision", list(tokens)),
        duplicate_of=("revision", [same.get(r, "") for r in revisions]),
    )
    out.attrs = {
        "title": f"san: rank collapse along training, the hub revisions of {source['repo_id']} (Dong et al. 2021)",
        "series": {k: record[k] for k in ("repo_id", "revisions", "commits", "duplicates")},
        "manifests": record["manifests"],
        "input_sha256": {r: parts[r].attrs["input_sha256"][r] for r in parts},
    }
    return describe(out, SERIES_VARIABLES)
