"""benchmarks/bench_cpu_against.py's CPU hook, in the process of a job: it records the job and its CPU time at exit."""

import importlib.util
import json
import subprocess
import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))  # the script's own folder, as when it runs
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
