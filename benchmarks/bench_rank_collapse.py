"""Benchmark of the rank-collapse part of the default run: wall time and peak memory per job and per model.

Runs the rank-collapse rules of the default config (or ``--config FILE``) from scratch in a temporary copy of the
workflow (model acquisition, tokenisation, the four variants of every model, the attention products), then prints, per
job and summed per model, the wall time and peak resident memory that Snakemake's ``benchmark:`` files recorded,
and the end-to-end wall time. Target: the whole rank-collapse part under 8 minutes on a 2-core CPU.

Then the floor of the analysis jobs: the matrix multiply-adds of every model's variants, counted by torch's
``FlopCounterMode`` on one sequence of each weight set through the same code path as the job (``linear``, ``bmm``,
``matmul``; per-sequence forwards, so the count scales exactly with the sequences), by dtype, against this machine's
single-thread float32 and float64 matrix-multiply rates; and the start-up of a job (the CPU time of importing the
analysis code in a fresh interpreter). ``--floor-of DIR`` prints only this for a run kept with ``--keep DIR``.

    python benchmarks/bench_rank_collapse.py [--cores 2] [--config config.yaml] [--keep DIR] [--floor-of DIR]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch
import yaml
from _common import ROOT, copy_workflow, matmul_rate, rank_collapse_results, write_table

DTYPES = {"f32": torch.float32, "f64": torch.float64}


def import_seconds() -> float:
    """CPU seconds (user + system) of importing the analysis job's code in a fresh interpreter, best of three."""
    best = float("inf")
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "import san.rank_collapse.experiment"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def multiply_adds(wf: Path, cfg: dict) -> pd.DataFrame:
    """Matrix multiply-adds of each model's analysis job by dtype: every variant of every weight set in its dtype,
    counted on the first sequence and scaled to all of them."""
    from torch.utils.flop_counter import FlopCounterMode

    from san.core.device import resolve_dtype
    from san.core.storage import read_netcdf
    from san.models.acquire import load_model
    from san.rank_collapse.experiment import residuals_by_variant
    from san.rank_collapse.spec import variant_dtypes, variants_by_dtype

    rc = cfg["rank_collapse"]
    rows = []
    for name in rc["models"]:
        spec = cfg["models"][name]
        dtypes = variant_dtypes(spec.get("dtype", rc["dtype"]), rc["variants"])
        macs = {"float32": 0.0, "float64": 0.0}
        for weights in (w for w in ("init", "pretrained") if spec.get(w)):
            ids = torch.as_tensor(read_netcdf(wf / f"results/inputs/{name}/{weights}.nc")["input_ids"].values)
            for dtype_name, own in variants_by_dtype(dtypes).items():
                model = load_model(wf / f"results/models/{name}/{weights}", spec["family"], resolve_dtype(dtype_name))
                with FlopCounterMode(display=False) as counter:
                    residuals_by_variant(model, spec["family"], ids[:1], own, 1, rc["albert_no_mlp"])
                macs[dtype_name] += counter.get_total_flops() / 2 * ids.shape[0]
        rows.append({"model": name, "GMAC f32": macs["float32"] / 1e9, "GMAC f64": macs["float64"] / 1e9})
    return pd.DataFrame(rows).set_index("model")


def print_floor(wf: Path, cfg: dict, table: pd.DataFrame, cores: int) -> None:
    """The analysis jobs' arithmetic floor against their measured wall times, and the start-up every job pays."""
    # a base-size encoder's MLP on 16 sequences of 128 tokens
    rates = {name: matmul_rate(2048, 768, 3072, repeats=3, dtype=dtype) for name, dtype in DTYPES.items()}
    counts = multiply_adds(wf, cfg)
    counts["floor s"] = counts["GMAC f32"] * 1e9 / rates["f32"] + counts["GMAC f64"] * 1e9 / rates["f64"]
    jobs = table[table["job"].str.startswith("rank_collapse/")]
    measured = dict(zip(jobs["job"].str.removeprefix("rank_collapse/"), jobs["wall_s"], strict=True))
    counts["job s"] = [measured.get(m, float("nan")) for m in counts.index]
    counts["floor share"] = counts["floor s"] / counts["job s"]
    print(
        f"\nanalysis jobs: matrix multiply-adds (FlopCounterMode) against the single-thread rates "
        f"{rates['f32'] / 1e9:.1f} (float32) and {rates['f64'] / 1e9:.1f} (float64) GMAC/s"
    )
    print(counts.to_string(float_format=lambda x: f"{x:.2f}"))
    startup = import_seconds()
    torch_jobs = int(table["job"].str.match(r"(acquire_model|rank_collapse|attention_products)/").sum())
    arithmetic = counts["floor s"].sum()
    print(
        f"arithmetic of the analysis jobs: {arithmetic:.0f} s of {counts['job s'].sum():.0f} s measured; start-up "
        f"(importing torch and transformers' model code): {startup:.1f} CPU s x {torch_jobs} jobs = "
        f"{startup * torch_jobs:.0f} s; together {(arithmetic + startup * torch_jobs) / cores:.0f} s on {cores} cores, "
        f"against {table['wall_s'].sum() / cores:.0f} s for all of the part's job wall"
    )


def job_table(wf: Path) -> pd.DataFrame:
    """Wall time and peak memory of every job, from the run's Snakemake benchmark files."""
    rows = []
    for tsv in sorted((wf / "results" / "benchmarks").rglob("*.tsv")):
        df = pd.read_csv(tsv, sep="\t")
        job = str(tsv.relative_to(wf / "results" / "benchmarks")).removesuffix(".tsv")
        rows.append({"job": job, "wall_s": df["s"].iloc[0], "peak_rss_mb": df["max_rss"].iloc[0]})
    return pd.DataFrame(rows).sort_values("job")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cores", default="2")
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--keep", help="run in this folder and keep it (default: a temporary folder)")
    ap.add_argument("--floor-of", help="only print the floor of a run kept in this folder (its --keep DIR)")
    args = ap.parse_args()
    cfg = yaml.safe_load(Path(args.config).read_text())
    if args.floor_of:
        wf = Path(args.floor_of) / "wf"
        print_floor(wf, yaml.safe_load((wf / "config.yaml").read_text()), job_table(wf), int(args.cores))
        return
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_rc_"))
    try:
        wf = copy_workflow(work / "wf")
        (wf / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        targets = rank_collapse_results(cfg)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", args.cores, *targets],
            cwd=wf,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - start
        table = job_table(wf)
        print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
        models = cfg["rank_collapse"]["models"]
        table["model"] = [next((m for m in models if f"/{m}" in f"/{j}"), "-") for j in table["job"]]
        per_model = table.groupby("model").agg(wall_s=("wall_s", "sum"), peak_rss_mb=("peak_rss_mb", "max"))
        print("\nper model (sum of its jobs' wall times; the largest peak RSS of its jobs):")
        print(per_model.to_string(float_format=lambda x: f"{x:.1f}"))
        print(
            f"\nsum of job wall times: {table['wall_s'].sum():.1f} s; peak RSS of any job: "
            f"{table['peak_rss_mb'].max():.0f} MB"
        )
        print(
            f"end-to-end wall time of the rank-collapse part with --cores {args.cores}: {wall:.1f} s "
            f"(target < 480 s: {'met' if wall < 480 else 'NOT met'})"
        )
        print_floor(wf, cfg, table, int(args.cores))
        rows = [[m, f"{r.wall_s:.0f} s", f"{r.peak_rss_mb / 1024:.1f} GB"] for m, r in per_model.iterrows() if m != "-"]
        rows.append([f"the whole part, --cores {args.cores}", f"{wall:.0f} s end to end", ""])
        note = "`python benchmarks/bench_rank_collapse.py`: the `fig2` jobs of the default config."
        write_table("bench_rank_collapse", ["model", "job wall (sum)", "peak memory"], rows, note=note)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
