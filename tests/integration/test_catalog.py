"""The Snakemake workflow catalog's checks, replayed on this repository (its generator, scripts/generate-catalog.py
of github.com/snakemake/snakemake-workflow-catalog, and its "adding workflows" rules): where the Snakefile and the
rules are, the standardized-usage files (`.snakemake-workflow-catalog.yml`, `config/README.md`), `snakemake --lint`
and `snakefmt --check` as the generator runs them, the config schema the workflow page shows, and the rule graph of
its tube map (`snakemake -s <snakefile> -c 1 -d <dir> --forceall --rulegraph`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import ROOT

#: the deployment methods the catalog shows (build_wf_pages.check_deployment reads singularity as apptainer)
DEPLOYMENTS = {"conda", "apptainer", "apptainer+conda", "singularity", "singularity+conda"}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """A command of the catalog's, in ``cwd``, the library imported from this checkout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_workflow_is_where_the_generator_looks():
    """A repository with a workflow/ folder must hold workflow/Snakefile (else "missing Snakefile"), and its rules
    folder, if any, .smk files (else "rule modules are not using .smk extension")."""
    workflow = ROOT / "workflow"
    assert workflow.is_dir() and (workflow / "Snakefile").is_file()
    rules = workflow / "rules"
    assert any(p.suffix == ".smk" for p in rules.iterdir() if p.is_file())
    assert not (ROOT / "Snakefile").exists(), "a root Snakefile beside workflow/ is not the one the catalog reads"
    readme = (ROOT / "README.md").read_text().lower()
    assert "snakemake" in readme and "workflow" in readme


def test_the_standardized_usage_files_parse_as_the_generator_reads_them():
    """`.snakemake-workflow-catalog.yml` (yaml.SafeLoader, its `usage` keys) and `config/README.md`: both present make
    the workflow "standardized"."""
    settings = yaml.load((ROOT / ".snakemake-workflow-catalog.yml").read_text(), yaml.SafeLoader)
    usage = settings["usage"]
    assert set(usage) <= {"mandatory-flags", "software-stack-deployment", "report"}
    flags = usage["mandatory-flags"]
    assert set(flags) == {"desc", "flags"} and isinstance(flags["flags"], str | list) and flags["desc"].strip()
    deployment = usage["software-stack-deployment"]
    assert set(deployment) <= DEPLOYMENTS and all(isinstance(v, bool) for v in deployment.values())
    assert deployment["conda"] and all((ROOT / "envs" / f"{n}.yaml").is_file() for n in ("torch", "plot"))
    assert usage["report"] is True
    config_readme = (ROOT / "config" / "README.md").read_text()
    assert config_readme.startswith("# ") and "config.yaml" in config_readme


def test_the_config_schema_the_workflow_page_shows():
    """The page lists workflow/schemas/config.schema.yaml's top-level parameters (type, description, default)."""
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    for name, prop in schema["properties"].items():
        assert "description" in prop or "$ref" in prop, name


@pytest.mark.parametrize("command", [("snakemake", "--lint"), ("snakefmt", "--check", "-v")], ids=["lint", "snakefmt"])
def test_lint_and_formatting_pass_as_the_generator_runs_them(command):
    """From the repository's root: `snakemake --lint` (its exit status) and `snakefmt --check -v workflow/Snakefile
    workflow/rules/*.smk` (with the repository's pyproject.toml, as in a clone)."""
    files = []
    if command[0] == "snakefmt":
        files = [
            "workflow/Snakefile",
            *sorted(f"workflow/rules/{p.name}" for p in (ROOT / "workflow" / "rules").glob("*.smk")),
        ]
    proc = run(sys.executable, "-m", *command, *files, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if command[0] == "snakemake":
        assert "Lints for" not in proc.stdout + proc.stderr


def test_the_rule_graph_of_the_tube_map_builds_from_any_working_directory(tmp_path):
    """`snakemake -s <snakefile> -c 1 -d <dir> --forceall --rulegraph`, with a working directory outside the
    repository: the workflow finds its config, schemas and resources from its own folder."""
    work = tmp_path / "elsewhere"
    work.mkdir()
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"), "-c", "1", "-d", str(work)]
    proc = run(*cmd, "--forceall", "--rulegraph", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    edges = set(re.findall(r'label = "(\w+)"', proc.stdout))
    assert {"all", "acquire_model", "rank_collapse", "circle_train", "paths_train", "summary"} <= edges
    assert not (work / "results").exists()
