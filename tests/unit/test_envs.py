"""The conda environments in envs/ stay in sync with pyproject.toml's dependencies."""

import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _pyproject_requirements() -> dict[str, Requirement]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = [Requirement(r) for r in data["project"]["dependencies"]]
    return {r.name.lower().replace("_", "-"): r for r in reqs}


def test_env_files_pin_what_pyproject_pins():
    project = _pyproject_requirements()
    env_files = sorted((ROOT / "envs").glob("*.yaml"))
    assert env_files, "no conda environment files in envs/"
    for path in env_files:
        env = yaml.safe_load(path.read_text())
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
        assert pip, f"{path.name} lists no pip packages"
        for line in pip:
            req = Requirement(line)
            name = req.name.lower().replace("_", "-")
            assert name in project, f"{path.name}: {name} is not a dependency in pyproject.toml"
            assert req.specifier == project[name].specifier, f"{path.name}: {name} {req.specifier} != pyproject"


def test_every_rule_env_exists():
    for rules in (ROOT / "workflow" / "rules").glob("*.smk"):
        for line in rules.read_text().splitlines():
            if line.strip().startswith('"../../envs/'):
                assert (ROOT / "workflow" / "rules" / line.strip().strip('"')).resolve().is_file(), line
