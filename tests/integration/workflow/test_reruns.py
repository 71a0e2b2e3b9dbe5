"""No output can be frozen: for every job of the workflow, a change of any of its inputs schedules it again.

Snakemake skips an input flagged ``ancient`` when it decides whether a job is out of date, and its flags change the
file object they wrap in place: an ``ancient()`` around a rule's output object (``rules.x.output``, a ``TARGETS``
entry) freezes that file for every other rule that reads the same object too, so a figure keeps a table's old
verdicts while ``snakemake -n`` says "Nothing to be done". Checked two ways on the default config's DAG, parsed once:

* the flags: no input of any job, and no input a rule declares (rules the default config does not schedule too), is
  ancient;
* the behaviour, in one dry run of a finished run (every job's outputs and benchmark files made to exist, each newer
  than what its job reads): a newer pretrained phenomena table reruns its figure, the case a flag once froze.

``test_an_ancient_output_object_is_caught`` puts the flag that froze the pretrained phenomena's figure back into the
runtimes rule of a copy and checks that the flag check names the figure's frozen input.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import copy_workflow, snakemake

pytestmark = pytest.mark.slow

#: Every job of the default config's DAG (rule, inputs, outputs with benchmark files, the inputs flagged ancient)
#: and every rule's declared inputs flagged ancient, read through Snakemake's API.
_DAG = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.io import is_flagged
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, Quietness, ResourceSettings

def declared(items):
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from declared(item)
        elif isinstance(item, str):
            yield item

with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
    workflow_api = api.workflow(
        resource_settings=ResourceSettings(cores=1),
        config_settings=ConfigSettings(),
        snakefile=Path("workflow/Snakefile").resolve(),
        workdir=Path.cwd(),
    )
    workflow_api.dag(DAGSettings(forceall=True))
    workflow = workflow_api._workflow
    workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
    workflow._build_dag()
    jobs = [
        {
            "rule": job.rule.name,
            "wildcards": dict(job.wildcards_dict),
            "input": sorted(set(map(str, job.input))),
            "ancient": sorted({str(f) for f in job.input if is_flagged(f, "ancient")}),
            "output": sorted(set(map(str, job.output))),
            "benchmark": str(job.benchmark) if job.benchmark else None,
            "directories": sorted({str(f) for f in job.output if is_flagged(f, "directory")}),
        }
        for job in workflow.dag.jobs
    ]
    declared_ancient = sorted(
        [rule.name, str(f)] for rule in workflow.rules for f in declared(rule.input) if is_flagged(f, "ancient")
    )
json.dump({"jobs": jobs, "declared_ancient": declared_ancient}, sys.stdout)
"""


def read_dag(workdir: Path) -> dict:
    """The jobs of the default config's DAG in ``workdir`` and the ancient inputs the rules declare (:data:`_DAG`)."""
    env = dict(os.environ, PYTHONPATH=str(workdir))
    proc = subprocess.run(
        [sys.executable, "-c", _DAG], cwd=workdir, env=env, capture_output=True, text=True, timeout=300
    )
    if proc.returncode != 0:
        raise AssertionError(f"reading the DAG failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout)


def frozen_inputs(dag: dict) -> list[str]:
    """Every input that Snakemake would not compare with its job's outputs: ``rule[wildcards]: file`` lines."""
    lines = [f"{j['rule']}[{j['wildcards']}]: {f}" for j in dag["jobs"] if j["rule"] != "all" for f in j["ancient"]]
    return lines + [f"{rule} (declared): {f}" for rule, f in dag["declared_ancient"]]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return copy_workflow(tmp_path_factory.mktemp("reruns"))


@pytest.fixture(scope="module")
def dag(work: Path) -> dict:
    return read_dag(work)


def test_no_input_of_any_job_is_ancient(dag: dict) -> None:
    assert len(dag["jobs"]) > 50, "the default config's DAG is unexpectedly small"
    frozen = frozen_inputs(dag)
    assert not frozen, "inputs that never make their job rerun (flagged ancient):\n" + "\n".join(frozen)


def materialise(work: Path, jobs: list[dict]) -> None:
    """Make ``work`` a finished run: every job's outputs and benchmark file exist, each job's newer than every file it
    reads (the checkout's files oldest, then the outputs of a job at depth d of the DAG, d jobs above it, at 10 (d + 1)
    s later)."""
    producer = {f: i for i, j in enumerate(jobs) for f in j["output"]}
    depth: dict[int, int] = {}

    def depth_of(i: int) -> int:
        if i not in depth:
            above = [depth_of(producer[f]) for f in jobs[i]["input"] if f in producer and producer[f] != i]
            depth[i] = 1 + max(above, default=-1)
        return depth[i]

    start = max(p.stat().st_mtime for p in work.rglob("*") if p.is_file())
    for i, job in enumerate(jobs):
        stamp = start + 10 * (depth_of(i) + 1)
        for name in [*job["output"], *([job["benchmark"]] if job["benchmark"] else [])]:
            path = work / name
            if name in job["directories"]:
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            os.utime(path, (stamp, stamp))


def scheduled(out: str) -> dict[str, list[str]]:
    """The rules of a dry run's jobs (``all`` left out), each with its jobs' reasons."""
    found: dict[str, list[str]] = {}
    rule = None
    for line in out.splitlines():
        head = re.match(r"^(?:local)?rule (\S+):$", line)
        if head:
            rule = head.group(1)
        elif rule not in (None, "all") and line.startswith("    reason:"):
            found.setdefault(rule, []).append(line.split(":", 1)[1].strip())
    return found


def test_a_newer_table_reruns_the_figure_that_reads_it(work: Path, dag: dict) -> None:
    """A rewritten phenomena table (``results/phenomena/table.nc``) reruns the figure that draws it and the runtimes
    table (which follows every rerun), nothing else, in a finished run of the default config."""
    materialise(work, [j for j in dag["jobs"] if j["rule"] != "all"])
    table = work / "results/phenomena/table.nc"
    later = max(p.stat().st_mtime for p in (work / "results").rglob("*")) + 10
    os.utime(table, (later, later))
    jobs = scheduled(snakemake(work, "-n", "--cores", "1", "--rerun-triggers", "mtime", timeout=300).stdout)
    assert set(jobs) == {"phenomena", "runtimes"}, jobs
    assert all("Updated input files: results/phenomena/table.nc" in reason for reason in jobs["phenomena"]), jobs


def test_an_ancient_output_object_is_caught(tmp_path: Path) -> None:
    """The flag check fails on the flag that froze the phenomena figure: ``ancient()`` around the ``TARGETS`` entries
    (shared output objects) in the runtimes rule also freezes ``results/phenomena/table.nc`` for the figure."""
    work = copy_workflow(tmp_path)
    rules = work / "workflow/rules/report.smk"
    text = rules.read_text()
    assert "        results=REPORT_INPUTS,\n" in text, "the runtimes rule's inputs moved: update this test"
    frozen_object = "        results=[ancient(f) for f in REPORT_INPUTS],\n"
    rules.write_text(text.replace("        results=REPORT_INPUTS,\n", frozen_object))
    frozen = frozen_inputs(read_dag(work))
    assert "phenomena[{}]: results/phenomena/table.nc" in frozen, "\n".join(frozen)


def upstream_rules(jobs: list[dict], target: dict) -> set[str]:
    """The rules of every job that ``target`` waits for, directly or through another job."""
    producer = {f: j for j in jobs for f in j["output"]}
    seen: set[int] = set()
    todo = [target]
    while todo:
        job = todo.pop()
        for f in job["input"]:
            if f in producer and id(producer[f]) not in seen:
                seen.add(id(producer[f]))
                todo.append(producer[f])
    return {producer_job["rule"] for producer_job in jobs if id(producer_job) in seen}


def test_no_wings_verdicts_wait_for_another_wings_results(dag: dict) -> None:
    """Each wing's summary job waits only for the results its claims read: the pretrained phenomena's verdicts need no
    training, sweep or circle; the circle's need no model; every wing's summary is a job of its own that the run's
    summary.json gathers."""
    jobs = [j for j in dag["jobs"] if j["rule"] != "all"]
    wings = {j["wildcards"]["wing"]: j for j in jobs if j["rule"] == "wing_summary"}
    assert set(wings) == {"rank_collapse", "series", "circle", "paths", "theory", "propagation", "vision", "phenomena"}
    experiments = {"circle_train", "paths_train", "propagation_sweep", "theorem_sweep", "series_train"}
    assert experiments <= {j["rule"] for j in jobs}, "an experiment rule was renamed: update this test"
    assert not upstream_rules(jobs, wings["phenomena"]) & experiments, upstream_rules(jobs, wings["phenomena"])
    assert not upstream_rules(jobs, wings["rank_collapse"]) & (experiments | {"vision_model"})
    circle = upstream_rules(jobs, wings["circle"])
    assert "circle_train" in circle and not circle & {"acquire_model", "rank_collapse", "paths_train"}, circle
    summary = next(j for j in jobs if j["rule"] == "summary")
    assert set(summary["input"]) >= {wings[w]["output"][0] for w in wings}
