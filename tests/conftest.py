"""pytest setup: a hermetic environment (no caller's hub, transformers or CUDA settings), and the marks.

``slow``: the tests under tests/integration/ (they build the workflow, minutes), the tests that use the local hub
(:data:`SLOW_FIXTURES`: a hub server and acquisition through the real clients) or a copy of the workflow (Snakemake
runs), and the unit tests marked by hand (subprocesses, compilation, more than about half a second);
``pytest -m "not slow"`` is the fast loop. ``gpu``: tests that need a CUDA device, skipped with a reason where torch
sees none."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

from helpers import copy_workflow, snakemake, tiny_config, write_config
from helpers import default_config as _default_config

INTEGRATION = Path(__file__).resolve().parent / "integration"
#: Fixtures that make a test slow: the local hub (a server, acquisition through the real clients) and a copy of the
#: workflow (for Snakemake runs).
SLOW_FIXTURES = frozenset({"hub", "hub_server", "workflow_copy", "tiny_run"})


#: Variables of the caller's environment that change what the clients, transformers or torch do (an offline flag,
#: a cache, a token, visible GPUs); every test starts without them and sets what it depends on.
SCRUBBED_PREFIXES = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "CUDA_", "SAN_GPU_")


def hermetic_environment(environ: dict[str, str], home: str) -> list[str]:
    """Remove the caller's hub, transformers and CUDA variables from ``environ`` and give the clients a private
    ``HF_HOME``; returns the names removed."""
    removed = sorted(k for k in environ if k.startswith(SCRUBBED_PREFIXES))
    for key in removed:
        del environ[key]
    environ.update(HF_HOME=home, HF_HUB_DISABLE_TELEMETRY="1")
    return removed


def pytest_configure(config: pytest.Config) -> None:
    """Before any test module imports a client (huggingface_hub reads its settings at import): the environment
    of every test and of every process it starts is the same, whatever the caller exported."""
    hermetic_environment(os.environ, tempfile.mkdtemp(prefix="san-tests-hf-home-"))


@pytest.fixture(autouse=True)
def _no_tool_switches_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool run in a test (``python -m san...``'s ``main``) sets the libraries' quiet switches in this process's
    environment (:func:`san.core.cli.quiet_libraries`); they are taken away after the test, so no later test or
    process it starts inherits them."""
    for key in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS"):
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's workers (``-n``) take a module's tests together, so that each module-scoped fixture (a workflow
    run) is built once, and the modules of the one tiny run (:data:`tiny_run`) together, so that it is built once."""
    from xdist.scheduler import LoadScopeScheduling

    root = Path(str(config.rootpath))
    uses = re.compile(r"def \w+\([^)]*\btiny_run\b", re.S)
    tiny = {p.relative_to(root).as_posix() for p in (root / "tests").rglob("test_*.py") if uses.search(p.read_text())}

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            return "tiny_run" if module in tiny else module

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if INTEGRATION in Path(item.fspath).parents or SLOW_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu and not cuda_visible():
        skip = pytest.mark.skip(reason="needs a CUDA device; torch sees none")
        for item in gpu:
            item.add_marker(skip)


def cuda_visible() -> bool:
    """Whether torch sees a CUDA device (imported only when a collected test needs one)."""
    import torch

    return torch.cuda.is_available()


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    """A fresh copy of the workflow in a temporary folder."""
    return copy_workflow(tmp_path / "wf")


@pytest.fixture(scope="session")
def default_config() -> dict:
    """The parsed config.yaml."""
    return _default_config()


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, default_config) -> Path:
    """The whole workflow on the tiny config (tests/config/tiny.yaml), run to completion once per test run and shared
    by the tests that read a finished run: the report's structure and every result file's labels
    (tests/integration/test_report.py) and the incremental reruns (tests/integration/test_incremental.py), which
    edit only copies of it. A test may add files beside the run's (the report) but never change what it wrote."""
    workdir = copy_workflow(tmp_path_factory.mktemp("tiny_run") / "wf")
    write_config(workdir, tiny_config(default_config))
    snakemake(workdir, "--cores", "2", timeout=1500)
    return workdir


@pytest.fixture(scope="session")
def hub_server(tmp_path_factory):
    """A local hub (tests/hub_server.py) serving the repositories of tests/hub_repos.py, for the whole session."""
    from hub_repos import all_repos
    from hub_server import HubServer

    server = HubServer(all_repos(tmp_path_factory.mktemp("hub_repos"))).start()
    yield server
    server.stop()


@pytest.fixture
def hub(hub_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The local hub for one test: the real clients pointed at it (``HF_ENDPOINT``, for the processes a test
    starts, and huggingface_hub's constants, which it reads at import, for this one) with a fresh ``HF_HOME``;
    the levers a test pulls (tampered files, connection resets) are released afterwards."""
    from huggingface_hub import constants

    home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_ENDPOINT", hub_server.endpoint)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    for var in ("HF_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "HF_DATASETS_CACHE"):
        monkeypatch.delenv(var, raising=False)
    settings = {
        "ENDPOINT": hub_server.endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": hub_server.endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_TOKEN_PATH": str(home / "token"),
        "HF_STORED_TOKENS_PATH": str(home / "stored_tokens"),
        "HF_HUB_OFFLINE": False,
    }
    for name, value in settings.items():
        monkeypatch.setattr(constants, name, value)
    hub_server.requests.clear()
    yield hub_server
    for repo in hub_server.repos.values():
        repo.tampered.clear()
        repo.reset_once.clear()
        repo.cut_once.clear()
