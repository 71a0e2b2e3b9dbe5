"""The workflow's layout promises: one name per thing, documented rules, one resources table, a torch-free parse."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import ROOT, copy_workflow

RULES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))


def rule_blocks() -> dict[str, str]:
    """Each rule's text, by name, from the rules files."""
    blocks: dict[str, str] = {}
    for path in RULES:
        parts = re.split(r"^rule (\w+):\n", path.read_text(), flags=re.M)
        blocks.update(dict(zip(parts[1::2], parts[2::2], strict=True)))
    return blocks


def target_rules(blocks: dict[str, str]) -> set[str]:
    """Rules that only request results (docstring "Target: ..."), and the default target."""
    return {name for name, text in blocks.items() if '"""Target:' in text.split("\n\n\n")[0]} | {"all"}


def test_rule_script_log_and_benchmark_share_the_rule_name():
    blocks = rule_blocks()
    assert {"fig2", "fig3", "fig4", "theorem"} <= target_rules(blocks)
    for name, text in blocks.items():
        body = text.split("\n\n\n")[0]
        assert re.match(r'\s+"""\S', body), f"rule {name} has no docstring"
        if name in target_rules(blocks):
            continue
        script = re.search(r'"\.\./\.\./scripts/(\w+)\.py"', body)
        assert script and script.group(1) == name, f"rule {name} runs {script and script.group(1)}"
        assert re.search(rf'"logs/{name}[/.]', body), f"rule {name}: log not under logs/{name}"
        assert re.search(rf"benchmarks/{name}[/.]", body), f"rule {name}: benchmark not under benchmarks/{name}"


def figure_stems(body: str) -> list[str]:
    """The literal start of every figure a rule writes (``results/figures/<stem>.<ext>``), up to its first
    wildcard or formatted part: ``figures("circle")`` gives ``circle``, ``figures(f"propagation_{s}")`` gives
    ``propagation_``."""
    outputs = body.split("    output:", 1)[1].split("\n    log:", 1)[0] if "    output:" in body else ""
    stems = re.findall(r'figures\(f?"([^"{]*)', outputs)
    stems += re.findall(r"/figures/([^\"{]*)", outputs)
    return stems


def test_figure_stems_are_read_from_the_outputs():
    body = '    """Doc."""\n    output:\n        a=figures("circle"),\n        b=figures(f"propagation_{s}"),\n'
    body += '        c=expand(f"{RESULTS}/figures/rank_collapse_model_{{{{model}}}}.{{ext}}"),\n    log:\n'
    assert figure_stems(body) == ["circle", "propagation_", "rank_collapse_model_"]


def test_every_figure_is_named_after_the_rule_that_writes_it():
    """A figure's file is ``<rule>.<ext>``, or ``<rule>_<part>.<ext>`` for a rule that writes several (one per
    model, sweep or scale); its report caption ``workflow/report/<figure>.rst`` shares the name, and no rule with a
    longer name would claim it."""
    blocks = rule_blocks()
    writers = {name: figure_stems(text.split("\n\n\n")[0]) for name, text in blocks.items()}
    assert {"circle", "path_effectiveness", "path_length_distribution", "theorem_bound"} <= {
        name for name, stems in writers.items() if stems
    }
    for name, stems in writers.items():
        for stem in stems:
            assert stem == name or stem.startswith(f"{name}_"), f"rule {name} writes figure {stem}*"
            claims = [other for other in blocks if stem == other or stem.startswith(f"{other}_")]
            assert max(claims, key=len) == name, f"figure {stem}* reads as rule {max(claims, key=len)}'s"
        captions = re.findall(r'caption=caption\(f?"([^"{]*)', blocks[name].split("\n\n\n")[0])
        for cap in captions if stems else []:
            assert cap == name or cap.startswith(f"{name}_"), f"rule {name}: caption {cap}"
            assert list((ROOT / "workflow" / "report").glob(f"{cap}*.rst")), f"no caption template {cap}*.rst"


def test_resources_table_lists_exactly_the_rules():
    table = yaml.safe_load((ROOT / "workflow" / "resources.yaml").read_text())
    blocks = rule_blocks()
    jobs = set(blocks) - target_rules(blocks)
    assert set(table) == jobs, f"missing: {sorted(jobs - set(table))}, stale: {sorted(set(table) - jobs)}"
    for rule, res in table.items():
        assert set(res) == {"mem_mb", "disk_mb", "runtime"} and all(v > 0 for v in res.values()), rule


@pytest.mark.slow
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


TORCH_FREE = (
    "san.experiments",
    "san.models.spec",
    "san.models.folders",
    "san.core.plotting",
    "san.core.compare",
    "san.rank_collapse.plots",
    "san.circle.results",
    "san.circle.plots",
    "san.paths.counts",
    "san.paths.plots",
    "san.report.captions",
    "san.rank_collapse.claims",
    "san.circle.claims",
    "san.paths.claims",
    "san.report.runtimes",
    "san.theory.claims",
    "san.theory.plots",
    "san.propagation.claims",
    "san.propagation.plots",
)


@pytest.mark.slow
def test_figure_table_and_report_modules_import_no_torch(tmp_path: Path):
    """Figure, table, gather and report jobs start without importing torch (seconds of start-up per job)."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise ImportError("torch imported")\n')
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in TORCH_FREE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_costliest_path_chains_are_scheduled_first(default_config):
    """The priorities follow the tasks' arithmetic, in the order of their measured training times."""
    import copy

    from san.experiments import check_config
    from san.paths.spec import priorities

    cfg = copy.deepcopy(default_config)
    slices = check_config(cfg, ROOT / "workflow" / "schemas")["paths"]
    ev = cfg["paths"]["evaluation"]
    prio = priorities(slices, ev["n_paths"], ev["n_repeats"])
    assert sorted(prio, key=prio.get) == ["sorting", "sorting_10k", "convex_hull", "memorization"]
    cfg["paths"]["sorting"]["data"]["n_train"] = 10**6  # a bigger task moves forward
    slices = check_config(cfg, ROOT / "workflow" / "schemas")["paths"]
    assert max(priorities(slices, ev["n_paths"], ev["n_repeats"]).items(), key=lambda kv: kv[1])[0] == "sorting"


@pytest.mark.slow
def test_rank_collapse_priorities_follow_the_models_cost_below_the_path_chains(default_config, tmp_path):
    """The rank-collapse jobs start with the costliest model (the measured order of their jobs' times: MPNet's two
    float64 weight sets, SmolLM2's 30 layers, Gemma-3 before the base-size encoders, MiniLM last), all in (0, 0.5]
    so that the path-effectiveness chains (priority >= 1) go first; a model made bigger moves forward. The dry run
    shows the rules' priorities: a pretrained acquisition adds 0.5."""
    import copy

    from san.experiments import check_config
    from san.rank_collapse.spec import model_priorities

    cfg = copy.deepcopy(default_config)
    check_config(cfg, ROOT / "workflow" / "schemas")
    prio = model_priorities(cfg)
    order = sorted(prio, key=prio.get, reverse=True)
    assert order[:3] == ["all-mpnet-base-v2", "SmolLM2-135M-Instruct", "gemma-3-270m"]
    assert order[-1] == "all-MiniLM-L6-v2"
    assert all(0 < p <= 0.5 for p in prio.values())
    cfg["models"]["all-MiniLM-L6-v2"]["init"]["config"]["num_hidden_layers"] = 96
    assert max(model_priorities(cfg).items(), key=lambda kv: kv[1])[0] == "all-MiniLM-L6-v2"
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "2", "results/rank_collapse/gemma-3-270m.nc"],
        cwd=copy_workflow(tmp_path / "wf"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    jobs = {
        (m.group(1), m.group(2).strip()): float(m.group(3))
        for m in re.finditer(
            r"rule (\w+):\n(?:    .*\n)*?    wildcards: (.*)\n(?:    .*\n)*?    priority: ([0-9.]+)", out
        )
    }
    gemma = prio["gemma-3-270m"]
    assert jobs[("acquire_model", "model=gemma-3-270m, weights=pretrained")] == gemma + 0.5
    assert jobs[("acquire_model", "model=gemma-3-270m, weights=init")] == gemma
    assert jobs[("rank_collapse", "model=gemma-3-270m")] == gemma
