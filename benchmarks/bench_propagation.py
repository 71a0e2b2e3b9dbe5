"""CPU seconds of each propagation sweep of a config (default: the workflow's config.yaml).

python benchmarks/bench_propagation.py [config.yaml] [sweep ...]
"""

import sys
import time
from pathlib import Path

import torch
import yaml
from _common import ROOT

from san.propagation.experiment import run


def main(argv: list[str]) -> None:
    path = Path(argv[0]) if argv and argv[0].endswith(".yaml") else ROOT / "config.yaml"
    names = [a for a in argv if not a.endswith(".yaml")]
    cfg = yaml.safe_load(path.read_text())["propagation"]
    torch.set_num_threads(int(cfg.get("threads", 2)))
    total = 0.0
    for name, sweep in cfg["sweeps"].items():
        if names and name not in names:
            continue
        start, wall = time.process_time(), time.perf_counter()
        ds = run(name, {**sweep, "residuals": cfg["residuals"]}, "cpu")
        cpu = time.process_time() - start
        total += cpu
        print(f"{name:16s} {cpu:7.1f} s CPU {time.perf_counter() - wall:7.1f} s wall  {dict(ds.sizes)}")
    print(f"{'total':16s} {total:7.1f} s CPU")


if __name__ == "__main__":
    main(sys.argv[1:])
