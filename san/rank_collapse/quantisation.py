"""The quantisation control's job: the rank-collapse measures (the relative residuals of the four variants, the
massive ratio, token norms, the spectrum, the first-token attention; for an image encoder the vision measures)
recorded on a model's weights and on its copies requantised by :func:`san.models.quantise.quantised_copy` (weight sets
of one result of the experiment's ``run``: :func:`san.rank_collapse.experiment.run`,
:func:`san.rank_collapse.vision.experiment.run`). How far each copy moved them
(:func:`san.claims.drift.measure_drift`) and the verdicts' drift are read from that result by the claims
(:mod:`san.claims.drift`), so that no change of theirs reruns the job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import xarray as xr


def quantisation_control(
    family: str,
    folder: Path,
    inputs: xr.Dataset,
    settings: Mapping[str, Any],
    kinds: Sequence[str],
    work: Path,
    reference: str = "pretrained",
    experiment: str = "san.rank_collapse.experiment",
    job: Any = None,
) -> xr.Dataset:
    """The quantisation control of one model folder: its copies requantised to each of ``kinds`` (written under
    ``work``, :func:`san.models.quantise.quantised_copy`), the measures of the folder and its copies as
    weight sets of one result of ``experiment``'s ``run`` (the text models' :mod:`san.rank_collapse.experiment` with
    ``settings`` the ``rank_collapse`` config slice and ``inputs`` the folder's tokenised input; the image encoders'
    :mod:`san.rank_collapse.vision.experiment` with the ``vision`` slice and the folder's pixel values: shared by the
    copies, which keep the folder's tokenizer or image processor). ``job``: the :class:`san.core.device.JobPlace`
    the measures run on (the CPU by default)."""
    import importlib

    from san.models.quantise import quantised_copy

    run = importlib.import_module(experiment).run

    folders = {reference: Path(folder)}
    for kind in kinds:
        quantised_copy(Path(folder), kind, Path(work) / kind)
        folders[kind] = Path(work) / kind
    return run(family, folders, dict.fromkeys(folders, inputs), settings, *([job] if job is not None else []))
