"""What the documentation, the configs and the docstrings name exists: every dotted ``san.`` name is a module or a
name defined in one, and every file of the workflow or the library they name is there (every ``python -m san...``
command they show runs: tests/integration/workflow/test_commands.py). A module moved or renamed leaves no stale name
behind."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from san.imports import module_file

from helpers import ROOT, documented

DOTTED = re.compile(r"(?<![\w./-])san(?:\.[A-Za-z_]\w*)+")
# files of the workflow and the library (no placeholder such as <wing> or {task} right after the name)
FILE = re.compile(r"(?<![\w./-])((?:workflow|san|scripts)/[\w./-]*\w)(?![<{*\w])")


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


def test_every_san_name_shown_exists():
    stale = {name: sorted(where) for name, where in documented(DOTTED).items() if not resolves(name)}
    assert not stale, f"names of no module or definition: {stale}"


def test_every_workflow_and_library_file_named_exists():
    names = documented(FILE)
    assert "workflow/schemas/config.schema.yaml" in names
    missing = {name: sorted(where) for name, where in names.items() if not (ROOT / name).exists()}
    assert not missing, f"files named but absent: {missing}"
