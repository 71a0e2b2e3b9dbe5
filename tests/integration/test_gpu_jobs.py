"""GPU jobs on a local node, with a faked device count (``CUDA_VISIBLE_DEVICES``; torch here is a CPU build): the
workflow never runs more GPU jobs at once than there are GPUs, each job says in its log that it reserved a GPU but
ran on the CPU, and ``--resources gpu=N`` replaces the detected limit."""

from __future__ import annotations

import re
from datetime import datetime

from helpers import copy_workflow, snakemake, tiny_config, write_config

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ", re.M)


def job_interval(log: str) -> tuple[datetime, datetime]:
    """First and last timestamp of a job's log."""
    stamps = [datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f") for s in STAMP.findall(log)]
    return stamps[0], stamps[-1]


def test_gpu_jobs_never_outnumber_the_visible_gpus(tmp_path, default_config):
    wf = copy_workflow(tmp_path / "wf")
    cfg = tiny_config(default_config)
    write_config(wf, cfg)
    sweeps = list(cfg["propagation"]["sweeps"])
    targets = [f"results/propagation/{s}.nc" for s in sweeps]
    # two GPUs asked for by the command line: the limit is the user's
    dry = snakemake(wf, "-n", "--cores", "4", *targets, "--resources", "gpu=2", env={"CUDA_VISIBLE_DEVICES": "0"})
    assert "GPU jobs: at most" not in dry.stdout + dry.stderr
    # one visible GPU, four cores: the sweeps (each reserving a GPU) run one at a time
    run = snakemake(wf, "--cores", "4", *targets, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert "GPU jobs: at most 1 at a time" in run.stdout + run.stderr
    logs = {s: (wf / "logs" / "propagation_sweep" / f"{s}.log").read_text() for s in sweeps}
    for log in logs.values():
        assert "compute.propagation_sweep.device is auto and no CUDA device is visible" in log
        assert "reserved a GPU but runs on the CPU" in log
    spans = sorted(job_interval(log) for log in logs.values())
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end, f"two GPU jobs ran at once on one GPU: {spans}"
