"""Benchmark of the exact path-length decomposition (:mod:`san.paths.decomposition`): CPU seconds per task.

For every task it decomposes the stored trained SANs of every seed (``<results>/paths/<task>/model.safetensors``
and its ``data.npz``, as the ``paths_decompose`` rule does; nothing is retrained) and their initialisations, each on
its seed's evaluation set, in float64, and prints the process CPU time of the whole job (both weight states of every
seed, reconstruction, norms and accuracies) and per seed, against the target of 60 s per seed. Without stored
results the models are built at their initialisation from the config (timing does not depend on the weights) and
the data regenerated.
Best of ``--rounds`` runs: robust to other jobs on a shared machine.

    python benchmarks/bench_paths_decompose.py [--results results] [--tasks sorting convex_hull] [--threads 1]
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from _common import ROOT

from san.core.config import validate_config
from san.paths.decomposition import initial_model, run
from san.paths.experiment import seed_data, seed_tasks
from san.paths.model import SAN
from san.paths.spec import task_slices
from san.paths.tasks import chance_accuracy

TARGET_S = 60.0


def load_task(results: Path, name: str, tcfg: dict) -> tuple[SAN, list, list, str]:
    """The stored SAN (every seed) and data of a task, or (without them) its initialisation and freshly built
    data."""
    folder = results / "paths" / name
    if (folder / "model.safetensors").is_file() and (folder / "data.npz").is_file():
        model, _ = SAN.load(str(folder / "model.safetensors"))
        with np.load(folder / "data.npz") as arrays:
            trains, evs = seed_data(arrays, model.seeds)
        return model, trains, evs, "stored"
    tasks = seed_tasks(tcfg)
    model = SAN(tasks[0].model_config, list(tcfg["seeds"])).eval()
    return model, [t.train for t in tasks], [t.eval for t in tasks], "initialisation"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--results", default=str(ROOT / "results"))
    ap.add_argument("--tasks", nargs="+", default=None)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the rule uses 1)")
    ap.add_argument("--rounds", type=int, default=1, help="repeats per task; the fastest counts")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    cfg = yaml.safe_load(Path(args.config).read_text())
    validate_config(cfg, ROOT / "workflow/schemas/config.schema.yaml")
    slices = task_slices(cfg["paths"], ROOT / "workflow/schemas/paths.schema.yaml")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), target < {TARGET_S:.0f} CPU s per seed")
    print(f"{'task':<14}{'weights':<16}{'seeds':>6}{'inputs':>8}{'tokens':>9}{'L':>3}{'H':>3}{'d':>5}{'CPU s':>9}"
          f"{'per seed':>9}{'wall s':>9}  ok")  # fmt: skip
    for name in args.tasks or cfg["paths"]["tasks"]:
        model, trains, evs, source = load_task(Path(args.results), name, copy.deepcopy(slices[name]))
        seeds, c = model.seeds, model.cfg
        best_cpu = best_wall = float("inf")
        for _ in range(args.rounds):
            c0, t0 = time.process_time(), time.perf_counter()
            chances = [chance_accuracy(t.labels, ev.labels, c.n_classes) for t, ev in zip(trains, evs, strict=True)]
            ds = run(model, evs, initial_model(model), chances)
            best_cpu = min(best_cpu, time.process_time() - c0)
            best_wall = min(best_wall, time.perf_counter() - t0)
        ev, per_seed = evs[0], best_cpu / len(seeds)
        print(
            f"{name:<14}{source:<16}{len(seeds):>6}{len(ev):>8}{ev.inputs.shape[0] * ev.inputs.shape[1]:>9}"
            f"{c.n_layers:>3}{c.n_heads:>3}{c.dim:>5}{best_cpu:>9.1f}{per_seed:>9.1f}{best_wall:>9.1f}"
            f"  {'yes' if per_seed < TARGET_S else 'NO'}"
            f"  (max reconstruction error {float(ds['reconstruction_error'].max()):.1e})"
        )


if __name__ == "__main__":
    main()
