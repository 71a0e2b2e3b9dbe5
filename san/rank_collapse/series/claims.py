"""The ``training_series`` section of summary.json: what the offline training series learned and the rank-collapse
measures at its first and last checkpoint (torch-free)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.measures.sink import sink_share
from san.rank_collapse.series.measures import has_unmodified, over_layers
from san.rank_collapse.series.spec import UNMODIFIED
from san.rank_collapse.spec import DRAWN, drawn_layers


def _f(x: float) -> float:
    return float(np.asarray(x))


def phenomena_at(ds: xr.Dataset) -> dict[str, dict[str, xr.DataArray]]:
    """The unmodified model's pretrained phenomena per revision, mean over seeds: its largest massive ratio over the
    layers (Sun et al. 2024, Sec. 2; each layer's mean over the sequences) and its matrix entropy (Queipo-de-Llano et
    al. 2025) mean over the layers and sequences, each keyed by the variant; empty without that variant."""
    if not has_unmodified(ds):
        return {"largest_massive_ratio": {}, "mean_matrix_entropy": {}}
    return {
        "largest_massive_ratio": {UNMODIFIED: over_layers(ds, "massive_ratio", "max").mean("seed")},
        "mean_matrix_entropy": {UNMODIFIED: over_layers(ds, "matrix_entropy", "mean").mean("seed")},
    }


def series_claims(
    ds: xr.Dataset, losses: Mapping[int, Mapping[str, Any]], *, max_loss_ratio: float, share_threshold: float
) -> dict[str, Any]:
    """The offline training series: what each seed's model learned (its loss over the last tenth of the steps
    against the unigram baseline of the text: the series is a real training run when every seed's ratio is at most
    ``max_loss_ratio``), and the measures at the first and the last checkpoint, mean over seeds and sequences: the
    relative residual of SAN, SAN+skip and the transformer at the first, middle and last layer, the share of sink
    heads (``share_threshold``) over the blocks, and the transformer's largest massive ratio and mean matrix entropy
    (:func:`phenomena_at`). ``ds``: :func:`san.rank_collapse.series.experiment.run_series`' result;
    ``losses``: each seed's loss record (``loss.json`` of :func:`san.rank_collapse.series.train.train`)."""
    per_seed = {
        str(seed): {
            "final_loss": rec["final_loss"],
            "unigram_loss": rec["unigram_loss"],
            "ratio": rec["final_loss"] / rec["unigram_loss"],
        }
        for seed, rec in losses.items()
    }
    ratios = [e["ratio"] for e in per_seed.values()]
    learns = V.judged(all(r <= max_loss_ratio for r in ratios), len(ratios))
    order = np.argsort(ds["step"].values)
    first, last = ds["revision"].values[order[0]], ds["revision"].values[order[-1]]
    ratio = ds["residual_ratio"].mean(("seed", "sample"))
    share = sink_share(ds["first_token_attention"], share_threshold).mean("layer", skipna=True).mean("seed")
    layers = drawn_layers(int(ds["layer"].max()))
    variants = [v for v in DRAWN if v in ds["variant"]]
    phenomena = phenomena_at(ds)
    at = {
        str(rev): {
            "step": _f(ds["step"].sel(revision=rev)),
            "residual_ratio": {v: {str(la): _f(ratio.sel(revision=rev, variant=v, layer=la)) for la in layers}
                               for v in variants},
            "sink_share": {v: _f(share.sel(revision=rev, variant=v)) for v in variants},
            **{key: {v: _f(x.sel(revision=rev)) for v, x in by_v.items()} for key, by_v in phenomena.items()},
        }
        for rev in (first, last)
    }  # fmt: skip
    return {
        "seeds": sorted(per_seed),
        "revisions": int(ds.sizes["revision"]),
        "layers": layers,
        "first": str(first),
        "last": str(last),
        "max_loss_ratio": max_loss_ratio,
        "share_threshold": share_threshold,
        "per_seed": per_seed,
        "at": at,
        "learns": learns,
        "verdicts": [
            V.row("learns", "the offline series is a real training run: every seed's model beats the unigram baseline",
                  kind=V.DEMONSTRATION, form=V.EXISTENTIAL, source="the offline training series (Pythia's schedule)",
                  holds=learns, value=max(ratios) if ratios else None,
                  margin=max_loss_ratio - max(ratios) if ratios else None,
                  test=f"every seed's loss over the last tenth of the steps at most {max_loss_ratio:g} x the unigram "
                  "baseline (margin: required - largest ratio)",
                  bound=V.Threshold(max_loss_ratio, above=False, key="report.training_series.max_loss_ratio"),
                  inclusive=True),
        ],
    }  # fmt: skip


def check_config(report: Mapping[str, Any]) -> None:
    """The series' report keys (``report.training_series``) need no cross-check beyond their schema; the sink
    threshold the series reads is the rank-collapse wing's (``report.first_token_sink``)."""


def claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The ``training_series`` section (None without an offline series in the run): ``inputs["series"]`` is the
    series' result, ``inputs["series_checkpoints"]`` its seeds' folders with their loss records (``loss.json``);
    thresholds from ``params["report"]``."""
    from san.core.storage import read_netcdf

    if not inputs.get("series"):
        return {"training_series": None}
    t = params["report"]
    losses = {}
    for folder in inputs["series_checkpoints"]:
        record = json.loads((Path(folder) / "loss.json").read_text())
        losses[int(record["seed"])] = record
    section = series_claims(
        read_netcdf(inputs["series"][0]), losses, max_loss_ratio=t["training_series"]["max_loss_ratio"],
        share_threshold=t["first_token_sink"]["share_threshold"],
    )  # fmt: skip
    return {"training_series": section}
