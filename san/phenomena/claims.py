"""The ``phenomena`` section of summary.json (torch-free): the literature's claims about pretrained transformers,
massive activations, attention sinks, compression and high-norm tokens, checked on this run's pretrained models
against their random-init twins, and the models x claims table.

The claims (each in its module, each row built by :func:`san.claims.verdicts.check` with its near-miss control):
Sun et al. 2024 (:mod:`~san.phenomena.massive`), Queipo-de-Llano et al. 2025 (:mod:`~san.phenomena.colocation`),
"compression is not rank collapse" (:mod:`~san.phenomena.compression`), Barbero et al. 2025
(:mod:`~san.phenomena.context`, :mod:`~san.phenomena.size`) and Darcet et al. 2024 against Bach et al. 2025
(:mod:`~san.phenomena.high_norm`).
Each model's kind (decoder, encoder, image encoder) is the family its result records (as recognised when its weights
were acquired), never the config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import xarray as xr

from san.claims.drift import apply_row_drift, merge_drift, row_drift
from san.core.config import ConfigError
from san.models.folders import result_family
from san.phenomena.colocation import colocation_claims
from san.phenomena.compression import compression_claims
from san.phenomena.context import context_claims
from san.phenomena.drift import apply_drift, cell_drift, measure_table
from san.phenomena.high_norm import high_norm_claims
from san.phenomena.massive import massive_claims
from san.phenomena.size import size_claims
from san.phenomena.spec import CLAIMS, model_kind


def check_config(report: Mapping[str, Any]) -> None:
    """Cross-checks of ``report.phenomena`` that its schema cannot express: the plateau's factor below the jump's
    (else a spike of the required jump would itself count as a plateau, and the plateau's near-miss theory, a
    transient spike, could never fail); raises :class:`ConfigError` naming the keys."""
    m = report["phenomena"]["massive"]
    if m["plateau"] >= m["jump"]:
        raise ConfigError(
            f"report.phenomena.massive.plateau = {m['plateau']} must be below report.phenomena.massive.jump = "
            f"{m['jump']}: a spike of the required jump would count as nearly constant"
        )


def judge_all(
    text: Mapping[str, xr.Dataset],
    images: Mapping[str, xr.Dataset],
    context: Mapping[str, xr.Dataset],
    report: Mapping[str, Any],
    ladders: Sequence[Sequence[str]] = (),
) -> dict[str, Any]:
    """The section from the results (model -> dataset): ``text`` (rank collapse), ``images`` (vision), ``context``
    (context-length runs), thresholds from ``report`` (config ``report``), the size ``ladders``
    (``phenomena.size_ladders``): the models and their kinds, the claims and
    their labels, the verdict rows in the order of :data:`~san.phenomena.spec.CLAIMS` and the models x claims table
    (``table``: model -> claim -> cell)."""
    kinds = {name: model_kind(result_family(ds.attrs)) for name, ds in {**text, **images}.items()}
    r, share = report["phenomena"], report["first_token_sink"]["share_threshold"]
    judged = {
        **massive_claims(text, kinds, r),
        **colocation_claims(text, kinds, r, share),
        **compression_claims(text, kinds, r),
        **context_claims(context, kinds, r, share),
        **size_claims(context, kinds, r, share, ladders),
        **high_norm_claims(images, kinds, r),
    }
    return {
        "models": kinds,
        "claims": {key: label for key, (label, _) in CLAIMS.items()},
        "sink_share_threshold": share,
        "table": {name: {key: judged[key]["cells"][name] for key in CLAIMS} for name in kinds},
        "verdicts": [judged[key]["row"] for key in CLAIMS],
    }


def _read(inputs: Mapping[str, Any], params: Mapping[str, Any], files: str, models: str) -> dict[str, xr.Dataset]:
    """The results of input ``files`` by model, in the order of ``params[models]`` (none where the run has none)."""
    from san.core.storage import read_netcdf

    return dict(zip(params.get(models, []), map(read_netcdf, inputs.get(files, [])), strict=True))


def claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The ``phenomena`` section of summary.json (None without any text model or image encoder in the run).

    ``inputs``: the summary rule's files: ``rank_collapse`` (in the order of ``params["models"]``), ``vision``
    (``params["vision_models"]``), ``sink_context`` (``params["sink_context_models"]``, where the run has the
    context-length runs; ``params["size_ladders"]``: the families at several sizes) and ``quantisation``
    (``params["quantisation_models"]``: the quantisation control of each cell of those models,
    :mod:`san.phenomena.drift`); ``params["report"]``: config ``report``."""
    text = _read(inputs, params, "rank_collapse", "models")
    images = _read(inputs, params, "vision", "vision_models")
    if not text and not images:
        return {"phenomena": None}
    context = _read(inputs, params, "sink_context", "sink_context_models")
    section = judge_all(text, images, context, params["report"], params.get("size_ladders", ()))
    controls = _read(inputs, params, "quantisation", "quantisation_models")
    drifts: dict[str, dict[str, float | None]] = {}
    rows: dict[str, float | None] = {}
    # each kind judged alone: the text models' claims read the rank-collapse results, the image encoders' the vision
    # results (the context-length runs are not recomputed by the control: their rows get no drift)
    for results, as_text in ((text, True), (images, False)):
        cells, margins = _drift(results, controls, params["report"], as_text)
        drifts |= cells
        rows = merge_drift(rows, margins)
    apply_drift(section["table"], drifts)
    apply_row_drift(section["verdicts"], rows)
    section["quantisation_models"] = list(drifts)
    section["quantisation"] = {name: measure_table(control) for name, control in controls.items()}
    return {"phenomena": section}


def _drift(
    results: Mapping[str, xr.Dataset], controls: Mapping[str, xr.Dataset], report: Mapping[str, Any], as_text: bool
) -> tuple[dict[str, dict[str, float | None]], dict[str, float | None]]:
    """The quantisation control of the models of ``results`` (text models' rank-collapse results when ``as_text``,
    else image encoders' vision results) that have one in ``controls``: each model's cell drifts
    (:func:`san.phenomena.drift.cell_drift`) and each verdict row's margin drift (:func:`san.claims.drift.row_drift`),
    every copy judged by :func:`judge_all` on results of that kind alone."""
    own = {name: control for name, control in controls.items() if name in results}
    if not own:
        return {}, {}

    def judged(swapped: Mapping[str, xr.Dataset]) -> dict[str, Any]:
        return judge_all(swapped, {}, {}, report) if as_text else judge_all({}, swapped, {}, report)

    cells = {name: cell_drift(name, results[name], c, lambda r: judged(r)["table"]) for name, c in own.items()}
    margins = row_drift(results, own, lambda r: {v["key"]: v.get("margin") for v in judged(r)["verdicts"]})
    return cells, margins
