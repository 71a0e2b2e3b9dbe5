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


def write_config(workdir: Path, config: dict, name: str = "config.yaml") -> Path:
    path = workdir / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    """A fresh copy of the workflow in a temporary folder."""
    return copy_workflow(tmp_path / "wf")


@pytest.fixture(scope="session")
def default_config() -> dict:
    with (ROOT / "config.yaml").open() as fh:
        return yaml.safe_load(fh)
