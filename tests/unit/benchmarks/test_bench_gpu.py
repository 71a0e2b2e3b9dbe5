"""benchmarks/bench_gpu.py: on a machine without a GPU it says so and succeeds; its GPU-against-CPU check takes
each variable's relative and absolute tolerance from how far a one-ulp perturbation of the CPU computation's inputs
moves it, so that a sum reordered (what a GPU does) passes and a real difference fails, whatever the variable's
scale; a variable that the perturbation moves by about its own size is "not compared", with the reason, never a
match. (The perturbation hook itself, in a job's process: tests/integration/benchmarks/test_bench_gpu_hook.py.)"""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))  # the script's own folder, as when it runs
spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "bench_gpu.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

EPS64 = np.finfo(np.float64).eps


def test_without_a_gpu_it_says_so(capsys, monkeypatch):
    monkeypatch.setattr(bench, "gpu_count", lambda: 0)
    assert bench.main([]) == 0
    assert "no GPU is visible" in capsys.readouterr().out


def one_ulp(x: np.ndarray, seed: int) -> np.ndarray:
    """``x`` with every entry moved by one unit in the last place, up or down at random."""
    up = np.random.default_rng(seed).random(x.shape) < 0.5
    return np.nextafter(x, np.where(up, np.inf, -np.inf))


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def matmul(a: np.ndarray, b: np.ndarray, reverse: bool) -> np.ndarray:
    """``a @ b`` with the inner sum taken in index order, or in reverse order (what another device may do)."""
    order = range(a.shape[-1] - 1, -1, -1) if reverse else range(a.shape[-1])
    out = np.zeros((a.shape[0], b.shape[1]), dtype=a.dtype)
    for k in order:
        out += np.outer(a[:, k], b[k])
    return out


def attention_stack(x, weights, reverse=False, dtype=np.float64):
    """A pure-attention stack (Dong et al.'s SAN) written here: per layer the relative residual
    ||X - 1 mean^T||_F / ||X||_F (normalised) and Wu et al.'s mu = ||X - 1 mean^T||_F (absolute, scaled by 1e3 to
    stand for a wide model's large norms)."""
    x = x.astype(dtype)
    ratio, mu = [], []
    for wq, wv in weights:
        wq, wv = wq.astype(dtype), wv.astype(dtype)
        scores = matmul(matmul(x, wq, reverse), x.T, reverse) / np.sqrt(x.shape[1])
        x = matmul(softmax(scores), matmul(x, wv, reverse), reverse)
        res = x - x.mean(axis=0, keepdims=True)
        ratio.append(np.linalg.norm(res) / np.linalg.norm(x))
        mu.append(1e3 * np.linalg.norm(res))
    return {"ratio": np.array(ratio), "mu": np.array(mu)}


@pytest.fixture(scope="module")
def runs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6))
    weights = [(rng.standard_normal((6, 6)), rng.standard_normal((6, 6)) * 0.6) for _ in range(6)]
    nudged = [(one_ulp(q, 2 * i + 1), one_ulp(v, 2 * i + 2)) for i, (q, v) in enumerate(weights)]
    return {
        "cpu": attention_stack(x, weights),
        "ulp": attention_stack(one_ulp(x, 0), nudged),
        "reordered": attention_stack(x, weights, reverse=True),
        "float32": attention_stack(x, weights, dtype=np.float32),
    }


def test_a_reordered_sum_passes_and_a_real_difference_fails(runs):
    for name in ("ratio", "mu"):
        cpu, ulp = runs["cpu"][name], runs["ulp"][name]
        tol = bench.derive_tolerance(cpu, ulp, EPS64)
        assert tol["rel_move"] > 0 and tol["rtol"] == bench.SAFETY * max(tol["rel_move"], EPS64)
        # the perturbation itself is well inside (a tenth of) the tolerance derived from it
        assert bench.within(cpu, ulp, tol["rtol"], tol["atol"])[2] <= 1 / bench.SAFETY
        reordered = runs["reordered"][name]
        assert not np.array_equal(reordered, cpu), "the reordered sums must change the last bits"
        assert bench.within(cpu, reordered, tol["rtol"], tol["atol"])[0], name
        # a real difference: one layer off by a millionth, or the whole stack computed in float32
        off = cpu.copy()
        off[3] *= 1 + 1e-6
        assert not bench.within(cpu, off, tol["rtol"], tol["atol"])[0], name
        assert not bench.within(cpu, runs["float32"][name], tol["rtol"], tol["atol"])[0], name


def test_mu_is_not_normalised_so_an_absolute_tolerance_alone_would_not_fit(runs):
    """The old fixed absolute 1e-12 rejects the reordered sums of the unnormalised mu; the derived one does not."""
    cpu, reordered = runs["cpu"]["mu"], runs["reordered"]["mu"]
    assert np.max(np.abs(reordered - cpu)) > 1e-12
    tol = bench.derive_tolerance(cpu, runs["ulp"]["mu"], EPS64)
    assert bench.within(cpu, reordered, tol["rtol"], tol["atol"])[0]


def test_the_tolerance_formula():
    """rtol from the relative move of the values above sqrt(eps) of the largest, atol from the absolute move of the
    smaller ones, each at least eps at the variable's scale; a variable the perturbation did not move keeps that
    floor; no finite value: compared by the NaN mask."""
    x = np.array([0.0, 1e-20, 1e-18, 1.0, 2.0])
    y = np.array([3e-17, 2e-20, 1.5e-18, 1.0 + 2.0**-51, 2.0])
    tol = bench.derive_tolerance(x, y, EPS64, safety=10)
    assert tol["rel_move"] == 2.0**-51 and tol["abs_move"] == 3e-17
    assert tol["rtol"] == pytest.approx(10 * 2.0**-51) and tol["atol"] == pytest.approx(10 * 2 * EPS64)
    still = bench.derive_tolerance(x, x, EPS64, safety=10)
    assert still["rtol"] == pytest.approx(10 * EPS64) and still["rel_move"] == 0 and still["abs_move"] == 0
    nan = bench.derive_tolerance(np.full(3, np.nan), np.full(3, np.nan), EPS64)
    assert nan["atol"] == 0 and bench.within(np.full(3, np.nan), np.full(3, np.nan), nan["rtol"], 0)[0]
    assert not bench.within(np.array([1.0, np.nan]), np.array([1.0, 1.0]), 1, 1)[0], "NaN on one side"
    assert not bench.within(np.array([0.0]), np.array([1e-300]), 0.1, 0.0)[0], "nothing allowed: any gap fails"


def write(path: Path, residual: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    xr.Dataset(
        {"residual_ratio": (("variant", "layer"), residual)},
        coords={"variant": ["SAN", "transformer"], "layer": [0, 1]},
    ).to_netcdf(path)


def test_the_check_derives_each_variables_tolerance_in_its_jobs_float_type(tmp_path):
    """Per variant: the float type of the job, the tolerance from the perturbed CPU run, the GPU run compared."""
    cfg = {"models": {"m": {}}, "rank_collapse": {"dtype": {"SAN": "float64", "transformer": "float32"}}}
    rel = "results/rank_collapse/m.nc"
    base = np.array([[1.0, 1e-9], [1.0, 0.5]])
    write(tmp_path / "cpu" / rel, base)
    write(tmp_path / "ulp" / rel, base * (1 + np.array([[1e-16, 2e-16], [1e-7, 1e-7]])))
    tolerance = bench.tolerances(tmp_path / "cpu", tmp_path / "ulp", cfg, [rel])
    san, transformer = tolerance[(rel, "residual_ratio[SAN]")], tolerance[(rel, "residual_ratio[transformer]")]
    assert (san["dtype"], transformer["dtype"]) == ("float64", "float32")
    assert san["rtol"] == pytest.approx(bench.SAFETY * 2.2e-16, rel=0.05)
    assert transformer["rtol"] == pytest.approx(bench.SAFETY * 1.2e-7, rel=0.05)  # float32's eps floors it
    write(tmp_path / "gpu" / rel, base * (1 + np.array([[1e-15, 1e-15], [1e-6, 1e-6]])))  # within both
    rows = bench.compare(tmp_path / "cpu", tmp_path / "gpu", cfg, [rel], tolerance)
    assert [(r["variable"], r["dtype"], r["compared"], r["within"]) for r in rows] == [
        ("residual_ratio[SAN]", "float64", True, True),
        ("residual_ratio[transformer]", "float32", True, True),
    ]
    write(tmp_path / "gpu" / rel, base * (1 + np.array([[1e-10, 0], [0, 1e-6]])))  # float64 variant off by 1e-10
    assert [r["within"] for r in bench.compare(tmp_path / "cpu", tmp_path / "gpu", cfg, [rel], tolerance)] == [
        False,
        True,
    ]
    # a variable that is NaN in both at the same places (an undefined quantity) matches; NaN on one side does not
    nan = np.array([[np.nan, np.nan], [np.nan, np.nan]])
    write(tmp_path / "cpu" / rel, nan)
    write(tmp_path / "gpu" / rel, nan)
    assert all(r["within"] for r in bench.compare(tmp_path / "cpu", tmp_path / "gpu", cfg, [rel], tolerance))
    write(tmp_path / "gpu" / rel, np.array([[np.nan, np.nan], [np.nan, 0.5]]))
    assert [r["within"] for r in bench.compare(tmp_path / "cpu", tmp_path / "gpu", cfg, [rel], tolerance)] == [
        True,
        False,
    ]
    with pytest.raises(KeyError, match="no tolerance"):
        bench.compare(tmp_path / "cpu", tmp_path / "gpu", cfg, [rel], {})


def test_a_variable_with_a_small_derived_tolerance_is_compared_and_a_millionth_fails_it():
    """A well-conditioned variable (a one-ulp change of the inputs moves it by 1e-12 of its size) is compared: a GPU
    value within the tolerance matches, one off by a millionth of its size does not, and the check fails."""
    cpu = np.array([1.0, 0.5, 0.25, 2.0])
    tol = bench.derive_tolerance(cpu, cpu * (1 + 1e-12), EPS64)
    assert tol["compared"] and tol["reason"] is None
    assert tol["looseness"] == pytest.approx(bench.SAFETY * 1e-12, rel=1e-3) and tol["looseness"] < bench.MAX_RTOL
    assert bench.within(cpu, cpu * (1 + 5e-12), tol["rtol"], tol["atol"])[0]
    off = cpu.copy()
    off[1] *= 1 + 1e-6
    assert not bench.within(cpu, off, tol["rtol"], tol["atol"])[0]


def test_a_variable_a_one_ulp_change_moves_by_its_own_size_is_not_compared(tmp_path, monkeypatch, capsys):
    """A chaotic variable (a one-ulp change of the inputs moves one value by 63 times its size, as finite_overlap
    under a mask where the tokens' correlation is 1 to the last bit) gets a tolerance of 630 x its size: it is
    reported "not compared" with that reason, in the printout and in the rendered table, and its GPU values, however
    far off, are neither a match nor a failure; a well-conditioned variable of the same result still fails."""
    import _common

    from san.report.benchmark_tables import benchmark_table

    rel = "results/propagation/masks.nc"
    cfg = {"models": {}}
    chaotic = np.array([[1.0, 0.01], [0.5, 0.02]])
    steady = np.array([[1.0, 2.0], [3.0, 4.0]])

    def write_pair(folder: Path, finite: np.ndarray, mu: np.ndarray) -> None:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        xr.Dataset({"finite_overlap": (("a", "b"), finite), "mu": (("a", "b"), mu)}).to_netcdf(folder / rel)

    write_pair(tmp_path / "cpu", chaotic, steady)
    write_pair(tmp_path / "ulp", chaotic * np.array([[1.0, 64.0], [1.0, 1.0]]), steady * (1 + 1e-13))
    tolerance = bench.tolerances(tmp_path / "cpu", tmp_path / "ulp", cfg, [rel])
    finite, mu = tolerance[(rel, "finite_overlap")], tolerance[(rel, "mu")]
    assert finite["rel_move"] == pytest.approx(63) and finite["rtol"] == pytest.approx(630)
    assert not finite["compared"] and "moves it by up to 63 x its size" in finite["reason"]
    assert mu["compared"] and mu["reason"] is None
    bench.print_comparable(tolerance)
    out = capsys.readouterr().out
    assert "compared (1 of 2 variables)" in out and "not compared (1)" in out
    assert f"{rel} finite_overlap (float64): a one-ulp change of the inputs moves it by up to 63 x its size" in out

    monkeypatch.setattr(_common, "OUT", tmp_path / "out")
    table = bench.write_tolerances(tolerance, bench.MAX_RTOL).read_text()
    assert "| finite_overlap | float64 | 6.3e+01 | 0.0e+00 | 6.3e+02 | 2.2e-15 | no: a one-ulp change of the inputs " \
           "moves it by up to 63 x its size |" in table  # fmt: skip
    assert "| mu | float64 | 1.0e-13 | 0.0e+00 | 1.0e-12 | 8.9e-15 | yes |" in table
    assert "compared when its tolerance allows less than 0.1 x its size" in table and "Load average" in table
    assert benchmark_table(json.loads(table_data(tmp_path / "out"))) == table

    write_pair(tmp_path / "gpu", chaotic * 50, steady)  # the chaotic variable far off: not judged
    rows = bench.compare(tmp_path / "cpu", tmp_path / "gpu", cfg, [rel], tolerance)
    assert [(r["variable"], r["compared"], r["within"], r["share"]) for r in rows][0] == (
        "finite_overlap", False, None, None)  # fmt: skip
    assert bench.verdict(rows) == 0
    out = capsys.readouterr().out
    assert "not compared: results/propagation/masks.nc finite_overlap: a one-ulp change" in out
    assert "1 of 2 variables compared, every one within its tolerance; 1 not compared" in out
    write_pair(tmp_path / "gpu", chaotic * 50, steady * (1 + 1e-6))  # the compared one off by a millionth
    assert bench.verdict(bench.compare(tmp_path / "cpu", tmp_path / "gpu", cfg, [rel], tolerance)) == 1
    assert "1 of 1 compared result(s) differ beyond their tolerance; 1 not compared" in capsys.readouterr().err


def table_data(folder: Path) -> str:
    return (folder / "bench_gpu_tolerance.json").read_text()


def test_the_comparability_bound_on_both_sides_and_on_the_absolute_tolerance():
    """Compared exactly while the tolerance allows less than MAX_RTOL of the variable's size: a relative move just
    under MAX_RTOL / SAFETY is compared, one at it is not; a small value that the perturbation lifts to the size
    of the largest is not compared either (its absolute tolerance is of the variable's size)."""
    x = np.array([1.0, 2.0])
    under = bench.derive_tolerance(x, x * (1 + 0.99 * bench.MAX_RTOL / bench.SAFETY), EPS64)
    at = bench.derive_tolerance(x, x * (1 + bench.MAX_RTOL / bench.SAFETY), EPS64)
    assert under["compared"] and not at["compared"]
    lifted = bench.derive_tolerance(np.array([1e-20, 1.0]), np.array([0.5, 1.0]), EPS64)
    assert lifted["rel_move"] == 0 and lifted["abs_move"] == 0.5 and not lifted["compared"]
    assert bench.derive_tolerance(np.zeros(3), np.zeros(3), EPS64)["compared"], "nothing moved: compared"
    assert not bench.derive_tolerance(np.zeros(3), np.array([0, 1e-30, 0]), EPS64)["compared"], "0 lifted off 0"


def test_every_gpu_rule_is_checked_in_its_jobs_float_type():
    """The jobs the default config leaves to a GPU: rank collapse, attention products, the training series (offline
    and from the hub), propagation sweeps and the image encoders, each result variable in the float type of its
    variant."""
    cfg = {
        "models": {"m": {}, "v": {"dtype": "float64"}, "w": {}},
        "rank_collapse": {"models": ["m"], "dtype": {"SAN": "float64", "transformer": "float32"}},
        "attention_products": {"models": None, "dtype": "float64"},
        "series": {"seeds": [0, 1], "hub_models": ["h"]},
        "propagation": {"sweeps": {"masks": {}}},
        "vision": {"models": ["v", "w"], "dtype": {"SAN": "float64", "SAN+skip": "float32"}},
        "compute": {rule: {"device": "cpu"} for rule in bench.GPU_RULES},
    }
    assert bench.targets(cfg) == [
        "results/rank_collapse/m.nc", "results/attention_products/m.nc", "results/rank_collapse_series.nc",
        "results/rank_collapse_series/h.nc", "results/propagation/masks.nc", "results/vision/v.nc",
        "results/vision/w.nc",
    ]  # fmt: skip
    assert all(c["device"] == "cuda" for c in bench.with_devices(cfg, "cuda")["compute"].values())
    assert bench.job_dtype(cfg, "results/vision/w.nc", "SAN+skip") == "float32"
    assert bench.job_dtype(cfg, "results/vision/v.nc", "SAN+skip") == "float64", "the model's own dtype"
    assert bench.job_dtype(cfg, "results/rank_collapse/m.nc", "transformer") == "float32"
    assert bench.job_dtype(cfg, "results/rank_collapse_series.nc", "SAN") == "float64"
    assert bench.job_dtype(cfg, "results/rank_collapse_series/h.nc", "transformer") == "float32"
    assert bench.job_dtype(cfg, "results/propagation/masks.nc", None) == "float64"


def test_every_rule_the_default_config_lets_use_a_gpu_is_checked():
    """The rules whose compute.<rule>.device the default config leaves to a GPU are bench_gpu's rules."""
    import yaml

    compute = yaml.safe_load((ROOT / "config.yaml").read_text())["compute"]
    assert {rule for rule, c in compute.items() if c["device"] != "cpu"} == set(bench.GPU_RULES)
