"""Every ``python -m san...`` command that the documentation, the configs and the docstrings show runs (``--help``),
each in a process of its own."""

from __future__ import annotations

import subprocess
import sys

from helpers import COMMAND, ROOT, documented


def test_every_python_m_command_shown_runs():
    """``python -m <module> --help`` of every module a command shows exits 0 (run side by side)."""
    modules = documented(COMMAND)
    assert {"san.core.compare", "san.report.readme", "san.models.sources.hub"} <= set(modules)
    procs = {
        module: subprocess.Popen(
            [sys.executable, "-m", module, "--help"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for module in sorted(modules)
    }
    failed = {}
    for module, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        if proc.returncode != 0 or "usage:" not in out:
            failed[module] = (sorted(modules[module]), out[-500:])
    assert not failed, failed
