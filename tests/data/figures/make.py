"""Write the small datasets the figure test (tests/unit/test_figures.py) draws every registered figure from.

Run from the repository root: ``python tests/data/figures/make.py [BUILDER...]`` (default: every builder). The
theorem and propagation sweeps, the circle and the image encoder are computed here at the unit tests' tiny sizes
(seconds, CPU); the rank-collapse curves, the training series and the path results are random numbers in the
results' layout (the unit tests' synthetic builders); the phenomena table is the committed run's. ``cases.json``
records, per figure, the files and the rule params and wildcards the test passes to its draw function.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import xarray as xr

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from san.core.config import validate_config  # noqa: E402

from helpers import default_config, tiny_config, tiny_theory_sweep  # noqa: E402


def _write(ds: xr.Dataset, name: str) -> str:
    """Write ``ds`` (without its bulky attributes: provenance, config) as ``HERE/name`` and return the name."""
    ds = ds.copy()
    kinds = (str, int, float, np.number, np.ndarray, list, tuple)
    ds.attrs = {k: v for k, v in ds.attrs.items() if isinstance(v, kinds) and len(str(v)) < 2000}
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


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def rank_collapse() -> dict[str, dict]:
    """Three models' rank-collapse results (the helpers' synthetic curves: two with init and pretrained weights, the
    three measures; one at init only) and the attention products of one model, drawn at random."""
    from helpers import synthetic_pretrained, synthetic_rank_collapse

    files = {
        "tiny-bert": _write(synthetic_pretrained([0.6, 0.1, 1e-3, 1e-5, 1e-7]), "rank_collapse_tiny-bert.nc"),
        "tiny-gpt": _write(synthetic_pretrained([0.6, 0.3, 0.1, 0.05, 0.02], 0.4), "rank_collapse_tiny-gpt.nc"),
    }
    init_only = synthetic_rank_collapse(1e-4, 0.5)
    for v in ("residual_ratio_no_first", "residual_ratio_frobenius"):
        init_only[v] = init_only["residual_ratio"]
    files["tiny-albert"] = _write(init_only, "rank_collapse_tiny-albert.nc")
    products = xr.Dataset(
        {"rank1_residual": (("weights", "depth", "path"), 10.0 ** -_rng().uniform(0, 6, size=(2, 4, 8)))},
        coords={"weights": ["init", "pretrained"], "depth": [1, 2, 4, 8]},
    )
    one = {"inputs": {"data": "rank_collapse_tiny-bert.nc"}, "wildcards": {"model": "tiny-bert"}}
    return {
        "rank_collapse_overview": {"inputs": {"data": files}},
        "rank_collapse_pretrained": {"inputs": {"data": {k: files[k] for k in ("tiny-bert", "tiny-gpt")}}},
        "rank_collapse_model": one,
        "rank_collapse_model_log": one,
        "attention_products_model": {
            "inputs": {"data": _write(products, "attention_products_tiny-bert.nc")},
            "wildcards": {"model": "tiny-bert"},
        },
    }


def series() -> dict[str, dict]:
    """A training series of two seeds and four revisions (the training-dynamics figure test's random cells)."""
    sys.path.insert(0, str(ROOT / "tests/unit/rank_collapse/series"))
    from test_training_dynamics_figure import _series

    name = _write(_series(), "series.nc")
    case = {"inputs": {"data": name}, "params": {"share_threshold": 0.3}}
    return {"training_dynamics": case, "training_dynamics_model": {**case, "wildcards": {"model": "tiny-pythia"}}}


def phenomena() -> dict[str, dict]:
    """The pretrained phenomena's models x claims table of the committed run (docs/results/summary.json)."""
    from san.phenomena.table import table_dataset

    summary = json.loads((ROOT / "docs/results/summary.json").read_text())
    return {"phenomena": {"inputs": {"data": _write(table_dataset(summary["phenomena"]), "phenomena.nc")}}}


def circle() -> dict[str, dict]:
    """The circle experiment of two variants, two hidden dims and two seeds at the unit tests' tiny sizes."""
    sys.path.insert(0, str(ROOT / "tests/unit/circle"))
    from test_circle import SAN, TINY, TRANSFORMER

    from san.circle.experiment import run_circle
    from san.circle.results import gather

    runs = {(n, d, s): run_circle(v, d, s, **TINY) for n, v in (("SAN", SAN), ("transformer", TRANSFORMER))
            for d in (4, 8) for s in (0, 1)}  # fmt: skip
    name = _write(gather(runs), "circle.nc")
    return {
        "circle": {"inputs": {"data": name}, "params": {"plot": {"seed": None, "axis_limit": 0.6}}},
        "circle_distance": {"inputs": {"data": name}, "params": {"collapse_threshold": 0.01}},
        "circle_loss": {"inputs": {"data": name}},
    }


def vision() -> dict[str, dict]:
    """A tiny DINOv2-with-registers at init on the pinned images (the vision unit tests' recipe), as two models."""
    sys.path.insert(0, str(ROOT / "tests/unit/rank_collapse/vision"))
    import tempfile

    from test_vision import ARCH, SETTINGS

    from san.models.store import materialise_init
    from san.rank_collapse.vision.experiment import pixel_inputs, run

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "init"
        materialise_init("dinov2_with_registers", ARCH, 0, folder)
        ds = run("dinov2_with_registers", {"init": folder}, {"init": pixel_inputs(folder, SETTINGS)}, SETTINGS)
    name = _write(ds, "vision.nc")
    return {"vision": {"inputs": {"data": {"tiny-dinov2": name, "tiny-dinov2-b": name}}}}


def paths() -> dict[str, dict]:
    """Two tasks' sampled-path accuracies and exact decompositions (random numbers of the results' layout), and
    the path-length distribution of two architectures."""
    from san.paths.spec import path_length_shares

    rng, layers, heads, seeds = _rng(), 3, 2, [0, 1]
    k = np.arange(layers + 1)
    cases_sampled, cases_exact = [], []
    for task in ("sorting", "memorization"):
        sampled = xr.Dataset(
            {
                "accuracy": (
                    ("n_paths", "path_length", "seed", "repeat"),
                    rng.uniform(0.1, 0.9, (2, layers + 1, 2, 3)),
                ),
                "full_model_accuracy": (("seed",), rng.uniform(0.8, 0.95, 2)),
                "chance_accuracy": ((), 0.1),
            },
            coords={"n_paths": [10, 100], "path_length": k, "seed": seeds},
            attrs={"task": task, "n_layers": layers, "n_heads": heads},
        )
        exact = xr.Dataset(
            {
                "norm_share": (
                    ("state", "path_length", "seed"),
                    rng.dirichlet(np.ones(layers + 1), (2, 2)).transpose(0, 2, 1),
                ),
                "truncated_accuracy": (("state", "path_length", "seed"), rng.uniform(0.1, 0.9, (2, layers + 1, 2))),
                "single_length_accuracy": (("state", "path_length", "seed"), rng.uniform(0.1, 0.9, (2, layers + 1, 2))),
                "full_accuracy": (("state", "seed"), rng.uniform(0.8, 0.95, (2, 2))),
                "chance_accuracy": ((), 0.1),
            },
            coords={"state": ["trained", "init"], "path_length": k, "seed": seeds},
            attrs={"task": task, "n_layers": layers, "n_heads": heads},
        )
        cases_sampled.append(_write(sampled, f"paths_{task}.nc"))
        cases_exact.append(_write(exact, f"paths_exact_{task}.nc"))
    archs = {"paper 6x8": (6, 8, "paper"), "tiny-bert": (3, 4, "config model"), "paths task": (3, 2, "paths task")}
    top = max(layers for layers, _, _ in archs.values())
    share = np.full((len(archs), top + 1), np.nan)
    for i, (n_layers, n_heads, _) in enumerate(archs.values()):
        share[i, : n_layers + 1] = path_length_shares(n_layers, n_heads)
    counts = xr.Dataset(
        {
            "share": (("architecture", "path_length"), share),
            "n_layers": (("architecture",), [a[0] for a in archs.values()]),
            "n_heads": (("architecture",), [a[1] for a in archs.values()]),
            "source": (("architecture",), [a[2] for a in archs.values()]),
        },
        coords={"architecture": list(archs), "path_length": np.arange(top + 1)},
    )
    titles = {"sorting": "Sorting", "memorization": "Memorization"}
    return {
        "path_effectiveness": {"inputs": {"data": cases_sampled}, "params": {"titles": titles}},
        "path_decomposition": {
            "inputs": {"exact": cases_exact, "sampled": cases_sampled},
            "params": {"titles": titles},
        },
        "path_length_distribution": {"inputs": {"data": _write(counts, "path_counts.nc")}},
    }


BUILDERS = (computed, rank_collapse, series, phenomena, circle, vision, paths)
"""Every builder of cases; ``make.py NAME...`` runs only the named ones."""


def main() -> None:
    cases_file = HERE / "cases.json"
    cases = json.loads(cases_file.read_text()) if cases_file.exists() else {}
    names = sys.argv[1:] or [b.__name__ for b in BUILDERS]
    for builder in BUILDERS:
        if builder.__name__ in names:
            cases |= builder()
    cases_file.write_text(json.dumps(dict(sorted(cases.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
