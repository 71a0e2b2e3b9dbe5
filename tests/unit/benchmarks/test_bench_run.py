"""benchmarks/bench_run.py: an overlay run's jobs and wall time from its Snakemake log, only when that invocation
finished every job it scheduled; each model job's sampled peak against the mem_mb its log says it declared."""

import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))  # the scripts' own folder, as when they run

import bench_run  # noqa: E402

LOG = """Job stats:
job              count
-------------  -------
rank_collapse        2
total                2

[Mon Dec  7 18:31:55 2026]
rule rank_collapse:
[Mon Dec  7 18:40:10 2026]
Finished jobid: 1 (Rule: rank_collapse)
[Mon Dec  7 18:51:55 2026]
Finished jobid: 2 (Rule: rank_collapse)
"""


def test_an_overlay_run_is_read_from_its_log_and_an_unfinished_one_is_not(tmp_path):
    logs = tmp_path / ".snakemake" / "log"
    logs.mkdir(parents=True)
    (logs / "2026-12-07T183155.snakemake.log").write_text(LOG)
    assert bench_run.overlay_run(bench_run.latest_log(tmp_path)) == (2, 1200.0)
    (logs / "2026-12-07T190000.snakemake.log").write_text(LOG.rsplit("[Mon", 1)[0])  # killed before its last job
    assert bench_run.overlay_run(bench_run.latest_log(tmp_path)) is None
    assert bench_run.latest_log(tmp_path / "nothing") is None
    assert bench_run.overlay_run(None) is None


JOBS = """[Mon Dec  7 18:31:55 2026]
localrule rank_collapse:
    input: results/models/big/pretrained
    output: results/rank_collapse/big.nc
    log: logs/rank_collapse/big.log
    jobid: 3
    benchmark: results/benchmarks/rank_collapse/big.tsv
    wildcards: model=big
    resources: tmpdir=/tmp, runtime=30, mem_mb=4000, mem=4 GB, mem_mib=3815

[Mon Dec  7 18:31:56 2026]
localrule summary:
    output: results/summary.json
    jobid: 4
    benchmark: results/benchmarks/summary.tsv
    resources: tmpdir=/tmp, mem_mb=1000

[Mon Dec  7 18:31:57 2026]
localrule acquire_model:
    output: results/models/small/init
    jobid: 5
    benchmark: results/benchmarks/acquire_model/small/init.tsv
    wildcards: model=small, weights=init
    resources: tmpdir=/tmp, mem_mb=1000, mem=1 GB
"""
TSV = "s\th:m:s\tmax_rss\tmax_vms\tcpu_time\n{s}\t0:00:01\t{rss}\t1.0\t1.0\n"


def test_model_jobs_read_their_declared_memory_from_the_log_and_their_peak_from_their_benchmark(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(JOBS)
    for rel, s, rss in (("rank_collapse/big.tsv", 120.0, 5000.0), ("summary.tsv", 1.0, 100.0),
                        ("acquire_model/small/init.tsv", 3.0, 500.0)):  # fmt: skip
        path = tmp_path / "results" / "benchmarks" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TSV.format(s=s, rss=rss))
    rows = bench_run.model_jobs(tmp_path, log)
    assert [(r["rule"], r["job"]) for r in rows] == [("rank_collapse", "big"), ("acquire_model", "small weights=init")]
    big, small = rows
    assert big["declared_ratio"] == 5000 / 4000 and big["wall_s"] == 120.0  # over what it declared: NOT met
    assert small["declared_ratio"] == 0.5 and small["peak_rss_bytes"] == 500 * 2**20
