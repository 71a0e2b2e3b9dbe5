"""Recompute a run's stored ``transformer`` curves from its model folders with plain transformers.

The check of the acquisition and measurement chain end to end: ``AutoModel.from_pretrained(folder)`` (no code of
this project's ablations or hooks), run on the stored ``input_ids``, its ``hidden_states`` turned into the paper's
ratio and compared with ``residual_ratio`` of the unmodified ``transformer`` variant. For a decoder the final norm is
replaced by the identity first, since transformers' last hidden state of a decoder is the final norm's output while
the stored curve is the residual stream (:mod:`san.rank_collapse.experiment`).

    python -m san.rank_collapse.verify results        # every model of the run, every weight set
    python -m san.rank_collapse.verify -v results     # with transformers' load reports and progress bars
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import xarray as xr
from transformers import AutoModel

from san.core.cli import add_verbose, quiet_libraries
from san.core.device import resolve_dtype
from san.measures.residual import relative_residual
from san.models.families import family as family_entry
from san.models.folders import verify_folder
from san.models.spec import VARIANTS
from san.rank_collapse.spec import variant_dtypes


@torch.inference_mode()
def recompute_curve(folder: Path, family: str, input_ids: torch.Tensor, dtype: torch.dtype) -> np.ndarray:
    """The paper's ratio per layer and sequence of the unmodified model in ``folder``, by plain transformers:
    array ``(layers + 1, sequences)``."""
    verify_folder(folder)
    model = AutoModel.from_pretrained(folder, dtype=dtype, attn_implementation="eager").to(dtype).eval()
    entry = family_entry(family)
    if entry.final_norm is not None:
        setattr(model, entry.final_norm, torch.nn.Identity())
    kwargs = entry.forward_kwargs
    out = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), output_hidden_states=True, **kwargs)
    return torch.stack([relative_residual(h.double()) for h in out.hidden_states]).numpy()


def verify_run(results: Path) -> dict[str, dict[str, float]]:
    """Per model and weights of a run's ``results/rank_collapse/*.nc``, the largest relative difference between
    the stored ``transformer`` curve and its recomputation (:func:`recompute_curve`, in the variant's dtype)."""
    report: dict[str, dict[str, float]] = {}
    for path in sorted((results / "rank_collapse").glob("*.nc")):
        ds = xr.open_dataset(path)
        model = path.stem
        config = json.loads(ds.attrs["config"])
        family = config["family"]
        if VARIANTS[-1] not in ds["variant"]:
            continue
        for weights in map(str, ds["weights"].values):
            ids = torch.as_tensor(xr.open_dataset(results / "inputs" / model / f"{weights}.nc")["input_ids"].values)
            stored = ds["residual_ratio"].sel(weights=weights, variant=VARIANTS[-1]).values
            dtype = variant_dtypes(config["dtype"], [VARIANTS[-1]])[VARIANTS[-1]]
            got = recompute_curve(results / "models" / model / weights, family, ids, resolve_dtype(dtype))
            report.setdefault(model, {})[weights] = float(np.max(np.abs(got - stored) / np.abs(stored)))
    return report


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m san.rank_collapse.verify",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("results", type=Path, help="a run's results folder")
    add_verbose(ap)
    args = ap.parse_args(argv)
    quiet_libraries(args.verbose)
    for model, per_weights in verify_run(args.results).items():
        for weights, diff in per_weights.items():
            print(f"{model:28s} {weights:10s} largest relative difference {diff:.1e}")


if __name__ == "__main__":
    main()
