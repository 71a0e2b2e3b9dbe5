"""Job CPU of the default run against an earlier commit's, on one machine: issue 16's "15% less CPU" criterion.

Runs the default workflow of an earlier commit (default ``0e56738``, where issue 16 measured 2236 CPU s) in a fresh
clone, with a ``sitecustomize`` hook that makes every job process record its exact CPU time at exit (``getrusage``
of itself and its waited-for children: the measure of the ``job cpu time`` line that every job of the current code
logs), then compares the jobs that both runs have, grouped as the issue counted them: the path-effectiveness
trainings and evaluations, the circle (training and gathering), and the rank-collapse, acquisition, tokenisation
and path-product jobs of the models the earlier default analysed. The current run is a finished run of this
checkout's default config (``--new-workdir``, e.g. a clean clone after ``snakemake --cores all``); the two runs should
follow each other on an otherwise idle machine, since the machine's speed drifts between sessions.

    python benchmarks/bench_cpu_against.py --new-workdir DIR [--commit 0e56738] [--old-workdir DIR] [--cores all]

``--old-workdir`` reuses an earlier run of this script (its clone, with ``cpu_hook.jsonl``) instead of running again.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
from bench_run import last_logged  # noqa: E402

from san.core.jobs import CPU_LINE  # noqa: E402

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
#: rule names of either commit, by group (the earlier commit called the tokenisation rule ``tokenize``)
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
}
PER_MODEL = {"rank_collapse", "acquire_model", "tokenize", "tokenize_inputs", "path_products"}


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


def old_jobs(wf: Path) -> list[tuple[str, dict, float]]:
    """(rule, wildcards, CPU s) of every job of a hooked run."""
    out = []
    for line in (wf / HOOK_LOG).read_text().splitlines():
        rec = json.loads(line)
        if rec["job"]:
            out.append((rec["job"]["rule"], rec["job"]["wildcards"], rec["cpu"]))
    return out


def new_jobs(wf: Path) -> list[tuple[str, dict, float]]:
    """(rule, wildcards, CPU s) of every job of a run of the current code, from the last ``job cpu time`` line of
    each job's log (``logs/<rule>/<model>[/<weights>].log``; only the model wildcard is needed here)."""
    out = []
    for log in (wf / "logs").rglob("*.log"):
        cpu = last_logged(log, CPU_LINE)
        if cpu is None:
            continue
        parts = log.relative_to(wf / "logs").parts
        rule = parts[0].removesuffix(".log")
        wildcards = {}
        if rule in PER_MODEL and len(parts) > 1:
            wildcards["model"] = parts[1].removesuffix(".log")
        out.append((rule, wildcards, cpu))
    return out


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--new-workdir", type=Path, required=True, help="a finished default run of the current code")
    ap.add_argument("--commit", default="0e56738", help="the earlier commit (default: where issue 16 measured)")
    ap.add_argument("--old-workdir", type=Path, help="a finished hooked run of the earlier commit (skips running it)")
    ap.add_argument("--cores", default="all")
    args = ap.parse_args()
    old_wf = args.old_workdir or run_commit(args.commit, Path(tempfile.mkdtemp(prefix="bench_cpu_")), args.cores)
    old = old_jobs(old_wf)
    models = {w["model"] for rule, w, _ in old if rule == "rank_collapse"}
    before, after = by_group(old, models), by_group(new_jobs(args.new_workdir), models)
    print(f"jobs both runs have (per-model jobs: {sorted(models)})")
    print(f"{'group':42} {'jobs':>5} {'CPU s':>8}   {'jobs':>5} {'CPU s':>8}   change")
    for g in GROUPS:
        (n0, c0), (n1, c1) = before[g], after[g]
        print(f"{g:42} {n0:5d} {c0:8.1f}   {n1:5d} {c1:8.1f}   {100 * (c1 / c0 - 1) if c0 else float('nan'):+6.1f}%")
    total0, total1 = sum(c for _, c in before.values()), sum(c for _, c in after.values())
    change = 100 * (total1 / total0 - 1)
    print(f"{'together':42} {'':5} {total0:8.1f}   {'':5} {total1:8.1f}   {change:+6.1f}%")
    print(f"issue 16's target, at least 15% less: {'met' if change <= -15 else 'NOT met'}")


if __name__ == "__main__":
    main()
