"""Code style gates the project promises: ruff, snakefmt and Snakemake's own linter."""

import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slow  # ruff, snakefmt and Snakemake's linter in subprocesses


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_clean():
    proc = _run("ruff", "check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_snakefmt_clean():
    files = ["workflow/Snakefile", *map(str, sorted((ROOT / "workflow" / "rules").glob("*.smk")))]
    proc = _run("snakefmt", "--check", *files)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_snakemake_lint_clean():
    proc = _run("snakemake", "--lint", "--cores", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Lints for" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
