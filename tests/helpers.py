"""Shared test helpers: a copy of the workflow in a temporary folder, Snakemake runs in it, and the one tiny config
(``tests/config/tiny.yaml``, an overlay on config.yaml that shrinks every experiment to seconds per job)."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from san.core import compare
from san.core.config import overlay_config

ROOT = Path(__file__).resolve().parents[1]
TINY = Path(__file__).resolve().parent / "config" / "tiny.yaml"


def installed(distribution: str) -> bool:
    """Whether a distribution is installed (e.g. a weights package of requirements/weights.txt)."""
    import importlib.metadata

    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def default_config() -> dict:
    """The parsed config.yaml (the embedded offline default)."""
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def tiny_config(default: dict | None = None) -> dict:
    """``default`` (config.yaml unless given) with tests/config/tiny.yaml laid over it: every experiment shrunk to
    seconds per job, one task, one tiny model; the input is not changed."""
    overlay = yaml.safe_load(TINY.read_text())
    return overlay_config(default if default is not None else default_config(), overlay)


@functools.cache
def _theory_sweep() -> Any:
    from san.core.config import validate_config
    from san.theory.experiment import run

    cfg = tiny_config()
    validate_config(cfg, ROOT / "workflow/schemas/config.schema.yaml")
    return run(cfg["theory"])


def tiny_theory_sweep() -> Any:
    """The theorem sweep (``san.theory.experiment.run``) of the tiny config, computed once per session; each call
    returns its own deep copy, which a test may edit."""
    return _theory_sweep().copy(deep=True)


def copy_workflow(dest: Path) -> Path:
    """Copy the workflow (not results, not the venv) into ``dest`` so a test may edit it freely."""
    return compare.copy_workflow(ROOT, dest)


def snakemake(
    workdir: Path, *args: str, check: bool = True, timeout: int = 1200, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``python -m snakemake`` in ``workdir`` with this interpreter; the library is imported from the copy
    (``env``: variables set for it on top of this process's)."""
    env = dict(os.environ, **(env or {}), PYTHONPATH=str(workdir), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def planned_jobs(workdir: Path, *targets: str) -> dict[str, int]:
    """Rules and job counts that a dry run of ``targets`` would execute (empty when nothing is to be done)."""
    out = snakemake(workdir, "-n", "--cores", "1", *targets)
    text = out.stdout + out.stderr
    if "Nothing to be done" in text:
        return {}
    stats = text.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", stats, re.M)}


def write_config(workdir: Path, config: dict, name: str = "config.yaml") -> Path:
    path = workdir / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# The training settings and the small sorting task of the path-effectiveness training tests (tests/unit/paths/,
# tests/integration/paths/).
PATHS_TRAIN = {
    "epochs": 12,
    "batch_size": 16,
    "optimizer": "adam",
    "lr": 3e-3,
    "betas": [0.9, 0.999],
    "eps": 1e-8,
    "weight_decay": 0.0,
    "schedule": {"kind": "constant"},
    "max_grad_norm": None,
    "shuffle": True,
    "compile": False,
}
PATHS_SORT = {
    "seed": 0,
    "data": {"seq_len": 5, "vocab_size": 4, "n_train": 256, "n_eval": 128},
    "model": {"n_layers": 2, "n_heads": 2, "dim": 16, "dropout": 0.1},
}


# Config edits of the bad-config batteries (tests/unit/core/test_config_battery.py and its workflow cases).


def set_key(dotted: str, value):
    """An edit setting the dotted key (list indices as numbers) to ``value``."""

    def edit(cfg):
        *parents, last = dotted.split(".")
        node = cfg
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return edit


def rename_key(section: list[str], old: str, new: str):
    """An edit renaming the mapping entry ``old`` of the mapping at ``section`` to ``new``."""

    def edit(cfg):
        node = cfg
        for part in section:
            node = node[part]
        node[new] = node.pop(old)

    return edit


def built_workflow(dest: Path, config: dict, targets: list[str]) -> Path:
    """Copy the workflow into ``dest``, write ``config`` and build ``targets`` with two cores."""
    wf = copy_workflow(dest)
    write_config(wf, config)
    snakemake(wf, "--cores", "2", *targets)
    return wf


def rank_collapse_targets(cfg: dict) -> list[str]:
    """The rank-collapse results and figures of ``cfg`` (attention products only for those of
    ``attention_products.models``)."""
    models = cfg["rank_collapse"]["models"]
    products = cfg.get("attention_products", {}).get("models")
    out = []
    for m in models:
        out += [f"results/rank_collapse/{m}.nc"]
        out += [f"results/figures/{s}.{ext}" for s in (f"rank_collapse_model_{m}", f"rank_collapse_model_{m}_log")
                for ext in cfg["figures"]["formats"]]  # fmt: skip
    for m in models if products is None else [p for p in products if p in models]:
        out += [f"results/attention_products/{m}.nc"]
        out += [f"results/figures/attention_products_model_{m}.{ext}" for ext in cfg["figures"]["formats"]]
    return out


# Every job's params as Snakemake records them (the sorted reprs it compares to decide "params have changed"), keyed
# "rule[wildcards]", for the whole workflow (forceall), read through Snakemake's API without running anything.
_JOB_PARAMS = """
import json, sys
from pathlib import Path
from typing import Any
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, Quietness, ResourceSettings

with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
    workflow_api = api.workflow(
        resource_settings=ResourceSettings(cores=1),
        config_settings=ConfigSettings(configfiles=[Path(p).resolve() for p in sys.argv[1:]]),
        snakefile=Path("workflow/Snakefile").resolve(),
        workdir=Path.cwd(),
    )
    workflow_api.dag(DAGSettings(forceall=True))
    workflow = workflow_api._workflow
    workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
    workflow._build_dag()
    params = {f"{job.rule.name}[{job.wildcards_dict}]": workflow.persistence._params(job) for job in workflow.dag.jobs}
json.dump(params, sys.stdout)
"""


def job_params(workdir: Path, *configfiles: Path) -> dict[str, list[str]]:
    """The params of every job of the workflow in ``workdir`` (with ``configfiles`` laid over its config.yaml), as
    Snakemake records and compares them: two runs whose entries are equal rerun nothing for their params."""
    import json

    env = dict(os.environ, PYTHONPATH=str(workdir))
    proc = subprocess.run(
        [sys.executable, "-c", _JOB_PARAMS, *map(str, configfiles)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise AssertionError(f"reading the jobs' params failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout)


def reversed_keys(value: Any) -> Any:
    """``value`` with the keys of every mapping (in lists too) in reverse order: the same config, written otherwise."""
    if isinstance(value, dict):
        return {k: reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(v) for v in value]
    return value


# Synthetic results of the rank-collapse wing, for the claims tests.


def synthetic_rank_collapse(pure_l2: float, skip_last: float) -> Any:
    """A rank-collapse result of one model at init: the SAN curves end at ``pure_l2`` (layer 2) and the float floor,
    the skip variants at ``skip_last``."""
    import numpy as np
    import xarray as xr

    layers = 4
    data = np.empty((1, 4, layers, 3))
    data[0, 0] = data[0, 1] = np.array([0.6, 1e-2, pure_l2, 1e-16])[:, None]
    data[0, 2] = data[0, 3] = np.array([0.6, 0.5, 0.4, skip_last])[:, None]
    return xr.Dataset(
        {"residual_ratio": (("weights", "variant", "layer", "sample"), data)},
        coords={"weights": ["init"], "variant": ["SAN", "SAN+MLP", "SAN+skip", "transformer"], "layer": range(layers)},
    )


def synthetic_pretrained(san_curve, transformer_last=0.5, depth=None):
    """A model with init and pretrained weights and the three measures; the SAN curve is the given one (pretrained)
    in every measure, divided by 10 in the Frobenius one."""
    import numpy as np
    import xarray as xr

    layers = len(san_curve)
    data = np.full((2, 4, layers, 2), 0.6)
    data[1, 0] = np.asarray(san_curve)[:, None]
    data[1, 3, -1] = transformer_last
    coords = {"weights": ["init", "pretrained"], "variant": ["SAN", "SAN+MLP", "SAN+skip", "transformer"]}
    coords["layer"] = range(layers)
    dims = ("weights", "variant", "layer", "sample")
    frob = data.copy()
    frob[1, 0] /= 10
    return xr.Dataset(
        {
            "residual_ratio": (dims, data),
            "residual_ratio_no_first": (dims, data),
            "residual_ratio_frobenius": (dims, frob),
        },
        coords=coords,
    )


# A tiny offline training series (four steps, checkpoints at 0, 1, 2 and 4) whose checkpoints the hub-series tests
# serve as branches of one repository.
TINY_SERIES = {
    "model": {"layers": 2, "width": 16, "heads": 2, "intermediate": 32, "context": 16},
    "vocabulary": 200,
    "seq_len": 16,
    "batch_size": 4,
    "learning_rate": 3e-3,
    "steps": 4,
    "every": 4,
    "log_until": 2,
}


def train_tiny_series(out: Path) -> Path:
    """Train :data:`TINY_SERIES` (seed 0) on the first 20 documents of the pinned text into ``out``."""
    from san.core.text import pydoc_documents
    from san.rank_collapse.series.train import train

    train(TINY_SERIES, 0, pydoc_documents()[:20], out)
    return out


def checkpoint_files(folder: Path) -> dict[str, bytes]:
    """A checkpoint folder's files by name, its manifest left out (what a hub branch serves)."""
    from san.models.folders import MANIFEST

    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != MANIFEST}


# The names that documents, configs and docstrings show (tests/unit/workflow/test_references.py).
#: where users and readers meet names: documentation, configs, packaging, the workflow and the library's docstrings
DOCUMENTED = sorted(
    {
        *(ROOT / name for name in ("README.md", "config.yaml", "pyproject.toml", "CITATION.cff")),
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "config").glob("*.yaml"),
        *(p for p in (ROOT / "workflow").rglob("*") if p.suffix in {".yaml", ".smk", ".rst"} or p.name == "Snakefile"),
        *(p for p in (ROOT / "profiles").rglob("*") if p.suffix in {".yaml", ".py"}),
        *(ROOT / "san").rglob("*.py"),
        *(ROOT / "scripts").glob("*.py"),
        *(ROOT / "benchmarks").glob("*.py"),
    }
)
COMMAND = re.compile(r"python -m (san(?:\.\w+)+)")


def documented(pattern: re.Pattern[str]) -> dict[str, set[str]]:
    """Each match of ``pattern`` (its first group, else the whole match) in :data:`DOCUMENTED`, with the files that
    hold it."""
    out: dict[str, set[str]] = {}
    for path in DOCUMENTED:
        for match in pattern.finditer(path.read_text(encoding="utf-8")):
            out.setdefault(match.group(match.re.groups and 1), set()).add(str(path.relative_to(ROOT)))
    return out


def save_tiny_llama(folder: Path, layers: int = 4, seed: int = 1) -> Path:
    """A random Llama of ``layers`` blocks (width 32) saved in ``folder`` as save_pretrained writes it, with the
    bundled tokenizer's files: a new user's own model (tests/integration/test_model_report.py and
    benchmarks/bench_model_report.py)."""
    import shutil

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from san.models.folders import bundled_model_dir, tokenizer_files

    src = bundled_model_dir()
    vocab = json.loads((src / "config.json").read_text())["vocab_size"]
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(folder)
    for name in tokenizer_files(src):
        shutil.copy2(src / name, folder / name)
    return folder
