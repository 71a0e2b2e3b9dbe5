"""The conda environments in envs/ pin exactly what the test suite runs with, within pyproject.toml's ranges, and
install the project itself (a post-deploy script next to each environment file)."""

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from helpers import ROOT

ENV_FILES = sorted((ROOT / "envs").glob("*.yaml"))


def _pyproject_requirements() -> dict[str, Requirement]:
    """The project's dependencies and its ``online`` extra (the rules' online sources run in the same envs)."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = [
        Requirement(r) for r in data["project"]["dependencies"] + data["project"]["optional-dependencies"]["online"]
    ]
    return {canonicalize_name(r.name): r for r in reqs}


def _pip_requirements(path: Path) -> list[Requirement]:
    """The pip requirements of a conda environment file (pip options such as ``--extra-index-url`` skipped)."""
    env = yaml.safe_load(path.read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return [Requirement(line) for line in pip if not line.startswith("-")]


def _exact_version(req: Requirement) -> str:
    (spec,) = req.specifier
    assert spec.operator == "==", f"{req}: pin an exact version (==)"
    return spec.version


def test_env_files_exist():
    assert {p.name for p in ENV_FILES} >= {"torch.yaml", "plot.yaml"}


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_pins_are_exact_and_within_pyproject(path):
    project = _pyproject_requirements()
    reqs = _pip_requirements(path)
    assert reqs, f"{path.name} lists no pip packages"
    for req in reqs:
        name = canonicalize_name(req.name)
        assert name in project, f"{path.name}: {name} is not a dependency in pyproject.toml"
        version = Version(_exact_version(req))
        assert project[name].specifier.contains(version, prereleases=True), (
            f"{path.name}: {name}=={version} is outside pyproject's {project[name].specifier}"
        )


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_pins_match_the_installed_versions(path):
    """The environment builds what the tests check: every pin equals the version installed here."""
    for req in _pip_requirements(path):
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{path.name}: {req.name} is pinned but not installed in the test environment")
        pinned = Version(_exact_version(req))
        if path.name == "torch-cuda.yaml" and req.name == "torch":  # the same release, built for CUDA
            installed, pinned = Version(installed).public, pinned.public
        assert Version(str(installed)) == Version(str(pinned)), (
            f"{path.name}: {req.name} pinned to {_exact_version(req)}, installed {installed}; update the pin"
        )


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_python_matches_pyproject(path):
    env = yaml.safe_load(path.read_text())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    version = python.split("=")[-1]
    assert Version(version) in Requirement(f"python{requires}").specifier, f"{path.name}: {python} vs {requires}"


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_env_installs_the_project(path):
    """Snakemake runs ``<env>.post-deploy.sh`` after creating the environment: it must install this project."""
    deploy = path.with_name(path.stem + ".post-deploy.sh")
    assert deploy.is_file(), f"{deploy.name} missing: the environment would lack the san package"
    text = deploy.read_text()
    assert text.startswith("#!"), f"{deploy.name}: needs a shebang line"
    assert "pip install --no-deps --editable ." in text


def test_torch_env_is_the_cpu_build():
    pip = yaml.safe_load((ROOT / "envs" / "torch.yaml").read_text())["dependencies"][-1]["pip"]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in pip
    torch = next(r for r in map(Requirement, (p for p in pip if not p.startswith("-"))) if r.name == "torch")
    assert Version(_exact_version(torch)).local == "cpu"


def test_cuda_env_is_the_cpu_env_with_a_cuda_torch():
    """envs/torch-cuda.yaml pins what envs/torch.yaml pins, with PyPI's CUDA build of the same torch release."""
    cpu, cuda = (_pip_requirements(ROOT / "envs" / name) for name in ("torch.yaml", "torch-cuda.yaml"))
    assert [(r.name, _exact_version(r)) for r in cpu if r.name != "torch"] == [
        (r.name, _exact_version(r)) for r in cuda if r.name != "torch"
    ]
    torch_cpu, torch_cuda = (next(r for r in reqs if r.name == "torch") for reqs in (cpu, cuda))
    assert Version(_exact_version(torch_cuda)) == Version(Version(_exact_version(torch_cpu)).public)
    pip = yaml.safe_load((ROOT / "envs" / "torch-cuda.yaml").read_text())["dependencies"][-1]["pip"]
    assert not any("whl/cpu" in p for p in pip)


def test_every_rule_env_exists():
    """Every conda directive names an existing file: literal paths, and TORCH_ENV for each allowed torch_env."""
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    for name in schema["properties"]["torch_env"]["enum"]:
        assert (ROOT / "envs" / f"{name}.yaml").is_file(), name
    for rules in (ROOT / "workflow" / "rules").glob("*.smk"):
        lines = [line.strip() for line in rules.read_text().splitlines()]
        for line, after in zip(lines, lines[1:], strict=False):
            if line == "conda:":
                assert after == "TORCH_ENV" or after.startswith('"../../envs/'), f"{rules.name}: {after}"
            if after.startswith('"../../envs/'):
                assert (ROOT / "workflow" / "rules" / after.strip('"')).resolve().is_file(), after


CONSTRAINTS = ROOT / "requirements" / "constraints.txt"


def _constraints() -> dict[str, Version]:
    """requirements/constraints.txt as {name: version}: one exact pin per line (comments and blank lines skipped)."""
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            pins[canonicalize_name(req.name)] = Version(_exact_version(req))
    return pins


def test_constraints_pin_what_the_envs_pin():
    """One set of tested versions: every conda pin equals the constraint of the pip setup (torch without its local)."""
    pins = _constraints()
    for path in ENV_FILES:
        for req in _pip_requirements(path):
            name = canonicalize_name(req.name)
            assert name in pins, f"{path.name}: {name} is pinned there but not in {CONSTRAINTS.name}"
            assert Version(_exact_version(req)).public == pins[name].public, (
                f"{path.name}: {name}=={_exact_version(req)} but {CONSTRAINTS.name} has {pins[name]}"
            )


def test_constraints_match_the_installed_versions():
    """The test environment is the constrained one (a new upstream release must not slip into the checked setup)."""
    for name, version in _constraints().items():
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            continue  # e.g. the slurm extra's plugin in an environment set up without it
        assert installed.public == version.public, f"{name}: {CONSTRAINTS.name} has {version}, installed {installed}"


def test_setup_commands_use_the_constraints():
    """Both README commands and CI install the project with -c requirements/constraints.txt."""
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv .venv")]
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci" / "run").read_text()
    commands += [line for line in ci.splitlines() if line.startswith("python3 -m venv .venv")]
    assert len(commands) == 3
    for command in commands:
        assert "-c requirements/constraints.txt -e " in command, command
    assert commands[1] == commands[2], "CI must run the README's test command"


def test_readme_names_the_system_packages_ci_installs():
    """Every system package .ci/run installs (apt-get install) is named beside the README's test command, and each
    test that needs its program skips with a reason naming it: a clean clone's README command either runs the test
    or says what is missing."""
    ci = (ROOT / ".ci" / "run").read_text()
    packages = set()
    for line in ci.splitlines():
        if "apt-get install" in line:
            words = line.split("apt-get install", 1)[1].split(">")[0].split()
            packages |= {w for w in words if not w.startswith("-")}
    assert packages, ".ci/run installs no system package (the fs storage test needs rsync)"
    readme = (ROOT / "README.md").read_text()
    setup = readme[readme.index("Set up and pass the test suite") : readme.index("## Gallery")]
    tests = {p: p.read_text() for p in (ROOT / "tests").rglob("test_*.py")}
    for package in sorted(packages):
        assert f"`apt-get install {package}`" in setup, f"the README's test set-up does not name {package}"
        users = [p for p, text in tests.items() if f'shutil.which("{package}")' in text]
        assert users, f"no test uses {package}, which .ci/run installs"
        for path in users:
            skips = re.findall(r'shutil\.which\("' + package + r'"\) is None:\n\s+pytest\.skip\(([^\n]+)', tests[path])
            assert skips and all(package in s for s in skips), f"{path.name}: its skip without {package} must name it"
