"""pytest setup: tests under tests/integration/ build the workflow (minutes) and carry the ``slow`` mark."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import copy_workflow
from helpers import default_config as _default_config

INTEGRATION = Path(__file__).resolve().parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION in Path(item.fspath).parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    """A fresh copy of the workflow in a temporary folder."""
    return copy_workflow(tmp_path / "wf")


@pytest.fixture(scope="session")
def default_config() -> dict:
    """The parsed config.yaml."""
    return _default_config()
