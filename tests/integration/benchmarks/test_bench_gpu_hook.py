"""benchmarks/bench_gpu.py's perturbation hook, in the process of a job: each random draw moved by one ulp."""

import importlib.util
import os
import subprocess
import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))  # the script's own folder, as when it runs
spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "bench_gpu.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_the_perturbation_hook_moves_every_draw_by_one_ulp(tmp_path):
    """The sitecustomize module the perturbed CPU run puts on its jobs' path: each draw of san.core.rng.randn is
    the unperturbed draw moved by exactly one ulp, up or down (both directions occur); without SAN_ULP_SEED it does
    nothing."""
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
