"""The workflow's layout promises: one name per thing, documented rules, one resources table, a torch-free parse."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from helpers import ROOT, copy_workflow

RULES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))
TARGET_RULES = {"all", "fig2", "fig3", "fig4"}


def rule_blocks() -> dict[str, str]:
    """Each rule's text, by name, from the rules files."""
    blocks: dict[str, str] = {}
    for path in RULES:
        parts = re.split(r"^rule (\w+):\n", path.read_text(), flags=re.M)
        blocks.update(dict(zip(parts[1::2], parts[2::2], strict=True)))
    return blocks


def test_rule_script_log_and_benchmark_share_the_rule_name():
    blocks = rule_blocks()
    assert blocks, "no rules found"
    for name, text in blocks.items():
        body = text.split("\n\n\n")[0]
        assert re.match(r'\s+"""\S', body), f"rule {name} has no docstring"
        if name in TARGET_RULES:
            continue
        script = re.search(r'"\.\./\.\./scripts/(\w+)\.py"', body)
        assert script and script.group(1) == name, f"rule {name} runs {script and script.group(1)}"
        assert re.search(rf'"logs/{name}[/.]', body), f"rule {name}: log not under logs/{name}"
        assert re.search(rf"benchmarks/{name}[/.]", body), f"rule {name}: benchmark not under benchmarks/{name}"


def test_resources_table_lists_exactly_the_rules():
    table = yaml.safe_load((ROOT / "workflow" / "resources.yaml").read_text())
    jobs = set(rule_blocks()) - TARGET_RULES
    assert set(table) == jobs, f"missing: {sorted(jobs - set(table))}, stale: {sorted(set(table) - jobs)}"
    for rule, res in table.items():
        assert set(res) == {"mem_mb", "runtime"} and all(v > 0 for v in res.values()), rule


def test_dry_run_needs_no_torch(tmp_path: Path):
    """`snakemake -n` parses and plans the workflow in an environment where importing torch fails."""
    fake = tmp_path / "notorch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("torch is not installed here")\n')
    wf = copy_workflow(tmp_path / "wf")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.parent), str(wf)]))
    probe = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "not installed here" in probe.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "all", "fig2", "fig3", "fig4", "all"],
        cwd=wf,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "paths_train" in proc.stdout and "circle_train" in proc.stdout
