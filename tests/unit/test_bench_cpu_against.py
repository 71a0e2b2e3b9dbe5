"""benchmarks/bench_cpu_against.py: the CPU hook records each job, and the comparison groups and restricts jobs as
issue 16 counted them."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_cpu_against", ROOT / "benchmarks" / "bench_cpu_against.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_hook_records_the_job_and_its_cpu_at_exit(tmp_path):
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(bench.HOOK)
    log = tmp_path / "cpu.jsonl"
    job = (
        "import types; snakemake = types.SimpleNamespace(rule='rank_collapse', "
        "wildcards=types.SimpleNamespace(items=lambda: [('model', 'bert')])); sum(range(10**6))"
    )
    env = {"PYTHONPATH": str(tmp_path / "hook"), "SAN_CPU_HOOK_LOG": str(log), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", job], env=env, check=True)
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    first, second = (json.loads(line) for line in log.read_text().splitlines())
    assert first["job"] == {"rule": "rank_collapse", "wildcards": {"model": "bert"}} and first["cpu"] > 0
    assert second["job"] is None


def test_groups_restrict_per_model_rules_to_the_earlier_models(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    records = [
        {"job": {"rule": "paths_train", "wildcards": {"task": "sorting"}}, "cpu": 10.0},
        {"job": {"rule": "circle_train", "wildcards": {"seed": "0"}}, "cpu": 2.0},
        {"job": {"rule": "rank_collapse", "wildcards": {"model": "bert"}}, "cpu": 5.0},
        {"job": {"rule": "tokenize", "wildcards": {"model": "bert", "weights": "init"}}, "cpu": 1.0},
        {"job": {"rule": "summary", "wildcards": {}}, "cpu": 3.0},
        {"job": None, "cpu": 99.0},
    ]
    (old / bench.HOOK_LOG).write_text("".join(json.dumps(r) + "\n" for r in records))
    new = tmp_path / "new"
    logs = {
        "paths_train/sorting.log": 9.0,
        "circle_train/h8_s0.log": 1.0,
        "rank_collapse/bert.log": 4.0,
        "rank_collapse/gpt2.log": 50.0,  # a model the earlier default did not have
        "tokenize_inputs/bert/init.log": 0.5,
        "acquire_model/gpt2/init.log": 7.0,
        "theorem_sweep.log": 20.0,  # an experiment the earlier default did not have
    }
    for rel, cpu in logs.items():
        (new / "logs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (new / "logs" / rel).write_text(f"x INFO job cpu time: 1.00 s\nx INFO job cpu time: {cpu:.2f} s (user)\n")
    old_jobs = bench.old_jobs(old)
    models = {w["model"] for rule, w, _ in old_jobs if rule == "rank_collapse"}
    before, after = bench.by_group(old_jobs, models), bench.by_group(bench.new_jobs(new), models)
    assert before == {
        "path-effectiveness training": (1, 10.0),
        "path evaluation": (0, 0.0),
        "circle (training, gathering)": (1, 2.0),
        "rank collapse": (1, 5.0),
        "acquisition, tokenisation, path products": (1, 1.0),
    }
    assert after == {
        "path-effectiveness training": (1, 9.0),
        "path evaluation": (0, 0.0),
        "circle (training, gathering)": (1, 1.0),
        "rank collapse": (1, 4.0),
        "acquisition, tokenisation, path products": (1, 0.5),
    }
