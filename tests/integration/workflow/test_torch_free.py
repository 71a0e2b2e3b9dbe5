"""The workflow parses and plans without torch, and its figure, table, gather and report jobs start without importing
it (seconds of start-up per job): a subprocess in which importing torch fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, copy_workflow


def test_dry_run_needs_no_torch(tmp_path: Path):
    """`snakemake -n` parses and plans the workflow in an environment where importing torch fails."""
    fake = tmp_path / "notorch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("torch is not installed here")\n')
    wf = copy_workflow(tmp_path / "wf")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.parent), str(wf)]))
    probe = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "not installed here" in probe.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "all", "fig2", "fig3", "fig4", "all"],
        cwd=wf,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "paths_train" in proc.stdout and "circle_train" in proc.stdout


TORCH_FREE = (
    "san.experiments",
    "san.core.markdown",
    "san.rank_collapse.series.spec",
    "san.rank_collapse.series.claims",
    "san.rank_collapse.series.tables",
    "san.rank_collapse.vision.spec",
    "san.rank_collapse.vision.claims",
    "san.rank_collapse.vision.tables",
    "san.rank_collapse.vision.plots",
    "san.rank_collapse.tables",
    "san.circle.tables",
    "san.paths.tables",
    "san.theory.tables",
    "san.propagation.tables",
    "san.report.readme",
    "san.models.spec",
    "san.models.folders",
    "san.core.plotting",
    "san.core.compare",
    "san.rank_collapse.plots",
    "san.circle.results",
    "san.circle.plots",
    "san.paths.counts",
    "san.paths.plots",
    "san.report.captions",
    "san.rank_collapse.claims",
    "san.rank_collapse.pretrained_claims",
    "san.rank_collapse.sink_claims",
    "san.rank_collapse.sink",
    "san.circle.claims",
    "san.paths.claims",
    "san.report.runtimes",
    "san.theory.claims",
    "san.theory.plots",
    "san.propagation.claims",
    "san.claims.evidence",
    "san.claims.per_model",
    "san.propagation.depth_claims",
    "san.propagation.qk_variance_claims",
    "san.propagation.masks_claims",
    "san.propagation.sequence_length_claims",
    "san.propagation.plots",
)


def test_figure_table_and_report_modules_import_no_torch(tmp_path: Path):
    """Figure, table, gather and report jobs start without importing torch (seconds of start-up per job)."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise ImportError("torch imported")\n')
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in TORCH_FREE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
