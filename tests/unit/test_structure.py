"""The shape of the library, read from its syntax trees: no import cycle in ``san``, one home of model families
(``san/models``), and small functions."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from san.models.spec import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
SAN = ROOT / "san"
MAX_FUNCTION_LINES = 60
#: functions over the limit in parts of ``san`` that are being split elsewhere; this list must be empty
KNOWN_LONG: set[str] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(SAN.rglob("*.py"))}


def _imported(module: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The ``san`` modules that ``module`` imports anywhere in its file (inside functions too): ``import a.b``,
    ``from a import b`` (``a.b`` when it is a module, else ``a``) and relative imports."""
    package = module if (SAN / Path(*module.split(".")[1:]) / "__init__.py").is_file() else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {name for name in out if name in known and name != module}


def import_graph() -> dict[str, set[str]]:
    """Every module of ``san`` and the ``san`` modules it imports."""
    trees = _modules()
    return {name: _imported(name, tree, set(trees)) for name, tree in trees.items()}


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
    assert "san.models.acquire" in graph["san.propagation.experiment"]  # imported inside a function


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
    for p in [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]:
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


def test_lib_depends_lists_what_each_module_imports():
    """workflow/rules/common.smk's LIB_DEPENDS (what ``lib()`` adds as inputs for a module) names exactly the
    ``san`` modules each of its modules imports, outside ``san.core`` (every rule has those) and packages."""
    text = (ROOT / "workflow" / "rules" / "common.smk").read_text()
    block = text.split("LIB_DEPENDS = ", 1)[1].split("\n}\n", 1)[0] + "\n}"
    depends = ast.literal_eval(block)
    graph = import_graph()
    for module, listed in depends.items():
        name = "san." + module.replace("/", ".")
        imported = {m.removeprefix("san.").replace(".", "/") for m in graph[name] if not m.startswith("san.core")}
        imported = {m for m in imported if not (SAN / m / "__init__.py").is_file()}
        assert set(listed) == imported, module
