"""Job CPU of the default run at two commits, on one machine: where a change moved the CPU cost.

Runs the default workflow of each commit in a fresh clone of this repository, with a ``sitecustomize`` hook that
makes every job process record its exact CPU time at exit (``getrusage`` of itself and its waited-for children, the
measure of the ``job cpu time`` line that every job logs), then compares the jobs both runs have, by group: the
path-effectiveness trainings and evaluations, the circle (training and gathering), and the rank-collapse,
acquisition, tokenisation and attention-product jobs of the models both defaults analyse. Run it on an otherwise idle
machine; the two runs follow each other, so they share the machine's speed.

    python benchmarks/bench_cpu_against.py COMMIT_A COMMIT_B [--cores all] [--workdir-a DIR] [--workdir-b DIR]

``--workdir-a``/``--workdir-b`` reuse a finished run of this script (its clone, with ``cpu_hook.jsonl``) instead of
running that commit again. The table is also written to ``benchmarks/out/bench_cpu_against.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from _common import ROOT, write_table

HOOK_LOG = "cpu_hook.jsonl"
HOOK = '''"""bench_cpu_against: every Python process appends its exact CPU time (self + waited-for children) at exit."""
import atexit, json, os, resource, sys


def _record():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    smk = getattr(sys.modules.get("__main__"), "snakemake", None)
    job = None if smk is None else {"rule": smk.rule, "wildcards": dict(smk.wildcards.items())}
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    with open(os.environ["SAN_CPU_HOOK_LOG"], "a") as fh:
        fh.write(json.dumps({"job": job, "cpu": cpu}) + "\\n")


atexit.register(_record)
'''
GROUPS = (
    "path-effectiveness training",
    "path evaluation",
    "circle (training, gathering)",
    "rank collapse",
    "acquisition, tokenisation, path products",
)
#: rule names by group (older commits name the tokenisation rule ``tokenize`` and the attention products
#: ``path_products``)
RULES = {
    "paths_train": GROUPS[0],
    "paths_evaluate": GROUPS[1],
    "circle_train": GROUPS[2],
    "circle_gather": GROUPS[2],
    "rank_collapse": GROUPS[3],
    "acquire_model": GROUPS[4],
    "tokenize": GROUPS[4],
    "tokenize_inputs": GROUPS[4],
    "path_products": GROUPS[4],
    "attention_products": GROUPS[4],
}
PER_MODEL = {"rank_collapse", "acquire_model", "tokenize", "tokenize_inputs", "path_products", "attention_products"}


def run_commit(commit: str, work: Path, cores: str) -> Path:
    """Clone this repository at ``commit`` into ``work/wf`` and run its default workflow with the CPU hook."""
    wf = work / "wf"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(wf)], check=True)
    subprocess.run(["git", "checkout", "-q", commit], cwd=wf, check=True)
    hook = work / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    env = {**os.environ, "PYTHONPATH": f"{wf}{os.pathsep}{hook}", "SAN_CPU_HOOK_LOG": str(wf / HOOK_LOG)}
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", cores], cwd=wf, env=env, check=True)
    return wf


def hooked_jobs(wf: Path) -> list[tuple[str, dict, float]]:
    """(rule, wildcards, CPU s) of every job of a hooked run (processes that were no job are skipped)."""
    out = []
    for line in (wf / HOOK_LOG).read_text().splitlines():
        rec = json.loads(line)
        if rec["job"]:
            out.append((rec["job"]["rule"], rec["job"]["wildcards"], rec["cpu"]))
    return out


def analysed_models(jobs: list[tuple[str, dict, float]]) -> set[str]:
    """The models a run's rank-collapse jobs analysed."""
    return {w["model"] for rule, w, _ in jobs if rule == "rank_collapse"}


def by_group(jobs: list[tuple[str, dict, float]], models: set[str]) -> dict[str, tuple[int, float]]:
    """Job count and CPU seconds per group, per-model rules restricted to ``models``."""
    count: dict[str, int] = defaultdict(int)
    cpu: dict[str, float] = defaultdict(float)
    for rule, wildcards, seconds in jobs:
        group = RULES.get(rule)
        if group is None or (rule in PER_MODEL and wildcards.get("model") not in models):
            continue
        count[group] += 1
        cpu[group] += seconds
    return {g: (count[g], cpu[g]) for g in GROUPS}


def comparison_rows(before: dict[str, tuple[int, float]], after: dict[str, tuple[int, float]]) -> list[dict]:
    """Table rows: per group the jobs and CPU seconds of both runs and the relative change (None without a CPU time
    in the first run), then both together."""
    rows = []
    for g in GROUPS:
        (n0, c0), (n1, c1) = before[g], after[g]
        rows.append({"group": g, "jobs_a": n0, "cpu_a_s": c0, "jobs_b": n1, "cpu_b_s": c1,
                     "change": c1 / c0 - 1 if c0 else None})  # fmt: skip
    n0, c0 = (sum(x) for x in zip(*before.values(), strict=True))
    n1, c1 = (sum(x) for x in zip(*after.values(), strict=True))
    return [*rows, {"group": "together", "jobs_a": n0, "cpu_a_s": c0, "jobs_b": n1, "cpu_b_s": c1,
                    "change": c1 / c0 - 1 if c0 else None}]  # fmt: skip


COLUMNS = [
    ("group", "{group}"), ("jobs {commit_a}", "{jobs_a}"), ("CPU s {commit_a}", "{cpu_a_s:.1f}"),
    ("jobs {commit_b}", "{jobs_b}"), ("CPU s {commit_b}", "{cpu_b_s:.1f}"), ("change", "{change:+.1%}"),
]  # fmt: skip
"""The comparison's table: (title, cell template) per column (``_common.write_table``)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("commit_a", help="the first commit (any git revision)")
    ap.add_argument("commit_b", help="the second commit (any git revision)")
    ap.add_argument("--workdir-a", type=Path, help="a finished hooked run of commit A (skips running it)")
    ap.add_argument("--workdir-b", type=Path, help="a finished hooked run of commit B (skips running it)")
    ap.add_argument("--cores", default="all")
    args = ap.parse_args()
    runs = []
    for commit, workdir in ((args.commit_a, args.workdir_a), (args.commit_b, args.workdir_b)):
        wf = workdir or run_commit(commit, Path(tempfile.mkdtemp(prefix="bench_cpu_")), args.cores)
        runs.append(hooked_jobs(wf))
    models = analysed_models(runs[0]) & analysed_models(runs[1])
    before, after = by_group(runs[0], models), by_group(runs[1], models)
    print(f"jobs both runs have (per-model jobs: {sorted(models)})")
    values = {"commit_a": args.commit_a, "commit_b": args.commit_b, "models": ", ".join(sorted(models))}
    write_table("bench_cpu_against", COLUMNS, comparison_rows(before, after), values=values,
                note="Per-model jobs of: {models}")  # fmt: skip


if __name__ == "__main__":
    main()
