"""The ``san`` modules a Python file imports, read from its syntax tree without importing anything (so without
torch): the library inputs of every workflow rule, and the import graph that the structure tests check.

A rule's script runs every module it imports, directly or through another module, and every package ``__init__``
on the way; editing any of them may change what the job computes, so each is an input of the rule
(workflow/rules/common.smk adds them to every rule that runs a script). Imports inside functions count: a module
imported only when a function runs is still code the job may run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path

#: the library's own folder (its modules are named relative to its parent: ``san.measures.residual``)
PACKAGE = Path(__file__).resolve().parent


def module_file(name: str, package: Path = PACKAGE) -> Path | None:
    """The file of module ``name`` (``san.measures.residual`` or the package ``san.core``) under ``package`` (the
    ``san`` folder), None when it is not a ``san`` module."""
    parts = name.split(".")
    if parts[0] != package.name:
        return None
    base = package.joinpath(*parts[1:])
    for path in (base.with_suffix(".py") if parts[1:] else None, base / "__init__.py"):
        if path is not None and path.is_file():
            return path
    return None


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """The dotted name of the module at ``path`` inside ``package`` (a package's ``__init__.py``: the package)."""
    parts = path.resolve().relative_to(package.resolve().parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree: ast.Module, package: str = "") -> set[str]:
    """Every dotted name that ``tree`` imports anywhere (inside functions too): ``import a.b`` gives ``a.b``;
    ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a module or a name defined in ``a``); a relative import
    is resolved against ``package`` (the package the file belongs to)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            out |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return out


@cache
def direct_imports(path: Path, package: Path = PACKAGE) -> frozenset[str]:
    """The ``san`` modules that the file at ``path`` imports itself, by dotted name."""
    inside = path.resolve().is_relative_to(package.resolve())
    owner = module_name(path, package) if inside else ""
    if inside and path.name != "__init__.py":
        owner = owner.rpartition(".")[0]
    names = imported_names(ast.parse(path.read_text(encoding="utf-8")), owner)
    own = module_name(path, package) if inside else None
    return frozenset(n for n in names if n != own and module_file(n, package) is not None)


def with_packages(names: set[str]) -> set[str]:
    """``names`` and every package above them (``san.measures.residual`` adds ``san.core`` and ``san``): importing a
    module runs the ``__init__`` of each of its packages first."""
    out = set(names)
    for name in names:
        parts = name.split(".")
        out |= {".".join(parts[:i]) for i in range(1, len(parts))}
    return out


def imports_closure(path: Path, package: Path = PACKAGE) -> set[str]:
    """Every ``san`` module that running the file at ``path`` may import, directly or through other ``san`` modules,
    with the packages on the way, by dotted name."""
    seen: set[str] = set()
    todo = with_packages(set(direct_imports(path, package)))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo |= with_packages(set(direct_imports(module_file(name, package), package))) - seen
    return seen


#: The module-level name under which a module lists the data files it reads (paths relative to the ``san`` folder,
#: a tuple of string literals): they are inputs of every job that imports the module, like its code.
DATA_FILES = "DATA_FILES"


@cache
def data_files(path: Path, package: Path = PACKAGE) -> tuple[Path, ...]:
    """The data files that the module at ``path`` declares in :data:`DATA_FILES` (read from its syntax tree)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == DATA_FILES for t in targets):
                return tuple(package / name for name in ast.literal_eval(node.value))
    return ()


def library_inputs(script: Path, package: Path = PACKAGE, runs: Iterable[str] = ()) -> list[Path]:
    """The files of :func:`imports_closure` of ``script`` and the data files those modules declare, sorted: a
    rule's inputs for the library its script runs. ``runs``: modules the script imports by a name its rule passes
    (a wing's experiment whose ``run`` the job calls), each with its own closure."""
    names = imports_closure(script, package)
    for name in runs:
        path = module_file(name, package)
        if path is None:
            raise ValueError(f"{script.name} runs {name!r}, which is no module of {package}")
        names |= with_packages({name}) | imports_closure(path, package)
    modules = [module_file(name, package) for name in names]
    return sorted({*modules, *(d for m in modules for d in data_files(m, package))})


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Every module of ``package`` and the ``san`` modules it imports itself (not the packages above them)."""
    return {module_name(p, package): set(direct_imports(p, package)) for p in sorted(package.rglob("*.py"))}
