"""Suggest the per-rule memory, disk and wall time of workflow/resources.yaml from the benchmark files of a finished
run.

    .venv/bin/python profiles/slurm/sizes.py [results/benchmarks]

Prints, per rule, the jobs measured, the longest wall time (s) and largest max_rss (MB) over its benchmark files,
and the suggested entry of workflow/resources.yaml: mem_mb = 2 x max_rss rounded up to 500 MB (at least 1000),
disk_mb = 2 x the most MB a job wrote (io_out) rounded up to 500 MB (at least 1000) and runtime = 5 x the wall time
rounded up to 5 minutes (at least 10). Benchmarks of a run on a loaded machine
overstate the time.
"""

from __future__ import annotations

import csv
import math
import sys
from collections import defaultdict
from pathlib import Path


def rule_of(path: Path, root: Path) -> str:
    """Rule name of a benchmark file: its first path component (results/benchmarks/<rule>[/<wildcards>].tsv)."""
    return path.relative_to(root).with_suffix("").parts[0]


def main(root: Path) -> None:
    seconds: dict[str, list[float]] = defaultdict(list)
    rss: dict[str, list[float]] = defaultdict(list)
    written: dict[str, list[float]] = defaultdict(list)
    for path in sorted(root.rglob("*.tsv")):
        with path.open() as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                rule = rule_of(path, root)
                seconds[rule].append(float(row["s"]))
                if row.get("max_rss") not in (None, "", "-", "NA"):
                    rss[rule].append(float(row["max_rss"]))
                if row.get("io_out") not in (None, "", "-", "NA"):
                    written[rule].append(float(row["io_out"]))
    print(f"{'rule':24} {'jobs':>5} {'max s':>8} {'max MB':>8}   workflow/resources.yaml")
    for rule in sorted(seconds):
        wall, mem = max(seconds[rule]), max(rss[rule], default=0.0)
        mem_mb = max(1000, math.ceil(2 * mem / 500) * 500)
        disk_mb = max(1000, math.ceil(2 * max(written[rule], default=0.0) / 500) * 500)
        runtime = max(10, math.ceil(5 * wall / 60 / 5) * 5)
        entry = f"{rule}: {{mem_mb: {mem_mb}, disk_mb: {disk_mb}, runtime: {runtime}}}"
        print(f"{rule:24} {len(seconds[rule]):>5} {wall:>8.1f} {mem:>8.0f}   {entry}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/benchmarks"))
