"""Benchmark of the GGUF acquisition: peak resident memory and wall time of dequantising each GGUF model of the run
tensor by tensor (:func:`san.models.sources.gguf.write_dequantised`: the config and the float32 safetensors
weights), against the float32 weights' size and the memory the acquisition job declares (``models.<name>.mem_mb``),
and, with ``--whole``, of transformers' whole-model GGUF loader on the same file (``from_pretrained(gguf_file=...)``,
which holds every dequantised tensor at once).

Each measurement runs in a fresh interpreter (its peak resident memory is the kernel's high-water mark,
``ru_maxrss``, the imports included) on the GGUF file reassembled from its installed distributions
(requirements/weights.txt, and requirements/weights-large.txt for the 1.5B of config/qwen-1.5b.yaml). The
tokenizer and the sanity check, which the acquisition job adds, are not part of it.

    python benchmarks/bench_gguf.py [--models SmolLM2-135M-Instruct ...] [--whole] [--config config/qwen-1.5b.yaml]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from _common import ROOT, write_table

#: run in a fresh interpreter: argv[1] the folder, argv[2] the GGUF file name, argv[3] the family, argv[4] "tensors"
#: or "whole"; prints the resident memory after the imports, the high-water mark (bytes) and the wall time (s)
MEASURE = """
import json, resource, sys, time
from pathlib import Path
import torch
from san.models.families import family
from san.models.sources.gguf import gguf_parsed_once, write_dequantised
after_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
folder, name, fam, how = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
start = time.perf_counter()
with gguf_parsed_once():
    if how == "tensors":
        write_dequantised(folder, name, fam)
    else:
        family(fam).lm_cls.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"imports_bytes": after_imports, "peak_rss_bytes": peak, "wall_s": wall}))
"""

COLUMNS = [
    ("model", "{model}"),
    ("GGUF file", "{gguf_bytes:.2f@GiB} GiB"),
    ("float32 weights", "{float32_bytes:.2f@GiB} GiB"),
    ("tensor by tensor: peak RSS", "{peak_rss_bytes:.2f@GiB} GiB"),
    ("peak / float32 weights", "{peak_ratio:.2f} x"),
    ("peak / declared mem_mb", "{declared_ratio:.2f} x"),
    ("wall", "{wall_s:.0f} s"),
    ("whole model (transformers): peak RSS", "{whole_peak_rss_bytes:.2f@GiB} GiB"),
    ("whole model: wall", "{whole_wall_s:.0f} s"),
    ("target (peak <= 1.25 x declared)", "{declared_ratio:<={target}?met|NOT met}"),
]


def gguf_models(cfg: dict) -> dict[str, dict]:
    """The config's models whose pretrained weights are a GGUF file of installed distributions."""
    return {
        name: spec for name, spec in cfg["models"].items() if (spec.get("pretrained") or {}).get("format") == "gguf"
    }


def reassemble(spec: dict, folder: Path) -> Path:
    """The GGUF file of a ``package_parts`` entry concatenated from its installed distributions into ``folder``."""
    from san.models.sources.package import _reassemble

    target = folder / spec["pretrained"]["file_name"]
    _reassemble(spec["pretrained"]["parts"], target)
    return target


def float32_bytes(folder: Path) -> int:
    """The bytes of the float32 weights written into ``folder`` (from the safetensors headers)."""
    import numpy as np
    from safetensors import safe_open

    total = 0
    for shard in folder.glob("*.safetensors"):
        with safe_open(shard, "np") as fh:
            total += sum(4 * int(np.prod(fh.get_slice(k).get_shape())) for k in fh.keys())  # noqa: SIM118
    return total


def measure(folder: Path, name: str, family: str, how: str) -> dict:
    """One measurement of :data:`MEASURE` in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(folder), name, family, how],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", help="models of the config (default: every GGUF model)")
    parser.add_argument("--config", help="an overlay laid over config.yaml (e.g. config/qwen-1.5b.yaml)")
    parser.add_argument("--whole", action="store_true", help="also measure transformers' whole-model loader")
    args = parser.parse_args()
    from san.core.config import overlay_config

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    if args.config:
        cfg = overlay_config(cfg, yaml.safe_load((ROOT / args.config).read_text()))
    models = gguf_models(cfg)
    rows = []
    for name in args.models or list(models):
        spec = models[name]
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            gguf = reassemble(spec, folder)
            got = measure(folder, gguf.name, spec["family"], "tensors")
            weights = float32_bytes(folder)
            whole = measure(folder, gguf.name, spec["family"], "whole") if args.whole else {}
            declared = spec.get("mem_mb", 2000) * 2**20
            rows.append(
                {
                    "model": name,
                    "gguf_bytes": gguf.stat().st_size,
                    "float32_bytes": weights,
                    "peak_rss_bytes": got["peak_rss_bytes"],
                    "peak_ratio": got["peak_rss_bytes"] / weights,
                    "declared_ratio": got["peak_rss_bytes"] / declared,
                    "wall_s": got["wall_s"],
                    "whole_peak_rss_bytes": whole.get("peak_rss_bytes", float("nan")),
                    "whole_wall_s": whole.get("wall_s", float("nan")),
                }
            )
    write_table(
        "bench_gguf",
        COLUMNS,
        rows,
        values={"target": 1.25},
        note="Each model's GGUF file dequantised in a fresh interpreter (imports included in the peak), on 2 CPUs.",
    )


if __name__ == "__main__":
    main()
