"""CF metadata of the result files: every variable and coordinate of every experiment's result has ``long_name``
and ``units``, and a written file carries the CF globals (``Conventions``, ``title``, ``history``, ``references``).

The datasets come from the experiments' own ``run``/``describe`` functions at toy sizes (seconds in all); the check
is written out here, independently of :func:`san.core.provenance.missing_cf_attrs` (which is tested against it)."""

from __future__ import annotations

import re
from datetime import datetime

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr

from san.core.provenance import missing_cf_attrs, provenance_attrs
from san.core.storage import Variable, describe, read_netcdf, write_netcdf

F64 = torch.float64


def _without_cf(ds: xr.Dataset) -> list[str]:
    """Variables and coordinates of ``ds`` that lack a non-empty string ``long_name`` or ``units``."""
    bad = []
    for name, var in ds.variables.items():
        for key in ("long_name", "units"):
            value = var.attrs.get(key)
            if not isinstance(value, str) or (key == "long_name" and not value.strip()):
                bad.append(f"{name}.{key}")
    return bad


def _assert_cf(ds: xr.Dataset) -> None:
    assert _without_cf(ds) == []
    # units are UDUNITS strings: "1" (dimensionless) or a unit name, never empty or a function like "log10"
    for name, var in ds.variables.items():
        assert var.attrs["units"] in {"1", "s", "MB"}, f"{name}: units {var.attrs['units']!r}"


# ------------------------------------------------------------------------------------------- globals and helpers


def test_provenance_globals():
    attrs = provenance_attrs({"a": 1}, seed=3)
    assert attrs["Conventions"] == "CF-1.8"
    assert attrs["title"].startswith("san")
    assert "arXiv:2103.03404" in attrs["references"] and "Dong" in attrs["references"]
    stamp, _, rest = attrs["history"].partition(": ")
    assert datetime.fromisoformat(stamp).tzinfo is not None  # ISO 8601 with the UTC offset
    assert re.fullmatch(r"written by san \S+", rest)
    assert provenance_attrs({}, title="san: x")["title"] == "san: x"


def test_history_keeps_earlier_entries_newest_first():
    attrs = provenance_attrs({}, history="2020-01-01T00:00:00+00:00: written by san 0.0")
    lines = attrs["history"].split("\n")
    assert len(lines) == 2 and lines[1] == "2020-01-01T00:00:00+00:00: written by san 0.0"
    assert lines[0] > lines[1]


def test_missing_cf_attrs_names_what_is_missing():
    ds = xr.Dataset({"v": ("x", [1.0, 2.0], {"long_name": "v"})}, coords={"x": [0, 1]})
    assert set(missing_cf_attrs(ds)) == {
        "global Conventions", "global title", "global history", "global references", "v: units", "x: long_name",
        "x: units",
    }  # fmt: skip
    describe(ds, {"v": Variable("value", "1", "what v is"), "x": Variable("position", "1"), "absent": ("ignored", "1")})
    assert ds["v"].attrs == {"long_name": "value", "units": "1", "description": "what v is"}
    assert "description" not in ds["x"].attrs and "absent" not in ds.variables
    ds.attrs.update(provenance_attrs({}))
    assert missing_cf_attrs(ds) == [] == _without_cf(ds)


def test_written_file_has_cf_globals_and_numeric_flag_values(tmp_path):
    ds = xr.Dataset(
        {"p": (("x",), np.array([0, -1, -2], dtype=np.int16), {"long_name": "head", "units": "1"})},
        coords={"x": ("x", [0, 1, 2], {"long_name": "x", "units": "1"})},
        attrs={"title": "san: test"},
    )
    ds["p"].attrs.update(flag_values=np.array([-1, -2], dtype=np.int16), flag_meanings="skip no_path")
    back = read_netcdf(write_netcdf(ds, tmp_path / "t.nc", {"k": 1}))
    assert missing_cf_attrs(back) == []
    assert back.attrs["title"] == "san: test" and back.attrs["Conventions"] == "CF-1.8"
    assert back["p"].attrs["flag_values"].dtype == np.int16
    assert list(back["p"].attrs["flag_values"]) == [-1, -2]
    assert back["p"].attrs["flag_meanings"].split() == ["skip", "no_path"]


# ------------------------------------------------------------------------------------------------- experiments


def test_circle_run_and_gather():
    from san.circle.experiment import Variant, run_circle
    from san.circle.results import describe_variables, gather

    kwargs = dict(n_points=8, radius=0.3, n_heads=1, init_std=0.3, mlp_ratio=1.0, ln_eps=1e-5, epochs=1, batch_size=4)
    kwargs |= dict(lr=1e-3)
    kwargs |= dict(train_dtype=torch.float32, steps=3, rollout_dtype=F64)
    runs = {}
    for name, flags in (("SAN", (False, False, False)), ("transformer", (True, True, True))):
        variant = Variant(*flags)
        ds = run_circle(variant, 4, 0, **kwargs)
        runs[(name, 4, 0)] = ds
    gathered = describe_variables(gather(runs), 8, 0.3)
    _assert_cf(gathered)
    assert list(gathered["mlp"].attrs["flag_values"]) == [0, 1]


def test_circle_job_result():
    from san.circle.experiment import run

    settings = {
        "variant": {"layer_skip": False, "step_skip": False, "mlp": False},
        "data": {"n_points": 8, "radius": 0.3},
        "model": {"n_heads": 1, "init_std": 0.3, "ln_eps": 1e-5},
        "train": {"epochs": 1, "batch_size": 4, "lr": 1e-3, "dtype": "float32"},
        "rollout": {"steps": 3, "dtype": "float64"},
    }
    _assert_cf(run(settings, 4, [0, 1]))


def test_paths_counts():
    from san.paths.counts import length_distribution

    ds = length_distribution([{"name": "a", "layers": 2, "heads": 3, "source": "paper"}])
    _assert_cf(ds)


def test_paths_evaluation():
    from san.core.config import validate_config
    from san.paths.experiment import run, train
    from san.paths.spec import PAD, SKIP, task_slices

    from helpers import ROOT, tiny_config

    cfg = tiny_config()
    validate_config(cfg, ROOT / "workflow/schemas/config.schema.yaml")
    task = task_slices(cfg["paths"], ROOT / "workflow/schemas/paths.schema.yaml")["sorting"]
    trained = train(task)
    log = pd.DataFrame(
        [(e, s, 1.0 / e, 1e-3) for e in (1, 2) for s in trained.seeds], columns=["epoch", "seed", "loss", "lr"]
    )
    trains, evs = [t.train for t in trained.tasks], [t.eval for t in trained.tasks]
    ds = run(trained.model, trained.seeds, trains, evs, cfg["paths"]["evaluation"], log)
    assert ds.sizes["seed"] == len(trained.seeds) == 2
    _assert_cf(ds)
    assert list(ds["paths"].attrs["flag_values"]) == [SKIP, PAD] == [-1, -2]
    assert ds["paths"].attrs["flag_meanings"] == "skip no_path"


@pytest.mark.slow
def test_theory_sweep():
    from san.core.config import validate_config
    from san.theory.experiment import run

    from helpers import ROOT, tiny_config

    cfg = tiny_config()
    validate_config(cfg, ROOT / "workflow/schemas/config.schema.yaml")
    _assert_cf(run(cfg["theory"]))


def test_propagation_sweep():
    from san.propagation import spec
    from san.propagation.experiment import run

    sweep = {
        "depth": 2,
        "seeds": [0],
        "grid": {"norm": ["post_ln", "none"], "mask": ["full", "causal"]},
        "fixed": {"width": 8, "seq_len": 8, "mlp": False},
        "residuals": spec.DEFAULT_RESIDUALS,
    }
    _assert_cf(run("masks", sweep, "cpu"))


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A randomly initialised 2-layer BERT folder and tokenised inputs for it."""
    from san.models.store import materialise_init

    folder = tmp_path_factory.mktemp("tiny-bert")
    arch = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32}
    materialise_init("bert", arch, 0, folder)
    ids = np.random.default_rng(0).integers(1000, 2000, size=(3, 8))
    inputs = xr.Dataset({"input_ids": (("sample", "token"), ids)}, attrs={"input_sha256": "0" * 64})
    return {"init": folder}, {"init": inputs}


def test_rank_collapse(tiny_bert):
    from san.rank_collapse.experiment import run

    models, inputs = tiny_bert
    settings = {"variants": ["SAN", "transformer"], "dtype": "float64", "batch_size": 2}
    settings |= {"albert_no_mlp": "identity_linears", "control_token_seed": 0, "massive_token_factor": 10.0}
    _assert_cf(run("bert", models, inputs, settings))


def test_attention_products(tiny_bert):
    from san.rank_collapse.attention_products import run

    models, inputs = tiny_bert
    settings = {"n_paths": 3, "n_sequences": 2, "seed": 0, "dtype": "float64"}
    _assert_cf(run("bert", models, inputs, settings, batch_size=2))
