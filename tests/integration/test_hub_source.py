"""The ``hub`` model source through the real huggingface_hub client against a local hub (tests/hub_server.py):
revision resolution and commit pins, the hub's announced hashes and the config's pins, offline use of the cache,
404/401 answers, an interrupted download, the tokenizer repository, and the pins printed for the config."""

import hashlib
import json

import pytest
import yaml
from huggingface_hub import constants

from san.models.folders import AcquisitionError, sha256_file, verify_folder
from san.models.load import load_model
from san.models.sources import hub as hub_source
from san.models.store import materialise

from hub_repos import GATED, MINILM, TOKENIZER

BERT = "google-bert/bert-base-cased"
GPT2 = "openai-community/gpt2"


def acquire(tmp_path, repo_id, family="bert", name="m", **source):
    """Materialise ``repo_id`` as model ``name``'s pretrained weights under ``tmp_path/models``; its folder."""
    out = tmp_path / "models" / name / "pretrained"
    materialise(name, family, "pretrained", {"source": "hub", "repo_id": repo_id, **source}, out)
    return out


def left_in(tmp_path, name="m") -> list[str]:
    """What a failed acquisition left in the model's folder (nothing: no partial folder)."""
    folder = tmp_path / "models" / name
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def flipped(data: bytes, at: int = -1) -> bytes:
    """``data`` with one byte changed (same size: the client's size check passes)."""
    at %= len(data)
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


def test_branch_resolves_to_a_commit_recorded_with_every_file_hashed(tmp_path, hub):
    repo = hub.repos[("model", MINILM)]
    out = acquire(tmp_path, MINILM, revision="main")
    manifest = verify_folder(out)
    assert manifest["commit"] == repo.commit("main") and manifest["revision"] == "main"
    files = sorted(p for p in repo.branches["main"] if "/" not in p and p.endswith((".json", ".safetensors", ".txt")))
    assert sorted(manifest["sha256"]) == files
    for name in files:
        assert manifest["sha256"][name] == hashlib.sha256(repo.branches["main"][name]).hexdigest()
    fetched = {path for method, path in hub.requests if method == "GET"}
    assert not any("1_Pooling" in p or "pytorch_model.bin" in p or "README" in p for p in fetched)
    load_model(out, "bert")


def test_only_the_model_files_of_a_shared_cache_snapshot_are_copied(tmp_path, hub):
    import huggingface_hub

    huggingface_hub.hf_hub_download(MINILM, "pytorch_model.bin")  # another tool's download into the same cache
    huggingface_hub.hf_hub_download(MINILM, "README.md")
    manifest = verify_folder(acquire(tmp_path, MINILM))
    assert "model.safetensors" in manifest["sha256"]
    assert "pytorch_model.bin" not in manifest["sha256"] and "README.md" not in manifest["sha256"]


def test_a_pinned_commit_that_differs_is_refused_before_download(tmp_path, hub):
    with pytest.raises(AcquisitionError, match=r"resolves to commit [0-9a-f]{40}, but models.m.pretrained.commit"):
        acquire(tmp_path, BERT, commit="f" * 40)
    assert left_in(tmp_path) == [] and not any("/resolve/" in p for _, p in hub.requests)
    pinned = hub.repos[("model", BERT)].commit("main")
    assert json.loads((acquire(tmp_path, BERT, commit=pinned) / "manifest.json").read_text())["commit"] == pinned


@pytest.mark.parametrize("path", ["model.safetensors", "config.json"])
def test_bytes_that_differ_from_the_announced_hash_are_refused(tmp_path, hub, path):
    repo = hub.repos[("model", BERT)]
    repo.tampered[path] = flipped(repo.branches["main"][path])
    with pytest.raises(AcquisitionError, match=f"downloaded {path} hashes to .* but the hub announced"):
        acquire(tmp_path, BERT)
    assert left_in(tmp_path) == []
    repo.tampered.clear()  # the altered blob was removed from the cache: a rerun downloads the genuine file
    assert (
        verify_folder(acquire(tmp_path, BERT))["sha256"][path]
        == hashlib.sha256(repo.branches["main"][path]).hexdigest()
    )


def test_a_file_that_differs_from_its_pin_is_refused(tmp_path, hub):
    genuine = hub.repos[("model", BERT)].branches["main"]["model.safetensors"]
    pins = {"model.safetensors": hashlib.sha256(flipped(genuine)).hexdigest()}
    with pytest.raises(AcquisitionError, match="sha256 of model.safetensors is .* but the config pins"):
        acquire(tmp_path, BERT, sha256=pins)
    assert left_in(tmp_path) == []
    assert acquire(tmp_path, BERT, sha256={"model.safetensors": hashlib.sha256(genuine).hexdigest()}).is_dir()


def test_offline_uses_the_cache_and_fails_clearly_without_one(tmp_path, hub, monkeypatch):
    online = json.loads((acquire(tmp_path, BERT, name="a") / "manifest.json").read_text())
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub.requests.clear()
    offline = json.loads((acquire(tmp_path, BERT, name="b") / "manifest.json").read_text())
    assert offline["commit"] == online["commit"] and offline["sha256"] == online["sha256"]
    assert hub.requests == []
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty_cache"))
    with pytest.raises(
        AcquisitionError, match=f"'{BERT}'.*for models.c.pretrained.*HF_HUB_OFFLINE is set.*offline default"
    ):
        acquire(tmp_path, BERT, name="c")
    assert left_in(tmp_path, "c") == []


@pytest.mark.parametrize(
    ("repo_id", "revision", "message"),
    [
        ("google-bert/bert-base-casd", "main", "no such repository.*models.m.pretrained.repo_id"),
        (BERT, "v9", "has no revision 'v9'.*models.m.pretrained.revision"),
        (GATED, "main", "gated.*Accept its conditions.*HF_TOKEN"),
    ],
)
def test_missing_repository_revision_and_gated_repository_say_what_to_fix(tmp_path, hub, repo_id, revision, message):
    with pytest.raises(AcquisitionError, match=message) as err:
        acquire(tmp_path, repo_id, revision=revision)
    assert "unreachable" not in str(err.value)
    assert left_in(tmp_path) == []


def test_an_unreachable_hub_says_so_and_names_the_offline_default(tmp_path, hub, monkeypatch):
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused at once
    with pytest.raises(AcquisitionError, match="unreachable.*offline default"):
        acquire(tmp_path, BERT)
    assert left_in(tmp_path) == []


def test_a_connection_reset_in_the_weights_fails_the_job_and_a_rerun_completes(tmp_path, hub):
    """huggingface_hub does not retry a reset (a read error): the job fails with what to do, nothing is left in
    the model's folder, and running it again completes."""
    repo = hub.repos[("model", BERT)]
    repo.reset_once.add("model.safetensors")
    with pytest.raises(AcquisitionError, match="unreachable or the download was interrupted.*rerunning fetches only"):
        acquire(tmp_path, BERT)
    assert left_in(tmp_path) == [] and not repo.reset_once
    weights = repo.branches["main"]["model.safetensors"]
    manifest = verify_folder(acquire(tmp_path, BERT))
    assert manifest["sha256"]["model.safetensors"] == hashlib.sha256(weights).hexdigest()


def test_a_connection_closed_half_way_is_retried_by_the_client(tmp_path, hub):
    """A body cut short (the connection closed before its announced length) is downloaded again by huggingface_hub
    itself, within the same job."""
    repo = hub.repos[("model", BERT)]
    repo.cut_once.add("model.safetensors")
    weights = repo.branches["main"]["model.safetensors"]
    manifest = verify_folder(acquire(tmp_path, BERT))
    assert manifest["sha256"]["model.safetensors"] == hashlib.sha256(weights).hexdigest()
    lfs = f"/lfs/{hashlib.sha256(weights).hexdigest()}"
    assert [p for m, p in hub.requests if m == "GET" and p == lfs] == [lfs, lfs] and not repo.cut_once


def test_the_tokenizer_repository_is_pinned_by_revision_commit_and_sha256(tmp_path, hub, monkeypatch):
    tok = hub.repos[("model", TOKENIZER)]
    source = {"tokenizer_repo_id": TOKENIZER, "tokenizer_revision": "v1", "tokenizer_commit": tok.commit("v1")}
    out = acquire(tmp_path, GPT2, "gpt2", **source)
    manifest = verify_folder(out)
    assert manifest["tokenizer_commit"] == tok.commit("v1") and manifest["tokenizer_revision"] == "v1"
    assert set(tok.branches["v1"]) <= set(manifest["sha256"])
    with pytest.raises(AcquisitionError, match="models.x.pretrained.tokenizer_commit pins e"):
        acquire(tmp_path, GPT2, "gpt2", name="x", **{**source, "tokenizer_commit": "e" * 40})
    tok.tampered["vocab.txt"] = flipped(tok.branches["v1"]["vocab.txt"])
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "fresh_cache"))  # the genuine one is cached
    with pytest.raises(AcquisitionError, match="downloaded vocab.txt hashes to"):
        acquire(tmp_path, GPT2, "gpt2", name="y", **source)
    tok.tampered.clear()
    pins = {"tokenizer.json": "0" * 64}
    with pytest.raises(AcquisitionError, match="sha256 of tokenizer.json"):
        acquire(tmp_path, GPT2, "gpt2", name="z", **source, sha256=pins)
    assert left_in(tmp_path, "x") == left_in(tmp_path, "y") == left_in(tmp_path, "z") == []


def test_the_pins_command_prints_the_recorded_commit_and_hashes(tmp_path, hub, capsys):
    out = acquire(tmp_path, BERT, name="bert-base-cased")
    assert hub_source.main([str(tmp_path / "models")]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    entry = printed["models"]["bert-base-cased"]["pretrained"]
    manifest = verify_folder(out)
    assert entry == {"commit": manifest["commit"], "sha256": manifest["sha256"]}
    assert entry["sha256"]["model.safetensors"] == sha256_file(out / "model.safetensors")
    assert acquire(tmp_path, BERT, name="again", **entry).is_dir()  # the printed pins are accepted
    assert hub_source.main([str(tmp_path / "nothing")]) == 1
