"""The quantisation drift of the rank-collapse measures: the same measures (the relative residuals of the four
variants, the massive ratio, token norms, the spectrum, the first-token attention) recorded on a model's weights and
on its copies requantised by :func:`san.models.quantise.quantised_copy` (weight sets of one
:func:`san.rank_collapse.experiment.run` result), and per measure, variant and layer how far each copy's mean over
the input sequences moved from the weights' own. The verdicts on quantised weights print it beside their margin
(:func:`san.core.drift.against_drift`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

#: integer coordinates stored as variables (a token's and a dimension's index), not measures
NOT_MEASURES = ("massive_token", "massive_dim")


def measure_drift(ds: xr.Dataset, reference: str = "pretrained") -> xr.Dataset:
    """Per measure of a rank-collapse result ``ds`` whose weight sets are ``reference`` and its quantised copies:
    ``|mean(copy) - mean(reference)|`` over the input sequences (over the heads for the first-token attention), on
    the dims ``(copy, variant, layer)``, and ``max_drift``-prefixed variables with the largest over the copies. A
    measure that is NaN on the reference (the first-token attention at layer 0) stays NaN."""
    if reference not in ds["weights"].values:
        raise ValueError(f"the result has no weight set {reference!r} (has {list(ds['weights'].values)})")
    copies = [str(w) for w in ds["weights"].values if w != reference]
    if not copies:
        raise ValueError(f"the result has no quantised copy of {reference!r}")
    out: dict[str, xr.DataArray] = {}
    for name, var in ds.data_vars.items():
        if name in NOT_MEASURES or "weights" not in var.dims or not np.issubdtype(var.dtype, np.floating):
            continue
        over = [d for d in var.dims if d in ("sample", "head")]
        mean = var.mean(over)
        drift = abs(mean.sel(weights=copies) - mean.sel(weights=reference)).rename(weights="copy")
        out[name] = drift
        out[f"max_drift_{name}"] = drift.max("copy", skipna=False)
    result = xr.Dataset(out)
    result.attrs = {
        "title": "san: the drift quantisation alone causes in the rank-collapse measures",
        "reference": reference,
    }
    return result


def quantisation_control(
    family: str,
    folder: Path,
    inputs: xr.Dataset,
    settings: Mapping[str, Any],
    kinds: Sequence[str],
    work: Path,
    reference: str = "pretrained",
    job: Any = None,
) -> tuple[xr.Dataset, xr.Dataset]:
    """The quantisation control of one model folder: its copies requantised to each of ``kinds`` (written under
    ``work``, :func:`san.models.quantise.quantised_copy`), the rank-collapse result of the folder and its copies as
    weight sets of one :func:`san.rank_collapse.experiment.run` (``settings``: the ``rank_collapse`` config slice;
    ``inputs``: the folder's tokenised input, shared by its copies, which keep its tokenizer), and the drift of every
    measure (:func:`measure_drift`). ``job``: the :class:`san.core.device.JobPlace` the measures run on (the CPU
    by default)."""
    from san.models.quantise import quantised_copy
    from san.rank_collapse.experiment import run

    folders = {reference: Path(folder)}
    for kind in kinds:
        quantised_copy(Path(folder), kind, Path(work) / kind)
        folders[kind] = Path(work) / kind
    result = run(family, folders, dict.fromkeys(folders, inputs), settings, *([job] if job is not None else []))
    return result, measure_drift(result, reference)
