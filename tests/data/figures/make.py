"""Write the small datasets the figure test (tests/unit/test_figures.py) draws every registered figure from.

Run from the repository root: ``python tests/data/figures/make.py [RESULTS]``. The theorem and propagation sweeps are
computed here at the tiny config's sizes (seconds, CPU); every other figure's inputs are cut from a run's results
folder ``RESULTS`` (any run: a few layers, sequences, seeds and models of each file, so the files stay a few kB and
the figures keep the run's structure). ``cases.json`` records, per figure, the files and the rule params and
wildcards the test passes to its draw function.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import xarray as xr

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from san.core.config import validate_config  # noqa: E402

from helpers import default_config, tiny_config, tiny_theory_sweep  # noqa: E402


def _write(ds: xr.Dataset, name: str) -> str:
    """Write ``ds`` (without its bulky attributes: provenance, config) as ``HERE/name`` and return the name."""
    ds = ds.copy()
    ds.attrs = {k: v for k, v in ds.attrs.items() if len(str(v)) < 2000}
    for var in ds.variables.values():
        var.encoding = {}
    ds.to_netcdf(HERE / name)
    return name


def computed() -> dict[str, dict]:
    """The theorem sweep and the propagation sweeps of the tiny config (prose input left out: no model)."""
    from san.propagation.experiment import run

    cases = {"theorem_bound": {"inputs": {"data": _write(tiny_theory_sweep(), "theorem.nc")}}}
    cfg = tiny_config(default_config())
    validate_config(cfg, ROOT / "workflow/schemas/config.schema.yaml")
    prop = cfg["propagation"]
    for sweep, settings in prop["sweeps"].items():
        settings = json.loads(json.dumps(settings))
        if "input" in settings.get("grid", {}):
            settings["grid"]["input"] = [i for i in settings["grid"]["input"] if i != "prose"]
        ds = run(sweep, {**settings, "residuals": prop["residuals"], "finite_size": prop["finite_size"]})
        cases[f"propagation_{sweep}"] = {"inputs": {sweep: _write(ds, f"propagation_{sweep}.nc")}}
    return cases


def main() -> None:
    cases_file = HERE / "cases.json"
    cases = json.loads(cases_file.read_text()) if cases_file.exists() else {}
    cases |= computed()
    if len(sys.argv) > 1:
        from cut import cut_run

        cases |= cut_run(Path(sys.argv[1]), HERE)
    cases_file.write_text(json.dumps(dict(sorted(cases.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
