"""Benchmark of the rank-collapse part of the default run: wall time and peak memory per job and per model.

Runs the rank-collapse rules of the default config (or ``--config FILE``) from scratch in a temporary copy of the
workflow (model acquisition, tokenisation, the four variants of every model, the path products), then prints, per
job and summed per model, the wall time and peak resident memory that Snakemake's ``benchmark:`` files recorded,
and the end-to-end wall time. Target: the whole rank-collapse part under 8 minutes on a 2-core CPU.

    python benchmarks/bench_rank_collapse.py [--cores 2] [--config config.yaml] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from helpers import copy_workflow, rank_collapse_targets  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cores", default="2")
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--keep", help="run in this folder and keep it (default: a temporary folder)")
    args = ap.parse_args()
    cfg = yaml.safe_load(Path(args.config).read_text())
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_rc_"))
    try:
        wf = copy_workflow(work / "wf")
        (wf / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        targets = [t for t in rank_collapse_targets(cfg) if t.endswith(".nc")]
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", args.cores, *targets],
            cwd=wf,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - start
        rows = []
        for tsv in sorted((wf / "results" / "benchmarks").rglob("*.tsv")):
            df = pd.read_csv(tsv, sep="\t")
            job = str(tsv.relative_to(wf / "results" / "benchmarks")).removesuffix(".tsv")
            rows.append({"job": job, "wall_s": df["s"].iloc[0], "peak_rss_mb": df["max_rss"].iloc[0]})
        table = pd.DataFrame(rows).sort_values("job")
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
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
