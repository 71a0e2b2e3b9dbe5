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
            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def resolves(dotted: str, package: Path = ROOT / "san") -> bool:
    """Whether ``dotted`` (``san.measures.residual``, ``san.circle.spec.check_config``) is a ``san`` module, or a name
    defined at the top level of the longest module it starts with."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        if (path := module_file(".".join(parts[:i]), package)) is not None:
            return i == len(parts) or parts[i] in top_level_names(path)
    return False


def test_resolves_tells_modules_and_their_names_from_stale_ones():
    assert resolves("san.measures.residual") and resolves("san.circle.spec.check_config") and resolves("san.models")
    assert resolves("san.phenomena.data.BY_SAMPLE") and resolves("san.phenomena.data.MEAN")  # a tuple assignment
    assert not resolves("san.fused") and not resolves("san.rank_collapse.hub") and not resolves("san.core.nothing")


def test_every_san_name_shown_exists():
    stale = {name: sorted(where) for name, where in documented(DOTTED).items() if not resolves(name)}
    assert not stale, f"names of no module or definition: {stale}"


def test_every_workflow_and_library_file_named_exists():
    names = documented(FILE)
    assert "workflow/schemas/config.schema.yaml" in names
    missing = {name: sorted(where) for name, where in names.items() if not (ROOT / name).exists()}
    assert not missing, f"files named but absent: {missing}"


#: a Markdown link to a section of a document (``[text](docs/x.md#section)``, or ``(#section)`` in the same one)
SECTION_LINK = re.compile(r"\]\(([\w./-]*\.md)?#([\w-]+)\)")
#: a caption's or document's quote of a README section by its title
README_SECTION = re.compile(r"the README's \"([^\"]+)\"")


def slug(title: str) -> str:
    """A heading's anchor as GitHub writes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def sections(path: Path) -> set[str]:
    """The anchors of a Markdown document's headings."""
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)}


def test_slug_is_githubs_anchor():
    assert slug("Along training: the offline series") == "along-training-the-offline-series"
    assert slug("A new family") == "a-new-family" and slug("Results") == "results"


def test_every_section_a_document_or_caption_links_exists():
    """A link to ``doc.md#section`` and a caption's "the README's "Section"" name a heading that is there: a
    section renamed or removed leaves no stale link."""
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    stale = []
    for doc in documents:
        for m in SECTION_LINK.finditer(doc.read_text(encoding="utf-8")):
            target = (doc.parent / m.group(1)).resolve() if m.group(1) else doc
            if not target.is_file() or m.group(2) not in sections(target):
                stale.append(f"{doc.relative_to(ROOT)}: {m.group(0)}")
    readme = sections(ROOT / "README.md")
    for path in [*documents, *sorted((ROOT / "workflow" / "report").glob("*.rst"))]:
        stale += [
            f"{path.relative_to(ROOT)}: {m.group(0)}"
            for m in README_SECTION.finditer(path.read_text(encoding="utf-8"))
            if slug(m.group(1)) not in readme
        ]
    assert not stale, stale
    assert README_SECTION.search('the README\'s "Results"') and SECTION_LINK.search("[a](docs/x.md#b-c)")
