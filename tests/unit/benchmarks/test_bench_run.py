"""benchmarks/bench_run.py: an overlay run's jobs and wall time from its Snakemake log, only when that invocation
finished every job it scheduled."""

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
    assert bench_run.overlay_run(tmp_path) == (2, 1200.0)
    (logs / "2026-12-07T190000.snakemake.log").write_text(LOG.rsplit("[Mon", 1)[0])  # killed before its last job
    assert bench_run.overlay_run(tmp_path) is None
    assert bench_run.overlay_run(tmp_path / "nothing") is None
