"""The command-line tools print their result alone: transformers' load reports, progress bars and the libraries'
warnings are silenced unless ``-v`` asks for them (san.core.cli), wired into every ``python -m san...`` tool."""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import warnings

import huggingface_hub.utils as hub_utils
import pytest
from transformers.utils import logging as tlog

from san.core import cli
from san.rank_collapse import verify

TOOLS = ("san.rank_collapse.verify", "san.models.sources.hub", "san.core.compare", "san.report.readme")
MODULES = {name: importlib.import_module(name) for name in TOOLS}


@pytest.fixture
def library_state(monkeypatch):
    """The libraries' logging, progress bars, warning filters and environment switches, restored afterwards."""
    for key in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS"):
        monkeypatch.delenv(key, raising=False)
    levels = {name: logging.getLogger(name).level for name in cli.LIBRARIES}
    verbosity, bars, hub_bars = (
        tlog.get_verbosity(),
        tlog.is_progress_bar_enabled(),
        hub_utils.are_progress_bars_disabled(),
    )
    with warnings.catch_warnings():
        yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    tlog.set_verbosity(verbosity)
    (tlog.enable_progress_bar if bars else tlog.disable_progress_bar)()
    (hub_utils.disable_progress_bars if hub_bars else hub_utils.enable_progress_bars)()


def _speak() -> dict:
    """What loading a model makes the libraries print: a load report, a progress bar and a warning."""
    tlog.get_logger("transformers.modeling_utils").warning("lm_head.weight | UNEXPECTED")
    for _ in tlog.tqdm(range(3), desc="Loading weights"):
        pass
    warnings.warn_explicit("a library's warning", UserWarning, "modeling_utils.py", 1, module="transformers.modeling")
    return {"tiny-gpt2": {"init": 1.5e-7}}


def test_quiet_libraries_silences_reports_bars_and_warnings(library_state):
    tlog.set_verbosity_warning()
    tlog.enable_progress_bar()
    cli.quiet_libraries(verbose=True)
    assert tlog.get_verbosity() == logging.WARNING and tlog.is_progress_bar_enabled()
    cli.quiet_libraries()
    assert tlog.get_verbosity() == logging.ERROR and not tlog.is_progress_bar_enabled()
    assert hub_utils.are_progress_bars_disabled()
    assert os.environ["TRANSFORMERS_VERBOSITY"] == "error" and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    with warnings.catch_warnings(record=True) as seen:
        warnings.warn_explicit("x", UserWarning, "modeling_utils.py", 1, module="transformers.modeling")
        warnings.warn_explicit("y", UserWarning, "mine.py", 1, module="san.mine")
    assert [str(w.message) for w in seen] == ["y"]  # the project's own warnings still reach the user


class Records(logging.Handler):
    """The messages that reach a logger's handlers."""

    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("verbose", [False, True])
def test_verify_prints_its_result_alone_unless_verbose(library_state, monkeypatch, capfd, verbose):
    tlog.set_verbosity_warning()
    tlog.enable_progress_bar()
    reports = Records()
    tlog.get_logger("transformers").addHandler(reports)
    monkeypatch.setattr(verify, "verify_run", lambda results: _speak())
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            verify.main(["-v", "results"] if verbose else ["results"])
    finally:
        tlog.get_logger("transformers").removeHandler(reports)
    out, err = capfd.readouterr()
    assert out.split() == ["tiny-gpt2", "init", "largest", "relative", "difference", "1.5e-07"]
    said = (reports.messages, "Loading weights" in err, [str(w.message) for w in seen])
    if verbose:
        assert said == (["lm_head.weight | UNEXPECTED"], True, ["a library's warning"])
    else:
        assert said == ([], False, []) and err == ""


@pytest.mark.parametrize("module", TOOLS)
def test_every_tool_takes_verbose(module):
    source = inspect.getsource(MODULES[module].main)
    assert "add_verbose(" in source and "quiet_libraries(" in source
