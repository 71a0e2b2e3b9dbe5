"""GPU benchmark and check: the default workflow's GPU jobs on the visible GPU(s) against the same jobs on the CPU.

Runs, in two temporary copies of the workflow, the jobs whose `compute.<rule>.device` the default config leaves to a
GPU (Fig. 2's forward passes, the attention products, the propagation sweeps), once with their device set to `cuda`
(at most one job per GPU at a time) and once to `cpu`, then:

- prints the wall time of every rule on each device and the peak GPU memory of every GPU job (the `compute`
  attribute of its result);
- compares every result variable of the two runs and exits non-zero when one differs by more than its tolerance:
  1e-12 where the job computes in float64, 1e-5 where in float32. The compared quantities are normalised (relative
  residuals ||res(X)|| / ||X||, cosines, stable ranks), so absolute tolerances fit; a float64 reduction summed in
  another order on a GPU moves the last few bits (~1e-16 relative), which stays below 1e-12 after 48 layers, and a
  float32 one moves ~1e-7;
- measures whether the path-effectiveness training and the circle gain from a GPU: a few epochs of one task and one
  circle training on each device (their wall times side by side; the config keeps both on the CPU).

Without a GPU it says so and stops (exit 0): nothing to compare.

    python benchmarks/bench_gpu.py [--cores 16] [--models bert-base-cased,gpt2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
import yaml
from _common import ROOT, copy_workflow, write_table

#: The rules the default config lets run on a GPU, and their result folders.
GPU_RULES = {
    "rank_collapse": "rank_collapse",
    "attention_products": "attention_products",
    "propagation_sweep": "propagation",
}
TOLERANCE = {"float64": 1e-12, "float32": 1e-5}


def gpu_count() -> int:
    """GPUs torch sees here (0 without a CUDA build or a driver)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def with_devices(cfg: dict, device: str) -> dict:
    """``cfg`` with every GPU rule's device set to ``device``."""
    out = copy.deepcopy(cfg)
    for rule in GPU_RULES:
        out["compute"][rule]["device"] = device
    return out


def targets(cfg: dict) -> list[str]:
    models = cfg["rank_collapse"]["models"]
    products = cfg["attention_products"]["models"]
    out = [f"results/rank_collapse/{m}.nc" for m in models]
    out += [f"results/attention_products/{m}.nc" for m in (models if products is None else products) if m in models]
    return out + [f"results/propagation/{s}.nc" for s in cfg["propagation"]["sweeps"]]


def run(wf: Path, cfg: dict, goals: list[str], cores: int, extra: list[str]) -> float:
    (wf / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", str(cores), *goals, *extra],
        cwd=wf,
        check=True,
        env={**os.environ, "PYTHONPATH": str(wf)},
    )
    return time.perf_counter() - start


def rule_times(wf: Path) -> dict[str, float]:
    """Summed wall seconds per rule from the jobs' benchmark files."""
    out: dict[str, float] = {}
    for tsv in (wf / "results" / "benchmarks").rglob("*.tsv"):
        rule = tsv.relative_to(wf / "results" / "benchmarks").parts[0].removesuffix(".tsv")
        out[rule] = out.get(rule, 0.0) + float(pd.read_csv(tsv, sep="\t")["s"].iloc[0])
    return out


def job_dtype(cfg: dict, rel: str, variable_variant: str | None) -> str:
    """The float type a result was computed in: the model's own dtype, else the variant's; float64 otherwise."""
    parts = Path(rel).parts
    if parts[1] in ("rank_collapse", "attention_products"):
        model = Path(rel).stem
        own = cfg["models"][model].get("dtype")
        if own:
            return own
        if parts[1] == "attention_products":
            return cfg["attention_products"]["dtype"]
        dtypes = cfg["rank_collapse"]["dtype"]
        if isinstance(dtypes, str):
            return dtypes
        return dtypes.get(variable_variant, "float32") if variable_variant else "float32"
    return "float64"


def compare(cpu: Path, gpu: Path, cfg: dict, goals: list[str]) -> list[tuple[str, str, str, float, float, bool]]:
    """Per file, variable (and variant): the largest |GPU - CPU| against the tolerance of the job's float type."""
    rows = []
    for rel in goals:
        with xr.open_dataset(cpu / rel) as a, xr.open_dataset(gpu / rel) as b:
            for name in a.data_vars:
                x, y = a[name], b[name]
                if x.dtype.kind != "f":
                    continue
                groups = [(v, x.sel(variant=v), y.sel(variant=v)) for v in x["variant"].values] if (
                    "variant" in x.dims
                ) else [(None, x, y)]  # fmt: skip
                for variant, xv, yv in groups:
                    dtype = job_dtype(cfg, rel, str(variant) if variant is not None else None)
                    gap = np.abs(xv.values - yv.values)
                    diff = float(np.nanmax(gap)) if np.isfinite(gap).any() else 0.0  # all-NaN: compared by mask
                    ok = diff <= TOLERANCE[dtype] and np.array_equal(np.isnan(xv.values), np.isnan(yv.values))
                    label = name if variant is None else f"{name}[{variant}]"
                    rows.append((rel, label, dtype, diff, TOLERANCE[dtype], ok))
    return rows


def training_gain(base: Path, cfg: dict, cores: int) -> list[tuple[str, float, float]]:
    """Wall seconds of a short path-effectiveness training (sorting, 3 epochs) and one circle training on the CPU and
    on a GPU: whether the small models gain from a GPU."""
    small = copy.deepcopy(cfg)
    small["paths"]["tasks"] = ["sorting"]
    small["paths"]["sorting"]["train"]["epochs"] = 3
    small["circle"].update(hidden_dims=[32], seeds=[0], seeds_per_job=1)
    goals = ["results/paths/sorting/model.safetensors", "results/circle/SAN/d32/seeds0.nc"]
    out = {}
    for device in ("cpu", "cuda"):
        trial = copy.deepcopy(small)
        trial["compute"]["paths_train"]["device"] = device
        trial["compute"]["circle_train"]["device"] = device
        wf = copy_workflow(base / f"train_{device}")
        run(wf, trial, goals, cores, ["--resources", "gpu=1"])
        out[device] = rule_times(wf)
    return [(rule, out["cpu"].get(rule, float("nan")), out["cuda"].get(rule, float("nan"))) for rule in
            ("paths_train", "circle_train")]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, default=4, help="cores of each run (default 4)")
    parser.add_argument("--models", help="comma-separated models of rank_collapse.models (default: all)")
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml", help="config (default config.yaml)")
    parser.add_argument("--keep", type=Path, help="keep the two runs in this folder")
    args = parser.parse_args(argv)
    n_gpus = gpu_count()
    if not n_gpus:
        print("no GPU is visible (torch.cuda.is_available() is False): nothing to benchmark or compare")
        return 0
    import torch

    from san.experiments import check_config

    cfg = yaml.safe_load(args.config.read_text())
    check_config(cfg, ROOT / "workflow" / "schemas")  # defaults filled in
    if args.models:
        cfg["rank_collapse"]["models"] = args.models.split(",")
    goals = targets(cfg)
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench_gpu_"))
    wf_gpu, wf_cpu = copy_workflow(base / "gpu"), copy_workflow(base / "cpu")
    wall_gpu = run(wf_gpu, with_devices(cfg, "cuda"), goals, args.cores, ["--resources", f"gpu={n_gpus}"])
    wall_cpu = run(wf_cpu, with_devices(cfg, "cpu"), goals, args.cores, [])
    names = ", ".join(torch.cuda.get_device_name(i) for i in range(n_gpus))
    print(f"\n{n_gpus} GPU(s): {names}; end to end: GPU run {wall_gpu:.0f} s, CPU run {wall_cpu:.0f} s")

    times_gpu, times_cpu = rule_times(wf_gpu), rule_times(wf_cpu)
    rows = [(r, f"{times_cpu.get(r, 0):.1f}", f"{times_gpu.get(r, 0):.1f}") for r in sorted(times_gpu)]
    print(pd.DataFrame(rows, columns=["rule", "CPU s", "GPU s"]).to_string(index=False))
    memory = []
    for rel in goals:
        with xr.open_dataset(wf_gpu / rel) as ds:
            attrs = json.loads(ds.attrs.get("compute", "{}"))
        memory.append((rel, attrs.get("gpu", "cpu"), attrs.get("gpu_peak_memory_mib", float("nan"))))
    print("\npeak GPU memory per job (MiB):")
    print(pd.DataFrame(memory, columns=["result", "device", "peak MiB"]).to_string(index=False))

    checks = compare(wf_cpu, wf_gpu, cfg, goals)
    table = pd.DataFrame(checks, columns=["result", "variable", "dtype", "max |GPU - CPU|", "tolerance", "ok"])
    print("\nGPU against CPU:")
    print(table.to_string(index=False))
    gains = training_gain(base, cfg, args.cores)
    print("\nsmall models (wall s): " + "; ".join(f"{r}: CPU {c:.1f}, GPU {g:.1f}" for r, c, g in gains))
    bad = table[~table["ok"]]
    write_table(
        "bench_gpu",
        ["result", "variable", "dtype", "max abs diff", "tolerance", "within"],
        [(r, v, d, f"{x:.1e}", f"{t:.0e}", "yes" if ok else "no") for r, v, d, x, t, ok in checks],
        note=f"`python benchmarks/bench_gpu.py`, {n_gpus} x {names}; small models: "
        + "; ".join(f"{r} CPU {c:.1f} s, GPU {g:.1f} s" for r, c, g in gains),
    )
    if len(bad):
        print(f"\n{len(bad)} result(s) differ beyond their tolerance", file=sys.stderr)
        return 1
    print("\nevery GPU result matches the CPU's within its tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
