"""The quantisation control's job: the rank-collapse measures (the relative residuals of the four variants, the
massive ratio, token norms, the spectrum, the first-token attention) recorded on a model's weights and on its copies
requantised by :func:`san.models.quantise.quantised_copy` (weight sets of one :func:`san.rank_collapse.experiment.run`
result). How far each copy moved them (:func:`san.claims.drift.measure_drift`) and the verdicts' drift are read from
that result by the claims (:mod:`san.claims.drift`), so that no change of theirs reruns the job."""

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
    job: Any = None,
) -> xr.Dataset:
    """The quantisation control of one model folder: its copies requantised to each of ``kinds`` (written under
    ``work``, :func:`san.models.quantise.quantised_copy`), the rank-collapse result of the folder and its copies as
    weight sets of one :func:`san.rank_collapse.experiment.run` (``settings``: the ``rank_collapse`` config slice;
    ``inputs``: the folder's tokenised input, shared by its copies, which keep its tokenizer). ``job``: the
    :class:`san.core.device.JobPlace` the measures run on (the CPU by default)."""
    from san.models.quantise import quantised_copy
    from san.rank_collapse.experiment import run

    folders = {reference: Path(folder)}
    for kind in kinds:
        quantised_copy(Path(folder), kind, Path(work) / kind)
        folders[kind] = Path(work) / kind
    return run(family, folders, dict.fromkeys(folders, inputs), settings, *([job] if job is not None else []))
