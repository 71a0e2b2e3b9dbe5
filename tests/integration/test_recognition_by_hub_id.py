"""A model named by its hub id alone (the local hub, tests/hub_server.py): its family recognised from its
config.json, its init weights a random initialisation of the same architecture, a class with a family's blocks run
as that family, and the models refused by design (remote code, encoder-decoder, mixture-of-experts of no family of
the table, an unknown architecture, a family that contradicts the file, pickle-only weights without consent), each
with its message and nothing left behind; pickle weights converted, safetensors preferred, a multimodal wrapper
acquired as its text model, a sharded checkpoint whole. Tiny random checkpoints built from transformers config
classes (tests/hub_repos.py)."""

import hashlib
import json

import pytest
import torch
import transformers
from safetensors.torch import load_file

from san.models.ablations import variant
from san.models.folders import verify_folder
from san.models.load import load_model
from san.models.recognise import UnsupportedModel
from san.models.store import materialise
from san.rank_collapse.experiment import residual_stream

from hub_repos import checkpoint_repo, tiny_checkpoint

TINY_DECODER = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "max_position_embeddings": 64}  # fmt: skip


def serve(hub, tmp_path, repo_id, arch, **repo):
    """Serve a tiny checkpoint of the transformers config ``arch`` as ``repo_id`` (seed 1: other weights than an
    init's at seed 0); its folder."""
    folder = tiny_checkpoint(arch, tmp_path / "built" / repo_id.replace("/", "--"), seed=1)
    hub.add(checkpoint_repo(repo_id, folder, **repo))
    return folder


def acquire(tmp_path, repo_id, family=None, weights="pretrained", **source):
    out = tmp_path / "models" / "m" / weights
    spec = {"source": "hub", "repo_id": repo_id, **source}
    materialise("m", family, weights, spec, out)
    return out


def test_a_hub_id_is_acquired_recognised_and_initialised_in_its_own_architecture(tmp_path, hub):
    built = serve(hub, tmp_path, "tiny-org/llama", transformers.LlamaConfig(**TINY_DECODER))
    pretrained = acquire(tmp_path, "tiny-org/llama")
    manifest = verify_folder(pretrained)
    assert manifest["family"] == "llama" and manifest["recognition"]["by"] == "architectures"
    assert manifest["recognition"]["facts"]["grouped_kv"] is True
    init = tmp_path / "models" / "m" / "init"
    materialise("m", None, "init", {"seed": 0}, init, pretrained=pretrained)
    init_manifest = verify_folder(init)
    assert init_manifest["family"] == "llama" and init_manifest["seed"] == 0
    assert init_manifest["architecture_sha256"] == manifest["sha256"]["config.json"]
    assert init_manifest["pretrained"]["repo_id"] == "tiny-org/llama"
    assert init_manifest["sha256"]["tokenizer.json"] == manifest["sha256"]["tokenizer.json"]
    a, b = load_model(pretrained, "llama"), load_model(init, "llama")
    assert a.config.to_diff_dict().keys() >= {"num_key_value_heads"} and b.config.num_key_value_heads == 2
    served = load_file(built / "model.safetensors")
    assert torch.equal(a.layers[0].mlp.up_proj.weight, served["model.layers.0.mlp.up_proj.weight"].double())
    assert not torch.equal(a.layers[0].mlp.up_proj.weight, b.layers[0].mlp.up_proj.weight)
    again = tmp_path / "again"
    materialise("m", None, "init", {"seed": 0}, again, pretrained=pretrained)  # seed 0: the same weights
    assert verify_folder(again)["sha256"]["model.safetensors"] == init_manifest["sha256"]["model.safetensors"]


@pytest.mark.parametrize(
    ("config", "family", "model_class", "final_norm"),
    [
        (lambda: transformers.OlmoConfig(**TINY_DECODER), "llama", "OlmoModel", True),
        (lambda: transformers.XLMRobertaConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                               intermediate_size=32), "roberta", "XLMRobertaModel", False),
    ],  # (the XLM-RoBERTa checkpoint is its base model's: the loader refuses a checkpoint without the pooler)
    ids=["olmo-as-llama", "xlm-roberta-as-roberta"],
)  # fmt: skip
def test_a_class_with_the_blocks_of_a_family_runs_as_that_family(
    tmp_path, hub, config, family, model_class, final_norm
):
    """A class listed in a family's row loads as its own transformers class; the family's hooks measure its
    residual stream (the transformer variant is the model's own hidden states) and its ablation changes it."""
    repo_id = f"tiny-org/{model_class.lower()}"
    folder = tiny_checkpoint(config(), tmp_path / "built" / repo_id, seed=1,
                             model_class=None if final_norm else getattr(transformers, model_class))  # fmt: skip
    hub.add(checkpoint_repo(repo_id, folder))
    folder = acquire(tmp_path, repo_id)
    assert verify_folder(folder)["family"] == family
    model = load_model(folder, family)
    assert type(model).__name__ == model_class
    ids = torch.arange(5, 13).reshape(1, 8)
    stream = residual_stream(model, family, ids)
    assert len(stream) == 3
    hidden = model(ids, output_hidden_states=True).hidden_states  # a decoder's last one after its final norm
    for got, want in zip(stream[: -1 if final_norm else None], hidden[: -1 if final_norm else None], strict=True):
        torch.testing.assert_close(got, want)
    with variant(model, family, "SAN"):  # the family's SAN: no skip, no MLP
        san = residual_stream(model, family, ids)
    assert not torch.allclose(san[1], stream[1])


@pytest.mark.parametrize(
    ("repo_id", "config", "extra", "family", "message"),
    [
        ("tiny-org/remote", lambda: transformers.LlamaConfig(**TINY_DECODER),
         {"auto_map": {"AutoModelForCausalLM": "modeling_mine.Mine"}}, None, "auto_map.*never trusted"),
        ("tiny-org/t5", lambda: transformers.T5Config(d_model=16, d_ff=32, num_layers=1, num_heads=2, d_kv=8),
         None, None, "encoder-decoder"),
        ("tiny-org/jetmoe", lambda: transformers.JetMoeConfig(hidden_size=16, num_hidden_layers=1,
                                                              num_attention_heads=2, num_local_experts=2),
         None, None, "mixture-of-experts"),
        ("tiny-org/opt", lambda: transformers.OPTConfig(hidden_size=16, ffn_dim=32, num_hidden_layers=1,
                                                        num_attention_heads=2, word_embed_proj_dim=16),
         None, None, "no supported family.*'OPTForCausalLM'"),
        ("tiny-org/llama-as-bert", lambda: transformers.LlamaConfig(**TINY_DECODER), None, "bert",
         "gives family 'bert', but its config.json is of family 'llama'"),
    ],
    ids=["remote-code", "encoder-decoder", "moe", "unsupported", "contradicting-family"],
)  # fmt: skip
def test_a_refused_model_fails_its_acquisition_naming_the_repo_and_leaves_nothing(
    tmp_path, hub, repo_id, config, extra, family, message
):
    serve(hub, tmp_path, repo_id, config(), config=extra)
    with pytest.raises(UnsupportedModel, match=message) as err:
        acquire(tmp_path, repo_id, family)
    assert f"hub {repo_id}@" in str(err.value)
    assert "Supported families" in str(err.value) or family is not None  # a contradiction names both families
    assert not any((tmp_path / "models" / "m").iterdir())


def test_pickle_only_weights_need_the_entrys_consent_and_become_safetensors(tmp_path, hub):
    built = serve(hub, tmp_path, "tiny-org/pickled", transformers.LlamaConfig(**TINY_DECODER), pickle=True)
    with pytest.raises(Exception, match="allow_pickle: true") as err:
        acquire(tmp_path, "tiny-org/pickled")
    assert "has no safetensors weights" in str(err.value)
    assert not any((tmp_path / "models" / "m").iterdir())
    folder = acquire(tmp_path, "tiny-org/pickled", allow_pickle=True)
    manifest = verify_folder(folder)
    assert "pytorch_model.bin" in manifest["pickle_sha256"] and "pytorch_model.bin" not in manifest["sha256"]
    assert "weights_only=True" in manifest["converted_from_pickle"]
    served, got = load_file(built / "model.safetensors"), load_file(folder / "model.safetensors")
    assert served.keys() == got.keys() and all(torch.equal(served[k], got[k]) for k in served)
    assert load_model(folder, "llama").config.num_hidden_layers == 2


def test_safetensors_are_preferred_where_both_exist(tmp_path, hub):
    built = serve(hub, tmp_path, "tiny-org/both", transformers.LlamaConfig(**TINY_DECODER))
    repo = hub.repos[("model", "tiny-org/both")]
    repo.branches["main"]["pytorch_model.bin"] = b"\x80\x04 not a pickle anyone should load"
    manifest = verify_folder(acquire(tmp_path, "tiny-org/both", allow_pickle=True))
    assert "pickle_sha256" not in manifest and "pytorch_model.bin" not in manifest["sha256"]
    assert not any(path.endswith(".bin") for method, path in hub.requests if method == "GET")
    assert json.loads((built / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]


def test_a_multimodal_wrapper_is_acquired_as_its_text_model(tmp_path, hub):
    text = transformers.Gemma3TextConfig(**TINY_DECODER, head_dim=4)
    vision = transformers.SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                             num_attention_heads=2, image_size=28, patch_size=14)  # fmt: skip
    wrapper = transformers.Gemma3Config(
        text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=1
    )
    built = serve(hub, tmp_path, "tiny-org/gemma3-vlm", wrapper)
    folder = acquire(tmp_path, "tiny-org/gemma3-vlm")
    manifest = verify_folder(folder)
    assert manifest["family"] == "gemma3" and manifest["recognition"]["text_config"] is True
    wrapped = manifest["text_model_of"]
    assert wrapped["architectures"] == ["Gemma3ForConditionalGeneration"] and wrapped["tensors_left_out"] > 0
    served_bytes = hub.repos[("model", "tiny-org/gemma3-vlm")].branches["main"]["model.safetensors"]
    assert wrapped["sha256"]["model.safetensors"] == hashlib.sha256(served_bytes).hexdigest()
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["Gemma3ForCausalLM"]
    model = load_model(folder, "gemma3")
    served = load_file(built / "model.safetensors")
    key = next(k for k in served if k.endswith("layers.1.self_attn.q_proj.weight"))
    assert key.startswith("language_model.") and torch.equal(
        model.layers[1].self_attn.q_proj.weight, served[key].double()
    )


def test_a_sharded_safetensors_checkpoint_is_acquired_whole(tmp_path, hub):
    folder = tiny_checkpoint(transformers.LlamaConfig(**TINY_DECODER), tmp_path / "one", seed=1)
    model = transformers.LlamaForCausalLM.from_pretrained(folder)
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, max_shard_size="100KB")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        (sharded / name).write_bytes((folder / name).read_bytes())
    shards = sorted(p.name for p in sharded.glob("model-*.safetensors"))
    assert len(shards) > 1 and (sharded / "model.safetensors.index.json").is_file()
    hub.add(checkpoint_repo("tiny-org/sharded", sharded))
    manifest = verify_folder(acquire(tmp_path, "tiny-org/sharded"))
    assert set(shards) <= set(manifest["sha256"]) and "model.safetensors.index.json" in manifest["sha256"]
    got = load_model(tmp_path / "models" / "m" / "pretrained", "llama")
    torch.testing.assert_close(got.layers[1].mlp.down_proj.weight, model.model.layers[1].mlp.down_proj.weight.double())
