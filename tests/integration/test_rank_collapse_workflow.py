"""End to end: the rank-collapse rules on a tiny config, in a copy of the workflow."""

import json

import numpy as np
import pytest

from san.core.storage import read_netcdf

from helpers import copy_workflow, rank_collapse_targets, snakemake, tiny_config, write_config


@pytest.fixture(scope="module")
def run(tmp_path_factory, default_config):
    wf = copy_workflow(tmp_path_factory.mktemp("rc") / "wf")
    cfg = tiny_config(default_config)
    cfg["rank_collapse"]["models"] = ["tiny-bert", "tiny-albert", "tiny-xlnet", "all-MiniLM-L6-v2"]
    write_config(wf, cfg)
    targets = rank_collapse_targets(cfg)
    snakemake(wf, "--cores", "2", *targets)
    return wf, cfg, targets


def test_outputs_exist_with_labels_units_and_provenance(run):
    wf, cfg, targets = run
    for t in targets:
        assert (wf / t).is_file(), t
    ds = read_netcdf(wf / "results/rank_collapse/tiny-bert.nc")
    da = ds["residual_ratio"]
    assert da.dims == ("weights", "variant", "layer", "sample")
    assert list(ds["variant"].values) == ["SAN", "SAN+MLP", "SAN+skip", "transformer"]
    assert list(ds["weights"].values) == ["init"] and da.sizes == {"weights": 1, "variant": 4, "layer": 4, "sample": 4}
    assert da.attrs["units"] == "1" and "res(X" in da.attrs["long_name"]
    for key in ("config", "package_versions", "git_commit", "manifests", "input_sha256", "device"):
        assert key in ds.attrs, key
    assert json.loads(ds.attrs["config"])["dtype"] == cfg["rank_collapse"]["dtype"]
    assert list(ds["dtype"].values) == ["float64", "float64", "float32", "float32"], "each variant's precision"
    assert json.loads(ds.attrs["manifests"])["init"]["source"] == "init"
    assert (wf / "logs/rank_collapse/tiny-bert.log").is_file()
    assert (wf / "results/benchmarks/rank_collapse/tiny-bert.tsv").is_file()


def test_pure_attention_collapses_and_skips_prevent_it(run):
    wf, cfg, _ = run
    for model in cfg["rank_collapse"]["models"]:
        da = read_netcdf(wf / f"results/rank_collapse/{model}.nc")["residual_ratio"]
        for w in da["weights"].values:
            mean = da.sel(weights=w).mean("sample")
            assert float(mean.sel(variant="SAN").isel(layer=-1)) < 1e-3 * float(mean.sel(variant="SAN").isel(layer=0))
            assert float(mean.sel(variant="SAN+skip").isel(layer=-1)) > 0.05
            assert np.all(np.isfinite(da.values))


def test_pretrained_package_weights_and_attention_products(run):
    wf, _, _ = run
    ds = read_netcdf(wf / "results/rank_collapse/all-MiniLM-L6-v2.nc")
    assert list(ds["weights"].values) == ["init", "pretrained"] and ds.sizes["layer"] == 7
    man = json.loads(ds.attrs["manifests"])["pretrained"]
    assert man["source"] == "package"
    assert man["sha256"]["model.safetensors"].startswith("53aa51172d14")
    pp = read_netcdf(wf / "results/attention_products/all-MiniLM-L6-v2.nc")
    assert pp["rank1_residual"].dims == ("weights", "depth", "path") and pp.sizes["depth"] == 6
    med = pp["rank1_residual"].median("path")
    assert (med.isel(depth=-1) < med.isel(depth=0)).all()


def test_rerun_is_a_no_op_and_results_are_deterministic(run, tmp_path, default_config):
    wf, cfg, targets = run
    dry = snakemake(wf, "-n", "--cores", "1", *targets)
    assert "Nothing to be done" in dry.stdout + dry.stderr
    # a fresh copy with the same config reproduces the numbers exactly
    wf2 = copy_workflow(tmp_path / "wf2")
    cfg2 = json.loads(json.dumps(cfg))
    cfg2["rank_collapse"]["models"] = ["tiny-xlnet"]
    write_config(wf2, cfg2)
    snakemake(wf2, "--cores", "1", "results/rank_collapse/tiny-xlnet.nc")
    a = read_netcdf(wf / "results/rank_collapse/tiny-xlnet.nc")["residual_ratio"].values
    b = read_netcdf(wf2 / "results/rank_collapse/tiny-xlnet.nc")["residual_ratio"].values
    np.testing.assert_array_equal(a, b)
