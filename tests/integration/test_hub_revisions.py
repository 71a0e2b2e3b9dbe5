"""A series of hub revisions through the local hub: a repository with several branches (checkpoints of a small
trained series, one branch serving another's weights), pinned once, a missing revision refused by name before
anything is written, duplicates found by their weights, a moved branch refused, and the series analysed with its
revision dimension."""

import json

import numpy as np
import pytest
import xarray as xr

from san.core.text import content_hash, pydoc_documents, tokenize_documents
from san.models.folders import AcquisitionError, load_tokenizer, verify_folder
from san.models.sources.series import expand_revisions
from san.models.store import acquire_series
from san.rank_collapse.series.experiment import run_series

from helpers import checkpoint_files, train_tiny_series
from hub_server import Repo

REPO = "tiny-org/neox-series"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return train_tiny_series(tmp_path_factory.mktemp("trained"))


@pytest.fixture
def series_repo(hub, checkpoints):
    branches = {f"step{s}": checkpoint_files(checkpoints / f"step{s}") for s in (0, 1, 2, 4)}
    branches["step8"] = dict(branches["step4"])  # a later branch serving the same weights
    branches["main"] = dict(branches["step4"])
    return hub.add(Repo(REPO, "model", branches))


def test_a_missing_revision_is_refused_by_name_before_anything_is_written(tmp_path, series_repo):
    source = {"source": "hub", "repo_id": REPO, "revisions": ["step0", "step1", "step9", "step99"]}
    with pytest.raises(AcquisitionError, match=r"no revision\(s\) \['step9', 'step99'\]"):
        acquire_series("neox", None, source, tmp_path / "series", "models.neox.pretrained")
    assert not (tmp_path / "series").exists()


def test_every_branch_is_listed_in_step_order(series_repo):
    assert expand_revisions("all", REPO, "k") == ["step0", "step1", "step2", "step4", "step8", "main"]
    assert expand_revisions({"schedule": {"last": 8, "every": 4, "log_until": 2}}, REPO, "k") == [
        "step0", "step1", "step2", "step4", "step8"
    ]  # fmt: skip


def test_a_series_is_pinned_deduplicated_and_analysed(tmp_path, series_repo):
    source = {"source": "hub", "repo_id": REPO, "revisions": ["step0", "step2", "step4", "step8"]}
    root = tmp_path / "series"
    record = acquire_series("neox", None, source, root, "models.neox.pretrained")
    commits = {b: series_repo.commit(b) for b in series_repo.branches}
    assert record["commits"] == {r: commits[r] for r in source["revisions"]}
    assert json.loads((root / "pins.json").read_text())["commits"] == record["commits"]
    assert record["duplicates"] == {"step8": "step4"} and not (root / "step8").exists()
    for revision in ("step0", "step2", "step4"):
        manifest = verify_folder(root / revision)
        assert manifest["commit"] == commits[revision] and manifest["revision"] == revision
        assert manifest["family"] == "gpt_neox"
    # the pins are reused: a branch that moves afterwards is refused, not silently followed
    series_repo.branches["step4"] = dict(series_repo.branches["step1"])
    with pytest.raises(AcquisitionError, match="has moved"):
        acquire_series("neox", None, source, root, "models.neox.pretrained")
    # the revisions analysed with their steps, read from the names
    folders = {0: {r: root / r for r in ("step0", "step2", "step4")}}
    ids = tokenize_documents(load_tokenizer(root / "step0"), pydoc_documents(), 16, 2, 0)
    inputs = xr.Dataset({"input_ids": (("sample", "token"), ids)}, attrs={"input_sha256": content_hash(ids)})
    settings = {
        "variants": ["SAN"],
        "dtype": "float64",
        "batch_size": 2,
        "albert_no_mlp": "remove",
        "control_token_seed": 0,
        "massive_token_factor": 10.0,
    }
    ds = run_series("gpt_neox", folders, inputs, settings)
    assert list(ds["revision"].values) == ["step0", "step2", "step4"] and list(ds["step"].values) == [0, 2, 4]
    assert np.isfinite(ds["residual_ratio"]).all()


def test_a_hub_series_is_analysed_one_revision_on_disk_at_a_time(tmp_path, series_repo):
    from san.rank_collapse.series.experiment import run_hub_series

    source = {"source": "hub", "repo_id": REPO, "revisions": ["step0", "step2", "step4", "step8"]}
    text = {"seq_len": 16, "n_sequences": 2, "seed": 0}
    settings = {
        "variants": ["SAN", "transformer"],
        "dtype": "float64",
        "batch_size": 2,
        "albert_no_mlp": "remove",
        "control_token_seed": 0,
        "massive_token_factor": 10.0,
    }
    ds = run_hub_series("neox", source, tmp_path / "s", pydoc_documents(), text, settings)
    assert list(ds["revision"].values) == source["revisions"] and list(ds["step"].values) == [0, 2, 4, 8]
    assert list(ds["duplicate_of"].values) == ["", "", "", "step4"]
    four, eight = (ds["residual_ratio"].sel(revision=r).values for r in ("step4", "step8"))
    np.testing.assert_array_equal(four, eight)
    assert not np.array_equal(ds["residual_ratio"].sel(revision="step0").values, four)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["pins.json", "series.json"], "weights removed"
    import huggingface_hub

    cached = [r for r in huggingface_hub.scan_cache_dir().repos if r.repo_id == REPO]
    assert all(not r.revisions for r in cached), "the downloads left the cache too"


@pytest.fixture
def separate_repos(hub, checkpoints):
    """The checkpoints as repositories of their own (MultiBERTs' layout), each on its ``main`` branch; step 8's
    repository serves step 4's weights."""
    files = {s: checkpoint_files(checkpoints / f"step{s}") for s in (0, 2, 4)}
    files[8] = dict(files[4])
    return {f"step{s}": hub.add(Repo(f"tiny-org/neox-seed_0-step_{s}", "model", {"main": f})) for s, f in files.items()}


def test_a_series_of_separate_repositories_is_pinned_and_acquired(tmp_path, separate_repos):
    """``repos``: each revision the main branch of its own repository, pinned (the repositories recorded with the
    pins), acquired, deduplicated by its weights and analysed in the listed order with the steps its name states."""
    from san.rank_collapse.series.experiment import run_hub_series

    repos = {r: repo.repo_id for r, repo in separate_repos.items()}
    source = {"source": "hub", "repo_id": REPO, "revisions": list(repos), "repos": repos}
    root = tmp_path / "series"
    text = {"seq_len": 16, "n_sequences": 2, "seed": 0}
    settings = {
        "variants": ["SAN"],
        "dtype": "float64",
        "batch_size": 2,
        "albert_no_mlp": "remove",
        "control_token_seed": 0,
        "massive_token_factor": 10.0,
    }
    ds = run_hub_series("neox", source, root, pydoc_documents(), text, settings)
    pins = json.loads((root / "pins.json").read_text())
    assert pins["repos"] == repos
    assert pins["commits"] == {r: repo.commit("main") for r, repo in separate_repos.items()}
    record = json.loads((root / "series.json").read_text())
    assert record["repos"] == repos and record["duplicates"] == {"step8": "step4"}
    assert {r: m["repo_id"] for r, m in record["manifests"].items()} == {
        r: repos[r] for r in ("step0", "step2", "step4")
    }
    assert list(ds["step"].values) == [0, 2, 4, 8] and list(ds["duplicate_of"].values) == ["", "", "", "step4"]
    assert not np.array_equal(ds["residual_ratio"].sel(revision="step0"), ds["residual_ratio"].sel(revision="step4"))
    # other repositories for the same revisions are refused by the pins, naming the file
    moved = {**source, "repos": {**repos, "step2": repos["step0"]}}
    with pytest.raises(AcquisitionError, match="pins.json pins"):
        run_hub_series("neox", moved, root, pydoc_documents(), text, settings)


def test_a_missing_repository_of_a_revision_is_refused_before_anything_is_written(tmp_path, separate_repos):
    repos = {"step0": "tiny-org/neox-seed_0-step_0", "step1": "tiny-org/no-such-repository"}
    source = {"source": "hub", "repo_id": REPO, "revisions": list(repos), "repos": repos}
    with pytest.raises(AcquisitionError, match="no-such-repository"):
        acquire_series("neox", None, source, tmp_path / "series", "models.neox.pretrained")
    assert not (tmp_path / "series").exists()
    with pytest.raises(AcquisitionError, match=r"no repository for revision\(s\) \['step2'\]"):
        acquire_series("neox", None, {**source, "revisions": ["step0", "step2"]}, tmp_path / "s2", "k")
