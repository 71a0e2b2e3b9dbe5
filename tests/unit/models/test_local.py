"""Local model folders checked with the config, before any job (san/models/local.py), and their pins
(san/models/pins.py): each bad folder refused naming the key or file, nothing written."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from san.core.config import ConfigError
from san.experiments import check_config
from san.models.entries import check_models
from san.models.local import entry_family
from san.models.pins import local_entry, main
from san.rank_collapse.spec import attention_product_models, context_models

from helpers import ROOT

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
}


def folder(tmp_path: Path, config: dict, name: str = "my-llama", files=("model.safetensors", "tokenizer.json")) -> Path:
    """A model folder as save_pretrained writes it (the weights' bytes are not read by the config check)."""
    out = tmp_path / name
    out.mkdir()
    (out / "config.json").write_text(json.dumps(config))
    for f in files:
        (out / f).write_bytes(f.encode())
    return out


def models_config(path: Path, seq_len: int = 128, **entry) -> dict:
    spec = {**local_entry(path), **entry}
    return {"models": {"mine": spec}, "text": {"seq_len": seq_len}, "rank_collapse": {"models": ["mine"]}}


def snapshot(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_pinned_local_decoder_passes_and_joins_the_context_run(tmp_path):
    path = folder(tmp_path, LLAMA)
    cfg = models_config(path)
    check_models(cfg)
    spec = cfg["models"]["mine"]
    assert spec["family"] == "llama" and set(spec["pretrained"]["sha256"]) == {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    }
    del spec["family"]  # recognised from config.json all the same
    check_models(cfg)
    assert entry_family(spec, "mine") == "llama"
    assert context_models(cfg) == ["mine"], "a recognised local decoder joins the context-length run"


def test_a_local_encoder_stays_out_of_the_context_run(tmp_path):
    bert = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 32, "num_attention_heads": 4}
    cfg = models_config(folder(tmp_path, bert))
    del cfg["models"]["mine"]["family"]
    check_models(cfg)
    assert context_models(cfg) == []


REFUSED = [
    ("missing-folder", lambda p, c: c["models"]["mine"]["pretrained"].update(path=str(p.parent / "nowhere")),
     r"'models\.mine\.pretrained\.path': .*nowhere is not a folder"),
    ("missing-tokenizer-pin", lambda p, c: c["models"]["mine"]["pretrained"]["sha256"].pop("tokenizer.json"),
     r"'models\.mine\.pretrained\.sha256': no pin for \['tokenizer\.json'\].*python -m san\.models\.pins"),
    ("wrong-family", lambda p, c: c["models"]["mine"].update(family="gpt2"),
     r"'models\.mine\.family': .*gives family 'gpt2', but its config\.json is of family 'llama'"),
    ("too-few-positions", lambda p, c: c["text"].update(seq_len=512),
     r"'text\.seq_len': 512 tokens exceed the 256 usable position embeddings of model 'mine' "
     r"\(max_position_embeddings: 256 in .*config\.json\)"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_bad_entry_of_a_good_folder_is_refused_by_key(tmp_path, edit, message):
    path = folder(tmp_path, LLAMA)
    cfg = models_config(path)
    edit(path, cfg)
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=message):
        check_models(cfg)
    assert snapshot(tmp_path) == before, "a refused config writes nothing"


BAD_FOLDERS = [
    ("gpt-j", {"architectures": ["GPTJForCausalLM"], "model_type": "gptj", "n_positions": 2048},
     r"'models\.mine\.pretrained\.path': .*'GPTJForCausalLM'.* is of no supported family"),
    ("mamba", {"architectures": ["MambaForCausalLM"], "model_type": "mamba"},
     r"'models\.mine\.pretrained\.path': .*model_type 'mamba' mixes tokens with layers that are not softmax attention"),
    ("decoder-flagged-bert", {"architectures": ["BertLMHeadModel"], "model_type": "bert", "is_decoder": True},
     r"'models\.mine\.pretrained\.path': .*is_decoder: true"),
    ("gpt2-short", {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_positions": 64, "n_embd": 32,
                    "n_head": 4, "n_layer": 2},
     r"'text\.seq_len': 128 tokens exceed the 64 usable position embeddings of model 'mine' \(n_positions: 64"),
]  # fmt: skip


@pytest.mark.parametrize(("config", "message"), [c[1:] for c in BAD_FOLDERS], ids=[c[0] for c in BAD_FOLDERS])
def test_a_bad_folder_is_refused_by_key(tmp_path, config, message):
    path = folder(tmp_path, LLAMA)
    cfg = models_config(path)
    (path / "config.json").write_text(json.dumps(config))  # pins need not match: refused before any hash is read
    del cfg["models"]["mine"]["family"]
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=message):
        check_models(cfg)
    assert snapshot(tmp_path) == before


def test_a_folder_without_weights_or_config_is_refused(tmp_path):
    path = folder(tmp_path, LLAMA, files=("tokenizer.json",))
    cfg = {"models": {"mine": {"pretrained": {"source": "local", "path": str(path), "sha256": {}}}}}
    with pytest.raises(ConfigError, match=r"'models\.mine\.pretrained\.path': .* has no model\.safetensors"):
        check_models(cfg)
    (path / "config.json").unlink()
    with pytest.raises(ConfigError, match=r"'models\.mine\.pretrained\.path': .*config\.json is missing"):
        check_models(cfg)


def test_pins_prints_the_config_entry(tmp_path, capsys):
    path = folder(tmp_path, LLAMA)
    assert main([str(path), "--name", "mine"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed == {"models": {"mine": local_entry(path)}}
    pins = printed["models"]["mine"]["pretrained"]["sha256"]
    import hashlib

    assert pins["tokenizer.json"] == hashlib.sha256(b"tokenizer.json").hexdigest()
    assert main([str(tmp_path / "nowhere")]) == 1


@pytest.mark.slow
def test_one_local_model_is_a_whole_config(tmp_path, default_config):
    """A run of one local model: rank_collapse.models names it alone, every other section left as shipped."""
    cfg = copy.deepcopy(default_config)
    cfg["models"]["mine"] = local_entry(folder(tmp_path, LLAMA))
    cfg["rank_collapse"]["models"] = ["mine"]
    check_config(cfg, ROOT / "workflow" / "schemas", reference=default_config)
    assert attention_product_models(cfg) == [] and context_models(cfg) == ["mine"]
