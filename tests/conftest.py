"""Shared fixtures: a copy of the workflow in a temporary folder, run with a small config."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COPY_ITEMS = ("Snakefile", "config.yaml", "workflow", "scripts", "san", "envs", "profiles", "config")


def copy_workflow(dest: Path) -> Path:
    """Copy the workflow (not results, not the venv) into ``dest`` so a test may edit it freely."""
    dest.mkdir(parents=True, exist_ok=True)
    for item in COPY_ITEMS:
        src = ROOT / item
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, dest / item)
    return dest


def snakemake(workdir: Path, *args: str, check: bool = True, timeout: int = 1200) -> subprocess.CompletedProcess:
    """Run ``python -m snakemake`` in ``workdir`` with this interpreter; the library is imported from the copy."""
    env = dict(os.environ, PYTHONPATH=str(workdir), OMP_NUM_THREADS="1")
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
    import re

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


def built_workflow(dest: Path, config: dict, targets: list[str]) -> Path:
    """Copy the workflow into ``dest``, write ``config`` and build ``targets`` with two cores."""
    wf = copy_workflow(dest)
    write_config(wf, config)
    snakemake(wf, "--cores", "2", *targets)
    return wf


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    """A fresh copy of the workflow in a temporary folder."""
    return copy_workflow(tmp_path / "wf")


@pytest.fixture(scope="session")
def default_config() -> dict:
    with (ROOT / "config.yaml").open() as fh:
        return yaml.safe_load(fh)


TINY_MODELS = {
    "tiny-bert": {"family": "bert", "init": {"seed": 0, "config": {
        "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 64}}},
    "tiny-albert": {"family": "albert", "init": {"seed": 0, "config": {
        "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
        "intermediate_size": 64, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}}},
    "tiny-xlnet": {"family": "xlnet", "init": {"seed": 0, "config": {
        "d_model": 32, "n_layer": 3, "n_head": 4, "d_inner": 64}}},
}


def tiny_config(default: dict) -> dict:
    """The default config shrunk to seconds: tiny init models, few short sequences, few paths."""
    import copy

    cfg = copy.deepcopy(default)
    minilm = copy.deepcopy(default["models"]["all-MiniLM-L6-v2"])
    cfg["models"] = {**copy.deepcopy(TINY_MODELS), "all-MiniLM-L6-v2": minilm}
    cfg["rank_collapse"].update(models=list(TINY_MODELS), batch_size=2, threads=1)
    cfg["text"].update(n_sequences=4, seq_len=16)
    cfg["path_products"].update(n_paths=5)
    cfg["figures"].update(formats=["png"], dpi=40)
    return cfg


def rank_collapse_targets(cfg: dict) -> list[str]:
    out = []
    for m in cfg["rank_collapse"]["models"]:
        out += [f"results/rank_collapse/{m}.nc", f"results/path_products/{m}.nc"]
        out += [f"results/figures/{s}.{ext}" for s in (f"rank_collapse_{m}", f"rank_collapse_{m}_log",
                                                       f"path_products_{m}") for ext in cfg["figures"]["formats"]]
    return out
