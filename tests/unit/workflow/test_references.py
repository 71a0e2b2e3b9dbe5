"""What the documentation, the configs and the docstrings name exists: every ``python -m san...`` command they show
runs (``--help``), every dotted ``san.`` name is a module or a name defined in one, and every file of the workflow
or the library they name is there. A module moved or renamed leaves no stale name behind."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from san.imports import module_file

from helpers import ROOT

#: where users and readers meet names: documentation, configs, packaging, the workflow and the library's docstrings
SOURCES = sorted(
    {
        *(ROOT / name for name in ("README.md", "config.yaml", "pyproject.toml", "CITATION.cff", "Snakefile")),
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "config").glob("*.yaml"),
        *(p for p in (ROOT / "workflow").rglob("*") if p.suffix in {".yaml", ".smk", ".rst"}),
        *(p for p in (ROOT / "profiles").rglob("*") if p.suffix in {".yaml", ".py"}),
        *(ROOT / "san").rglob("*.py"),
        *(ROOT / "scripts").glob("*.py"),
        *(ROOT / "benchmarks").glob("*.py"),
    }
)
COMMAND = re.compile(r"python -m (san(?:\.\w+)+)")
DOTTED = re.compile(r"(?<![\w./-])san(?:\.[A-Za-z_]\w*)+")
# files of the workflow and the library (no placeholder such as <wing> or {task} right after the name)
FILE = re.compile(r"(?<![\w./-])((?:workflow|san|scripts)/[\w./-]*\w)(?![<{*\w])")


def found(pattern: re.Pattern[str]) -> dict[str, set[str]]:
    """Each match of ``pattern`` (its first group, else the whole match) in :data:`SOURCES`, with the files that
    hold it."""
    out: dict[str, set[str]] = {}
    for path in SOURCES:
        for match in pattern.finditer(path.read_text(encoding="utf-8")):
            out.setdefault(match.group(match.re.groups and 1), set()).add(str(path.relative_to(ROOT)))
    return out


@cache
def top_level_names(path: Path) -> frozenset[str]:
    """The names a module defines or imports at its top level."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def resolves(dotted: str, package: Path = ROOT / "san") -> bool:
    """Whether ``dotted`` (``san.core.metrics``, ``san.circle.spec.check_config``) is a ``san`` module, or a name
    defined at the top level of the longest module it starts with."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        if (path := module_file(".".join(parts[:i]), package)) is not None:
            return i == len(parts) or parts[i] in top_level_names(path)
    return False


def test_resolves_tells_modules_and_their_names_from_stale_ones():
    assert resolves("san.core.metrics") and resolves("san.circle.spec.check_config") and resolves("san.models")
    assert not resolves("san.fused") and not resolves("san.rank_collapse.hub") and not resolves("san.core.nothing")


@pytest.mark.slow
def test_every_python_m_command_shown_runs():
    """``python -m <module> --help`` of every module a command shows exits 0 (run side by side)."""
    modules = found(COMMAND)
    assert {"san.core.compare", "san.report.readme", "san.models.sources.hub"} <= set(modules)
    procs = {
        module: subprocess.Popen(
            [sys.executable, "-m", module, "--help"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for module in sorted(modules)
    }
    failed = {}
    for module, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        if proc.returncode != 0 or "usage:" not in out:
            failed[module] = (sorted(modules[module]), out[-500:])
    assert not failed, failed


def test_every_san_name_shown_exists():
    stale = {name: sorted(where) for name, where in found(DOTTED).items() if not resolves(name)}
    assert not stale, f"names of no module or definition: {stale}"


def test_every_workflow_and_library_file_named_exists():
    names = found(FILE)
    assert "workflow/schemas/config.schema.yaml" in names
    missing = {name: sorted(where) for name, where in names.items() if not (ROOT / name).exists()}
    assert not missing, f"files named but absent: {missing}"
