"""End to end: a config naming a hub repository and a list of its revisions, against the local hub
(tests/hub_server.py) serving a repository with several branches (checkpoints of a small trained series, one branch
serving another's weights): the series' results and figure, the duplicate flagged, the pins written, one revision on
disk at a time; a missing revision refused by name before anything is written."""

import json

import numpy as np
import pytest

from san.core.storage import read_netcdf

from helpers import checkpoint_files, copy_workflow, snakemake, tiny_config, train_tiny_series, write_config
from hub_server import Repo

REPO = "tiny-org/neox-series-wf"
MODEL = "neox"
RESULT = f"results/rank_collapse_series/{MODEL}.nc"


def _config(default_config, revisions):
    cfg = tiny_config(default_config)
    cfg["series"]["seeds"] = []  # the hub series alone
    cfg["series"]["hub_models"] = [MODEL]
    cfg["models"][MODEL] = {"pretrained": {"source": "hub", "repo_id": REPO, "revisions": revisions}}
    return cfg


@pytest.fixture(scope="module")
def served(tmp_path_factory, hub_server):
    out = train_tiny_series(tmp_path_factory.mktemp("trained"))
    files = {f"step{s}": checkpoint_files(out / f"step{s}") for s in (0, 1, 2, 4)}
    files["step8"] = dict(files["step4"])
    return hub_server.add(Repo(REPO, "model", files))


def _env(hub_server, home):
    return {"HF_ENDPOINT": hub_server.endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1"}


def test_a_hub_series_builds_its_results_and_figure(tmp_path, default_config, hub_server, served):
    wf = copy_workflow(tmp_path / "wf")
    cfg = _config(default_config, ["step0", "step2", "step4", "step8"])
    write_config(wf, cfg)
    figures = [f"results/figures/training_dynamics_model_{MODEL}.{e}" for e in cfg["figures"]["formats"]]
    snakemake(wf, RESULT, *figures, "--cores", "2", env=_env(hub_server, tmp_path / "hf"))
    ds = read_netcdf(wf / RESULT)
    assert list(ds["revision"].values) == ["step0", "step2", "step4", "step8"]
    assert list(ds["step"].values) == [0, 2, 4, 8] and list(ds["duplicate_of"].values) == ["", "", "", "step4"]
    np.testing.assert_array_equal(
        ds["residual_ratio"].sel(revision="step8").values, ds["residual_ratio"].sel(revision="step4").values
    )
    assert all((wf / f).stat().st_size > 0 for f in figures)
    pins = json.loads((wf / f"results/series_hub/{MODEL}/pins.json").read_text())
    assert pins["commits"] == {r: served.commit(r) for r in ("step0", "step2", "step4", "step8")}
    left = sorted(p.name for p in (wf / f"results/series_hub/{MODEL}").iterdir())
    assert left == ["pins.json", "series.json"], "every revision's weights removed after its analysis"


def test_a_missing_revision_is_refused_by_name(tmp_path, default_config, hub_server, served):
    wf = copy_workflow(tmp_path / "wf")
    write_config(wf, _config(default_config, ["step0", "step3"]))
    proc = snakemake(wf, RESULT, "--cores", "1", check=False, env=_env(hub_server, tmp_path / "hf"))
    assert proc.returncode != 0
    log = (wf / f"logs/rank_collapse_hub_series/{MODEL}.log").read_text()
    assert "no revision(s) ['step3']" in log
    assert not (wf / RESULT).exists() and not (wf / f"results/series_hub/{MODEL}/pins.json").exists()
