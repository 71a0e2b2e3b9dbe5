"""The shape of the library and of its tests, read from their syntax trees: no import cycle in ``san``, one home of
model families (``san/models``), small functions, the library inputs of the workflow's rules derived from their
scripts' imports (``san.imports``), and unit tests that start no process, hub server or workflow."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from san.imports import import_graph, imported_names, imports_closure, library_inputs
from san.models.spec import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
SAN = ROOT / "san"
UNIT = ROOT / "tests" / "unit"
MAX_FUNCTION_LINES = 60
#: functions over the limit in parts of ``san`` that are being split elsewhere; this list must be empty
KNOWN_LONG: set[str] = set()


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (the modules in order, the first repeated at the end), None when acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_import_graph_sees_imports_inside_functions():
    graph = import_graph()
    assert "san.models.spec" in graph["san.rank_collapse.spec"]
    assert "san.models.load" in graph["san.propagation.experiment"]  # imported inside a function


def test_find_cycle_finds_a_three_module_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_in_san():
    assert find_cycle(import_graph()) is None


def test_models_import_no_experiment():
    """``san.models`` sits between ``san.core`` and the experiments: it imports nothing else of ``san``."""
    graph = import_graph()
    for name, imports in graph.items():
        if name.startswith("san.models"):
            assert all(i.startswith(("san.core", "san.models")) for i in imports), (name, imports)


def test_core_is_plumbing_and_measures_sit_on_it():
    """``san.core`` (config, storage, devices, verdicts' plumbing) imports nothing else of ``san``; ``san.measures``
    (the layers' measures) only ``san.core``."""
    graph = import_graph()
    for name, imports in graph.items():
        if name.startswith("san.core"):
            assert all(i.startswith("san.core") for i in imports), (name, imports)
        if name.startswith("san.measures"):
            assert all(i.startswith(("san.core", "san.measures")) for i in imports), (name, imports)


def family_literals(tree: ast.Module) -> list[tuple[int, str]]:
    """String constants of ``tree`` that are a family name of the table (line, name)."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in FAMILIES
    ]


def test_family_literals_are_found():
    assert family_literals(ast.parse('if family == "xlnet":\n    kw = {"gpt2": 1}')) == [(1, "xlnet"), (2, "gpt2")]
    assert family_literals(ast.parse('print("a bert model", f"{x} bert")')) == []


@pytest.mark.slow
def test_only_san_models_names_a_family():
    """No module of ``san`` outside ``san/models``, no workflow script and no rules file holds a family name as a
    string constant (``"gpt2"``, ``"albert"``, ...): a family's facts are rows of
    :data:`san.models.spec.FAMILY_TABLE`. (Config files, tests and documentation name families freely.)"""
    files = [p for p in SAN.rglob("*.py") if "models" not in p.relative_to(SAN).parts[:1]]
    files += sorted((ROOT / "scripts").glob("*.py"))
    found = {
        f"{p.relative_to(ROOT)}:{line}": name
        for p in files
        for line, name in family_literals(ast.parse(p.read_text(encoding="utf-8")))
    }
    quoted = re.compile("[\"'](" + "|".join(FAMILIES) + ")[\"']")
    for p in [ROOT / "workflow" / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]:
        for line, text in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            found.update({f"{p.relative_to(ROOT)}:{line}": m.group(1) for m in quoted.finditer(text)})
    assert not found


def long_functions(tree: ast.Module, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """Functions (and methods, nested ones included) of ``tree`` spanning more than ``limit`` lines, from the
    ``def`` line (decorators excluded) to the last line of the body, docstring included: ``{name: lines}``."""
    return {
        node.name: node.end_lineno - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > limit
    }


def test_long_functions_are_found():
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    assert long_functions(ast.parse(f"def f():\n{body}\n")) == {"f": 61}
    assert long_functions(ast.parse(f"def f():\n{body}\n"), limit=61) == {}


def test_no_function_in_san_is_longer_than_60_lines():
    found = {
        f"{p.relative_to(ROOT)}::{name}": lines
        for p in sorted(SAN.rglob("*.py"))
        for name, lines in long_functions(ast.parse(p.read_text(encoding="utf-8"))).items()
    }
    assert set(found) <= KNOWN_LONG, {k: v for k, v in found.items() if k not in KNOWN_LONG}
    assert not KNOWN_LONG - set(found), f"no longer too long, remove from KNOWN_LONG: {KNOWN_LONG - set(found)}"


def test_imported_names_reads_every_form_of_import():
    tree = ast.parse(
        "import san.measures.residual\n"
        "from san.paths import spec, table as t\n"
        "from . import sibling\n"
        "from ..core.config import ConfigError\n"
        "def f():\n"
        "    from san.models.store import materialise\n"
    )
    assert imported_names(tree, "san.paths") == {
        "san.measures.residual",
        "san.paths",
        "san.paths.spec",
        "san.paths.table",
        "san.paths.sibling",
        "san.core.config",
        "san.core.config.ConfigError",
        "san.models.store",
        "san.models.store.materialise",
    }


def test_a_scripts_library_inputs_are_its_imports_with_theirs_and_their_packages(tmp_path: Path):
    """A script's closure: the modules it imports, what they import (inside functions too), the packages on the
    way; neither a name imported from a module nor an unrelated module."""
    package = tmp_path / "san"
    for name, text in {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/a.py": "X = 1\n",
        "core/b.py": "def f():\n    from san.core import a\n",
        "wing/__init__.py": "",
        "wing/c.py": "from san.core.b import f\n",
        "wing/unused.py": "import san.core.a\n",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    script = tmp_path / "script.py"
    script.write_text("import json\nfrom san.wing.c import f\n")
    assert imports_closure(script, package) == {"san", "san.core", "san.core.a", "san.core.b", "san.wing", "san.wing.c"}
    assert [p.relative_to(package).as_posix() for p in library_inputs(script, package)] == [
        "__init__.py",
        "core/__init__.py",
        "core/a.py",
        "core/b.py",
        "wing/__init__.py",
        "wing/c.py",
    ]


def test_figure_scripts_depend_on_no_experiment_module():
    """The derivation follows the real imports: a figure job reruns for its plots (the draw module the figure
    registry names, passed as a module the script runs) and the figure style, never for the experiment that computed
    its data."""
    closure = imports_closure(ROOT / "scripts" / "figure.py")
    assert {"san.figures", "san.core.plotting", "san"} <= closure
    inputs = {p.relative_to(SAN).as_posix() for p in library_inputs(ROOT / "scripts" / "figure.py",
                                                                    runs=["san.rank_collapse.plots"])}  # fmt: skip
    assert {"rank_collapse/plots.py", "core/plotting.py", "figures.py"} <= inputs
    assert not {"rank_collapse/experiment.py", "models/load.py", "core/device.py"} & inputs
    training = imports_closure(ROOT / "scripts" / "circle_train.py")
    assert {"san.circle.experiment", "san.core.attention", "san.core.storage"} <= training


def test_a_rule_that_names_its_experiment_depends_on_that_experiment(tmp_path: Path):
    """A script that calls the ``run`` of the experiment its rule names (the one rank-collapse job shape) gets that
    module's closure as library inputs, and only that experiment's: an image encoder's job reruns for the vision
    code, a text model's job does not."""
    script = ROOT / "scripts" / "rank_collapse.py"
    text = {p.relative_to(SAN).as_posix() for p in library_inputs(script, runs=["san.rank_collapse.experiment"])}
    image = {
        p.relative_to(SAN).as_posix() for p in library_inputs(script, runs=["san.rank_collapse.vision.experiment"])
    }
    assert "rank_collapse/experiment.py" in text and "rank_collapse/vision/experiment.py" not in text
    assert {"rank_collapse/vision/experiment.py", "rank_collapse/vision/__init__.py"} <= image
    assert "rank_collapse/experiment.py" in image  # the vision experiment records the stream with the text one's hooks
    assert not [p for p in library_inputs(script) if "experiment" in p.name]
    with pytest.raises(ValueError, match="san.nothing"):
        library_inputs(script, runs=["san.nothing"])


#: what makes a test start a process, a hub server or a workflow: modules it imports, the names of tests/helpers.py
#: that run Snakemake or read a workflow's jobs through a process, and the fixtures of tests/conftest.py that start
#: a hub server, copy the workflow for a run or run it
PROCESS_MODULES = {"subprocess", "multiprocessing", "hub_server", "snakemake"}
PROCESS_HELPERS = {"snakemake", "job_params", "planned_jobs", "built_workflow", "copy_workflow"}
PROCESS_FIXTURES = {"hub", "hub_server", "workflow_copy", "tiny_run"}


def starts_processes(tree: ast.Module) -> set[str]:
    """What in a test module's syntax tree starts a process, a hub server or a workflow (:data:`PROCESS_MODULES`,
    :data:`PROCESS_HELPERS` imported from helpers, :data:`PROCESS_FIXTURES` as a test's or fixture's argument)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names} & PROCESS_MODULES
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module.split(".")[0]} & PROCESS_MODULES
            if node.module == "helpers":
                found |= {a.name for a in node.names} & PROCESS_HELPERS
        elif isinstance(node, ast.FunctionDef):
            found |= {a.arg for a in node.args.args} & PROCESS_FIXTURES
    return found


def test_process_starters_are_found():
    assert starts_processes(ast.parse("import subprocess\nfrom snakemake.api import SnakemakeApi\n")) == {
        "subprocess",
        "snakemake",
    }
    assert starts_processes(ast.parse("from helpers import ROOT, snakemake\ndef test_a(hub, tmp_path): pass\n")) == {
        "snakemake",
        "hub",
    }
    assert starts_processes(ast.parse("from helpers import ROOT\ndef test_a(tmp_path): import json\n")) == set()


def test_unit_tests_start_no_process_server_or_workflow():
    """``tests/unit/`` is the fast loop's home: a test that starts a process (a subprocess, a compiler, Snakemake),
    the local hub server or a workflow belongs in ``tests/integration/``."""
    found = {
        p.relative_to(UNIT).as_posix(): sorted(what)
        for p in sorted(UNIT.rglob("*.py"))
        if (what := starts_processes(ast.parse(p.read_text(encoding="utf-8"))))
    }
    assert not found, found
