"""benchmarks/bench_gpu.py: on a machine without a GPU it says so and succeeds; its GPU-against-CPU check fails a
result that differs beyond the tolerance of the job's float type and passes one within it."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import xarray as xr

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))  # the script's own folder, as when it runs
spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "bench_gpu.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_without_a_gpu_it_says_so(capsys, monkeypatch):
    monkeypatch.setattr(bench, "gpu_count", lambda: 0)
    assert bench.main([]) == 0
    assert "no GPU is visible" in capsys.readouterr().out


def write(path: Path, residual: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    xr.Dataset(
        {"residual_ratio": (("variant", "layer"), residual)},
        coords={"variant": ["SAN", "transformer"], "layer": [0, 1]},
    ).to_netcdf(path)


def test_the_check_uses_each_jobs_float_type(tmp_path):
    cfg = {"models": {"m": {}}, "rank_collapse": {"dtype": {"SAN": "float64", "transformer": "float32"}}}
    rel = "results/rank_collapse/m.nc"
    base = np.array([[1.0, 1e-9], [1.0, 0.5]])
    write(tmp_path / "cpu" / rel, base)
    write(tmp_path / "gpu" / rel, base + np.array([[0, 1e-13], [0, 1e-6]]))  # within 1e-12 and 1e-5
    rows = bench.compare(tmp_path / "cpu", tmp_path / "gpu", cfg, [rel])
    assert [(r[1], r[2], r[5]) for r in rows] == [
        ("residual_ratio[SAN]", "float64", True),
        ("residual_ratio[transformer]", "float32", True),
    ]
    write(tmp_path / "gpu" / rel, base + np.array([[0, 1e-10], [0, 1e-6]]))  # float64 variant off by 1e-10
    rows = bench.compare(tmp_path / "cpu", tmp_path / "gpu", cfg, [rel])
    assert [r[5] for r in rows] == [False, True]
    # a variable that is NaN in both at the same places (an undefined quantity) matches; NaN on one side does not
    nan = np.array([[np.nan, np.nan], [np.nan, np.nan]])
    write(tmp_path / "cpu" / rel, nan)
    write(tmp_path / "gpu" / rel, nan)
    assert all(r[5] for r in bench.compare(tmp_path / "cpu", tmp_path / "gpu", cfg, [rel]))
    write(tmp_path / "gpu" / rel, np.array([[np.nan, np.nan], [np.nan, 0.5]]))
    assert [r[5] for r in bench.compare(tmp_path / "cpu", tmp_path / "gpu", cfg, [rel])] == [True, False]
