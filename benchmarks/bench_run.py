"""How close a finished run came to what its machine allows: packing bound, longest chain, arithmetic floor.

    python benchmarks/bench_run.py [--workdir .] [--cores 2] [--log .snakemake/log/<run>.snakemake.log]
    python benchmarks/bench_run.py --workdir W --overlay config/qwen-1.5b.yaml   # after `snakemake --configfile` there

Reads the run's job graph (`snakemake --dag`), its per-job benchmark files (results/benchmarks/<rule>/...tsv) and
the timestamps of its latest Snakemake log, and prints:

- total job CPU time (exact, from the last line of each job's log, :func:`san.core.jobs.cpu_line`; Snakemake's
  ``benchmark:`` samples it only every 30 s after a job's first 15 s and misses the rest), the longest chain of
  dependent jobs (by wall time), the packing bound ``max(CPU / cores, longest chain)`` that no schedule on
  ``cores`` cores can beat, the achieved wall time and its ratio to the bound;
- per training job of the path-effectiveness experiment: its arithmetic (multiply-adds from the config,
  ``san.paths.spec.training_macs``, all seeds), the machine's measured single-thread float32 matrix-multiply rate on a
  product of the training's shape (best of 5 rounds on warm caches; the share's range over the rounds beside it), the
  time that arithmetic alone would take at that rate (the floor, an estimate: real products run on colder caches)
  and the share of the measured wall time it is;
- per path evaluation: its exact arithmetic (single-head applications after prefix sharing, on the task's own
  sampled path sets), the floor at the same rate on the job's threads, and the share of the evaluation's measured
  wall time (its log's ``path evaluation in X s``) it is.

Both modes also write each model job's memory (``bench_run_models`` after a default run, ``bench_run_overlay_models``
after an overlay): per job of the invocation that has a ``model`` wildcard (acquisition, rank collapse, attention
products, context lengths, quantisation control, vision), its wall time, its peak resident memory as Snakemake's
``benchmark:`` sampled it (a lower bound: sampled every 30 s after the first 15 s) and the ``mem_mb`` it declared
(:mod:`san.core.memory`, what a scheduler reserves), with the target peak <= declared.

Measured on a shared machine, wall times include other processes' load: compare ratios within one run.
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import torch
from _common import ROOT, last_logged, matmul_rates, write_table


def dag(workdir: Path) -> tuple[dict[int, tuple[str, list[str]]], list[tuple[int, int]]]:
    """Jobs (id -> rule, wildcard values) and edges (upstream, downstream) of the workflow's full job graph."""
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "--dag", "-F", "--cores", "1", "-q"],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    jobs = {}
    for m in re.finditer(r'^\s*(\d+)\[label = "([^"]+)"', out, re.M):
        rule, *wildcards = m.group(2).split("\\n")
        jobs[int(m.group(1))] = (rule, [w.split(": ", 1)[1] for w in wildcards])
    edges = [(int(a), int(b)) for a, b in re.findall(r"^\s*(\d+) -> (\d+)", out, re.M)]
    return jobs, edges


def last_row(tsv: Path) -> dict[str, str]:
    """The last row of a Snakemake benchmark file (its latest measurement), by column."""
    with tsv.open() as fh:
        return list(csv.DictReader(fh, delimiter="\t"))[-1]


def benchmark_rows(root: Path) -> dict[str, list[tuple[Path, dict[str, str]]]]:
    """The last row of every benchmark file, by rule (the first folder below ``root``, or the file's stem)."""
    rows: dict[str, list[tuple[Path, dict[str, str]]]] = {}
    for tsv in sorted(root.rglob("*.tsv")):
        rel = tsv.relative_to(root).with_suffix("")
        rows.setdefault(rel.parts[0], []).append((rel, last_row(tsv)))
    return rows


def log_cpu(workdir: Path, rel: Path) -> float | None:
    """A job's exact CPU time from the last line of its log (``logs/<rule>/...log``, the path of its benchmark file;
    written by :func:`san.core.jobs.cpu_line`), or None when the log has none."""
    from san.core.jobs import CPU_LINE

    return last_logged(workdir / "logs" / rel.with_suffix(".log"), CPU_LINE)


def match(rule: str, wildcards: list[str], rows: dict[str, list[tuple[Path, dict[str, str]]]]) -> dict[str, str] | None:
    """The benchmark row of one job (with its file's path under ``_rel``): the only file of its rule, or the one
    whose path holds most wildcard values."""
    candidates = [(rel, {**row, "_rel": rel}) for rel, row in rows.get(rule, [])]
    if len(candidates) == 1:
        return candidates[0][1]

    def hits(rel: Path) -> int:  # values that are a path component, or one after a short prefix (d8, seeds0_1)
        return sum(any(re.fullmatch(rf"[a-z]*{re.escape(v)}", part) for part in rel.parts) for v in wildcards)

    scored = sorted(((hits(rel), i) for i, (rel, _) in enumerate(candidates)), reverse=True)
    return candidates[scored[0][1]][1] if scored and scored[0][0] > 0 else None


def longest_chain(jobs, edges, wall: dict[int, float]) -> tuple[float, list[int]]:
    """The longest path through the job graph, weighting each job by its wall time."""
    preds: dict[int, list[int]] = {j: [] for j in jobs}
    for a, b in edges:
        preds[b].append(a)
    best: dict[int, tuple[float, list[int]]] = {}

    def visit(j: int) -> tuple[float, list[int]]:
        if j not in best:
            up = max((visit(p) for p in preds[j]), default=(0.0, []), key=lambda t: t[0])
            best[j] = (up[0] + wall.get(j, 0.0), [*up[1], j])
        return best[j]

    return max((visit(j) for j in jobs), key=lambda t: t[0])


def log_span(text: str) -> tuple[int, float | None]:
    """A Snakemake log's finished jobs and its span in seconds, first to last timestamp (None with fewer than two)."""
    stamps = re.findall(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]", text, re.M)
    finished = len(re.findall(r"^Finished jobid", text, re.M))
    if len(stamps) < 2:
        return finished, None
    first, last = (datetime.strptime(s, "%a %b %d %H:%M:%S %Y") for s in (stamps[0], stamps[-1]))
    return finished, (last - first).total_seconds()


def run_wall(log: Path | None, n_jobs: int) -> float | None:
    """Wall time of the run in Snakemake ``log``: its first to last timestamp, when that one invocation ran every job
    of the run (a run resumed or completed by a later invocation has no meaningful wall time: None)."""
    if log is None:
        return None
    finished, span = log_span(log.read_text())
    if finished < n_jobs:
        print(f"the Snakemake log {log.name} ran {finished} of the run's {n_jobs} jobs: no wall time")
        return None
    return span


def overlay_run(log: Path | None) -> tuple[int, float] | None:
    """The jobs and the wall time (first to last timestamp) of the Snakemake invocation of ``log``, when it finished
    every job it scheduled (its ``Job stats`` total); None otherwise."""
    if log is None:
        return None
    text = log.read_text()
    total = re.search(r"^total\s+(\d+)", text, re.M)
    finished, span = log_span(text)
    if not total or finished < int(total.group(1)) or span is None:
        print(f"the Snakemake log {log.name} did not finish the jobs it scheduled")
        return None
    return finished, span


JOB_BLOCK = re.compile(r"^(?:local)?rule (\w+):\n((?:    .*\n)+)", re.M)
MODEL_COLUMNS = [("job", "{rule} {job}"), ("wall time", "{wall_s:.0f} s"),
                 ("peak RSS (sampled)", "{peak_rss_bytes:.2f@GiB} GiB"),
                 ("declared mem_mb", "{declared_bytes:.2f@GiB} GiB"),
                 ("peak / declared", "{declared_ratio:.2f} ({declared_ratio:<=1?met|NOT met})")]  # fmt: skip


def model_jobs(workdir: Path, log: Path) -> list[dict[str, object]]:
    """Each job of the Snakemake ``log`` with a ``model`` wildcard: its rule, wildcards, the ``mem_mb`` it declared
    and, from its benchmark file, its wall time and sampled peak RSS (jobs without a benchmark file left out)."""
    out = []
    for m in JOB_BLOCK.finditer(log.read_text()):
        fields = dict(re.findall(r"^    (\w+): (.*)$", m.group(2), re.M))
        wildcards = fields.get("wildcards", "")
        mem = re.search(r"\bmem_mb=(\d+)", fields.get("resources", ""))
        bench = workdir / fields.get("benchmark", "-")
        if "model=" not in wildcards or mem is None or not bench.is_file():
            continue
        last = last_row(bench)
        peak, declared = float(last["max_rss"]) * 2**20, int(mem.group(1)) * 2**20
        out.append({"rule": m.group(1), "job": wildcards.replace("model=", "").replace(", ", " "),
                    "wall_s": float(last["s"]), "peak_rss_bytes": peak, "declared_bytes": declared,
                    "declared_ratio": peak / declared})  # fmt: skip
    return sorted(out, key=lambda r: (str(r["job"]), str(r["rule"])))


def write_model_table(name: str, rows: list[dict[str, object]], cores: int) -> None:
    """The model jobs' memory (:func:`model_jobs`) as ``benchmarks/out/<name>.md``."""
    write_table(name, MODEL_COLUMNS, rows, values={"cores": cores},
                note="Each job with a model of the invocation on {cores} cores: peak RSS as Snakemake's "
                "benchmark sampled it (every 30 s after the first 15 s: a lower bound) against the mem_mb it "
                "declared.")  # fmt: skip


def latest_log(workdir: Path) -> Path | None:
    """The newest Snakemake log of ``workdir`` that ran at least one job."""
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    return next((log for log in reversed(logs) if log_span(log.read_text())[0] > 0), None)


OVERLAY_COLUMNS = [("overlay", "{overlay}"), ("jobs it ran", "{jobs}"), ("cores", "{cores}"),
                   ("wall time", "{wall_s:.0f@min} min ({wall_s:.0f} s)")]  # fmt: skip


def write_overlay_table(overlay: str, cores: int, jobs: int, wall: float) -> None:
    """An overlay's run on top of a finished default run as the table the README quotes
    (``benchmarks/out/bench_run_overlay.md``)."""
    write_table("bench_run_overlay", OVERLAY_COLUMNS, [{"overlay": overlay, "jobs": jobs, "cores": cores,
                "wall_s": wall}], values={"cores": cores},
                note="`snakemake --cores {cores} --configfile <overlay>` after a finished default run: the jobs the "
                "overlay adds and those whose inputs or settings it changes.")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=ROOT)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--overlay", default=None, help="the overlay a run after a default run laid over config.yaml")
    parser.add_argument("--log", type=Path, default=None, help="the run's Snakemake log (default: the newest that "
                        "ran a job)")  # fmt: skip
    args = parser.parse_args()
    log = args.log or latest_log(args.workdir)
    if args.overlay:
        ran = overlay_run(log)
        if ran:
            print(f"{args.overlay}: {ran[0]} jobs in {ran[1]:.0f} s on {args.cores} cores")
            write_overlay_table(args.overlay, args.cores, *ran)
            write_model_table("bench_run_overlay_models", model_jobs(args.workdir, log), args.cores)
        return
    jobs, edges = dag(args.workdir)
    rows = benchmark_rows(args.workdir / "results" / "benchmarks")
    wall, cpu = {}, {}
    preds: dict[int, list[int]] = {j: [] for j in jobs}
    for a, b in edges:
        preds[b].append(a)

    def wildcards(j: int) -> list[str]:
        """A job's wildcard values; the dag omits those its inputs determine, so take its upstream jobs' then."""
        return jobs[j][1] or sorted({v for p in preds[j] if jobs[p][0] != "corpus" for v in wildcards(p)})

    sampled, exact = {}, 0
    for j, (rule, _) in jobs.items():
        row = match(rule, wildcards(j), rows)
        if row is not None:
            wall[j], sampled[j] = float(row["s"]), float(row.get("cpu_time") or 0.0)
            from_log = log_cpu(args.workdir, row["_rel"])
            cpu[j] = sampled[j] if from_log is None else from_log
            exact += from_log is not None
    total_cpu = sum(cpu.values())
    chain, path = longest_chain(jobs, edges, wall)
    bound = max(total_cpu / args.cores, chain)
    achieved = run_wall(log, len(jobs))
    print(f"jobs with a benchmark file: {len(wall)} of {len(jobs)}; with their exact CPU time in their log: {exact}")
    print(
        f"total job CPU: {total_cpu:.0f} s (Snakemake's sampled cpu_time: {sum(sampled.values()):.0f} s); "
        f"total job wall: {sum(wall.values()):.0f} s"
    )
    print(f"longest chain: {chain:.0f} s: " + " -> ".join(f"{jobs[j][0]}{jobs[j][1] or ''}" for j in path))
    per_core = total_cpu / args.cores
    print(f"packing bound on {args.cores} cores: max(CPU / cores = {per_core:.0f} s, chain) = {bound:.0f} s")
    if achieved:
        print(f"achieved wall: {achieved:.0f} s = {achieved / bound:.2f} x the bound")
    write_run_table(len(wall), args.cores, total_cpu, chain, bound, achieved)
    if achieved:
        write_model_table("bench_run_models", model_jobs(args.workdir, log), args.cores)

    import yaml

    from san.experiments import check_config
    from san.paths.spec import sequences_and_tokens, training_macs

    config = yaml.safe_load((args.workdir / "config.yaml").read_text())
    slices = check_config(config, args.workdir / "workflow" / "schemas")["paths"]
    print("\npath-effectiveness training: arithmetic against the machine's matrix-multiply rate (one thread)")
    print(f"{'task':14} {'GMAC':>9} {'rate GMAC/s':>12} {'floor s':>9} {'measured s':>11} {'floor share (range)':>22}")
    for name, task in slices.items():
        own = [r for r in rows.get("paths_train", []) if r[0].name == name]
        row = own[0][1] if own else None
        macs = training_macs(task)
        d = task["model"]["dim"]
        rates = matmul_rates(task["train"]["batch_size"] * 10, d, 3 * d)
        rate = max(rates)
        measured = float(row["s"]) if row else float("nan")
        floor = macs / rate
        print(f"{name:14} {macs / 1e9:9.1f} {rate / 1e9:12.1f} {floor:9.1f} {measured:11.1f} "
              f"{share_range(macs, rates, measured):>22}")  # fmt: skip

    evaluation = config["paths"]["evaluation"]
    threads = int(config["compute"]["paths_evaluate"]["threads"])
    print(
        f"\npath evaluation: the exact arithmetic of the batched protocol against the same rate ({threads} thread(s) "
        "per job; floor = MACs / (rate x threads))"
    )
    print(
        f"{'task':14} {'heads/input':>11} {'GMAC':>9} {'rate GMAC/s':>12} {'floor s':>9} {'measured s':>11} "
        f"{'floor share (range)':>22}"
    )
    for name, task in slices.items():
        heads, macs = evaluation_arithmetic(task, evaluation)
        d, n = task["model"]["dim"], sequences_and_tokens(task)[2]
        dh = d // task["model"]["n_heads"]
        rates = [r * threads for r in matmul_rates(n * 16, d, 3 * dh)]
        rate = max(rates)
        measured = eval_seconds(args.workdir, name) or float("nan")
        floor = macs / rate
        print(
            f"{name:14} {heads:11d} {macs / 1e9:9.1f} {rate / threads / 1e9:12.1f} {floor:9.1f} {measured:11.1f} "
            f"{share_range(macs, rates, measured):>22}"
        )


def share_range(macs: float, rates: list[float], measured: float) -> str:
    """The floor's share of a measured time at the best rate, with its range over the rate's rounds."""
    shares = sorted(macs / r / measured for r in rates)
    return f"{shares[0]:.2f} ({shares[0]:.2f}-{shares[-1]:.2f})"


RUN_COLUMNS = [
    ("jobs", "{jobs}"), ("cores", "{cores}"), ("wall time", "{wall_s:.0f@min} min ({wall_s:.0f} s)"),
    ("job CPU", "{cpu_s:.0f} s"), ("longest chain", "{chain_s:.0f} s"), ("packing bound", "{bound_s:.0f} s"),
    ("wall / bound", "{wall_over_bound:.2f}"),
]  # fmt: skip
"""The run's table: (title, cell template) per column (``_common.write_table``); a run without a wall time of one
invocation shows '-' there."""


def write_run_table(n_jobs: int, cores: int, cpu: float, chain: float, bound: float, achieved: float | None) -> None:
    """The run's numbers as the table the README quotes (``benchmarks/out/bench_run.md``), with its data."""
    row = {"jobs": n_jobs, "cores": cores, "wall_s": achieved, "cpu_s": cpu, "chain_s": chain, "bound_s": bound,
           "wall_over_bound": achieved / bound if achieved else None}  # fmt: skip
    write_table("bench_run", RUN_COLUMNS, [row], values={"cores": cores}, note="After a default run on {cores} cores.")


def evaluation_arithmetic(task: dict, evaluation: dict) -> tuple[int, float]:
    """Single-head applications per input after prefix sharing (the batched protocol of
    :func:`san.paths.evaluate.evaluate_path_sets`, on the task's own sampled sets) and the multiply-adds of the whole
    evaluation: per application on n tokens of width d with head width dh, ``4 n d dh`` (the head's query, key and
    value projections and its share of the output projection) plus ``2 n^2 dh`` (scores and weighted sum); the
    sums of the sets and the classifier add under 1%. Every seed of the task evaluates the same sets on its own
    inputs."""
    from san.paths.evaluate import prefix_tree, sample_path_sets
    from san.paths.spec import PAD, sequences_and_tokens

    L, H, d = task["model"]["n_layers"], task["model"]["n_heads"], task["model"]["dim"]
    _, n_eval, n = sequences_and_tokens(task)
    sets = sample_path_sets(L, H, evaluation["n_paths"], evaluation["n_repeats"], evaluation["seed"])
    heads = prefix_tree(torch.as_tensor(sets[sets[..., 0] != PAD]), H).n_head_evaluations
    dh = d // H
    return heads, float(len(task["seeds"]) * n_eval * heads * (4 * n * d * dh + 2 * n * n * dh))


def eval_seconds(workdir: Path, task: str) -> float | None:
    """The wall time of the path evaluation proper, from the evaluation job's log (``path evaluation of N seed(s)
    in X s``)."""
    return last_logged(workdir / "logs" / "paths_evaluate" / f"{task}.log", "seed(s) in")


if __name__ == "__main__":
    main()
