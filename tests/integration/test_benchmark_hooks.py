"""The hooks the benchmarks put on their jobs' interpreters (``sitecustomize`` modules), each in a fresh interpreter:
bench_cpu_against's CPU record of every job, bench_gpu's one-ulp perturbation of every input."""

import importlib.util
import json
import os
import subprocess
import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))  # the scripts' own folder, as when they run


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cpu_hook_records_the_job_and_its_cpu_at_exit(tmp_path):
    bench = _script("bench_cpu_against")
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


def test_the_perturbation_hook_moves_every_draw_by_one_ulp(tmp_path):
    """The sitecustomize module the perturbed CPU run puts on its jobs' path: each draw of san.core.rng.randn is
    the unperturbed draw moved by exactly one ulp, up or down (both directions occur); without SAN_ULP_SEED it does
    nothing."""
    bench = _script("bench_gpu")
    (tmp_path / "sitecustomize.py").write_text(bench.ULP_HOOK)
    code = (
        "import numpy as np, torch\n"
        "from san.core.rng import cpu_generator, randn\n"
        "x = randn((200,), cpu_generator(3), torch.float64).numpy()\n"
        "ref = torch.randn((200,), generator=cpu_generator(3), dtype=torch.float64).numpy()\n"
        "up, down = np.nextafter(ref, np.inf), np.nextafter(ref, -np.inf)\n"
        "print(int((x == up).sum()), int((x == down).sum()), int((x == ref).sum()))\n"
    )

    def run(seed: str | None) -> list[int]:
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
        env.pop("SAN_ULP_SEED", None)
        if seed is not None:
            env["SAN_ULP_SEED"] = seed
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return [int(n) for n in out.stdout.strip().splitlines()[-1].split()]

    up, down, same = run("7")
    assert up + down == 200 and up > 50 and down > 50 and same == 0
    assert run(None) == [0, 0, 200]
