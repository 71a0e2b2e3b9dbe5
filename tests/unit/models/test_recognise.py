"""A model named by its hub id alone: its family recognised from its config.json (san.models.recognise), its init
weights a random initialisation of the same architecture, and the models refused by design (remote code,
encoder-decoder and its decoders, encoder configs that say is_decoder, token mixers that are not softmax attention,
mixture-of-experts of no family of the table, an unknown architecture, a family
that contradicts the file, pickle-only weights), each with its message and nothing left behind. Tiny random
checkpoints built from transformers config classes (tests/hub_repos.py), served by the local hub."""

import copy
import hashlib
import json

import pytest
import torch
import transformers
from safetensors.torch import load_file

from san.core.config import ConfigError
from san.experiments import check_config
from san.models.ablations import variant
from san.models.acquire import AcquisitionError, load_model, materialise, verify_folder
from san.models.recognise import UnsupportedModel, norm_placement, recognise
from san.models.spec import FAMILY_TABLE, weight_sets
from san.rank_collapse.experiment import residual_stream
from san.rank_collapse.spec import model_priorities

from helpers import ROOT
from hub_repos import checkpoint_repo, tiny_checkpoint

TINY_DECODER = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "max_position_embeddings": 64}  # fmt: skip


def saved(config: transformers.PretrainedConfig, architecture: str | None = None, **extra) -> dict:
    """``config`` as its config.json holds it, naming ``architecture``."""
    out = config.to_dict()
    if architecture:
        out["architectures"] = [architecture]
    return {**out, **extra}


# --- recognition of config.json --------------------------------------------------------------------------------


def test_a_family_is_recognised_by_architecture_then_model_type():
    llama = recognise(saved(transformers.LlamaConfig(**TINY_DECODER), "LlamaForCausalLM"), "hub a/b")
    assert (llama.family, llama.by, llama.architecture, llama.model_type) == (
        "llama", "architectures", "LlamaForCausalLM", "llama"
    )  # fmt: skip
    head = recognise(saved(transformers.BertConfig(), "BertForSequenceClassification"), "hub a/b")
    assert (head.family, head.by) == ("bert", "model_type")  # a fine-tuned head: by its model_type
    explicit = recognise(saved(transformers.GPT2Config(), "GPT2LMHeadModel"), "hub a/b", family="gpt2")
    assert (explicit.family, explicit.by) == ("gpt2", "config")
    olmo = recognise(saved(transformers.OlmoConfig(**TINY_DECODER), "OlmoForCausalLM"), "hub a/b")
    assert olmo.family == "llama" and olmo.model_type == "olmo"  # a Llama block under another class


def test_a_multimodal_wrapper_resolves_to_its_text_model():
    text = transformers.Gemma3TextConfig(**TINY_DECODER, head_dim=4).to_dict()
    wrapper = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text,
               "vision_config": {"model_type": "siglip_vision_model"}}  # fmt: skip
    found = recognise(wrapper, "hub google/gemma-3-4b-it")
    assert (found.family, found.by, found.text_config, found.model_type) == (
        "gemma3", "model_type", True, "gemma3_text"
    )  # fmt: skip
    assert found.facts["attention_window"]["layer_types"] == {"sliding_attention": 2}


def test_the_structural_facts_are_read_from_the_config():
    llama = recognise(saved(transformers.LlamaConfig(**TINY_DECODER), "LlamaForCausalLM"), "x").facts
    assert llama == {"layers": 2, "heads": 4, "width": 16, "norms": "pre", "kv_heads": 2, "grouped_kv": True}
    gemma = recognise(saved(transformers.Gemma3TextConfig(**TINY_DECODER), "Gemma3ForCausalLM"), "x").facts
    assert gemma["norms"] == "pre_and_post" and gemma["qk_norm"] == {"model_type": "gemma3_text"}
    assert gemma["attention_window"]["sliding_window"] == 4096 and "query_pre_attn_scalar" in gemma["multipliers"]
    bert = recognise(saved(transformers.BertConfig(), "BertModel"), "x").facts
    assert bert["norms"] == "post_residual" and "kv_heads" not in bert
    flags = saved(transformers.LlamaConfig(**TINY_DECODER), "LlamaForCausalLM", use_parallel_residual=True,
                  residual_multiplier=0.22, embedding_multiplier=12.0)  # fmt: skip
    facts = recognise(flags, "x").facts
    assert facts["parallel_residual"] == {"use_parallel_residual": True}
    assert facts["multipliers"] == {"residual_multiplier": 0.22, "embedding_multiplier": 12.0}
    assert {norm_placement(f) for f in FAMILY_TABLE} >= {"pre", "post_residual", "pre_and_post"}


@pytest.mark.parametrize(
    ("config", "architecture", "family", "experts"),
    [
        (lambda: transformers.MixtralConfig(**TINY_DECODER, num_local_experts=4), "MixtralForCausalLM", "mixtral",
         {"num_local_experts": 4, "num_experts_per_tok": 2}),
        (lambda: transformers.Qwen2MoeConfig(**TINY_DECODER, num_experts=4, mlp_only_layers=[0]),
         "Qwen2MoeForCausalLM", "qwen2_moe", {"num_experts": 4, "norm_topk_prob": False, "mlp_only_layers": [0]}),
        (lambda: transformers.DeepseekV3Config(**TINY_DECODER, n_routed_experts=4, first_k_dense_replace=1),
         "DeepseekV3ForCausalLM", "deepseek_v3", {"n_routed_experts": 4, "first_k_dense_replace": 1}),
    ],
    ids=["mixtral", "qwen2-moe", "deepseek-v3"],
)  # fmt: skip
def test_a_mixture_of_experts_family_is_recognised_with_its_routing(config, architecture, family, experts):
    """The table's mixture-of-experts families are recognised, never refused, and their expert count, routing and
    dense layers are recorded as facts; gpt-oss's sinks are recorded too."""
    found = recognise(saved(config(), architecture), "hub a/b")
    assert found.family == family and found.facts["norms"] == "pre"
    assert experts.items() <= found.facts["experts"].items()
    sinks = recognise(saved(transformers.GptOssConfig(**TINY_DECODER), "GptOssForCausalLM"), "x").facts
    assert sinks["attention_sinks"] == {"model_type": "gpt_oss"} and sinks["experts"]["num_local_experts"] == 128
    assert "experts" not in recognise(saved(transformers.LlamaConfig(**TINY_DECODER), "LlamaForCausalLM"), "x").facts


def test_a_causal_family_may_say_is_decoder():
    """``is_decoder`` is refused only where the family runs bidirectional attention."""
    assert recognise(saved(transformers.GPT2Config(is_decoder=True), "GPT2LMHeadModel"), "x").family == "gpt2"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (lambda: saved(transformers.LlamaConfig(), "LlamaForCausalLM", auto_map={"AutoModel": "m.M"}),
         "auto_map.*never trusted"),
        (lambda: saved(transformers.T5Config(), "T5ForConditionalGeneration"), "encoder-decoder"),
        (lambda: saved(transformers.MambaConfig(), "MambaForCausalLM"), "model_type 'mamba'.*no SAN"),
        (lambda: saved(transformers.JambaConfig(), "JambaForCausalLM"), "model_type 'jamba'.*not softmax"),
        (lambda: saved(transformers.Qwen3NextConfig(), "Qwen3NextForCausalLM"), "not softmax attention"),
        (lambda: saved(transformers.LlamaConfig(), "LlamaForCausalLM",
                       layer_types=["full_attention", "linear_attention"]),
         r"layer_types.*\['linear_attention'\]"),
        (lambda: saved(transformers.DbrxConfig(), "DbrxForCausalLM"), "model_type 'dbrx'.*mixture-of-experts"),
        (lambda: saved(transformers.JetMoeConfig(), "JetMoeForCausalLM"), "model_type 'jetmoe'.*mixture-of-experts"),
        (lambda: saved(transformers.LlamaConfig(), "LlamaForCausalLM", num_local_experts=8),
         "num_local_experts"),
        (lambda: saved(transformers.BertConfig(is_decoder=True), "BertLMHeadModel"),
         "is_decoder: true.*'bert' runs bidirectional"),
        (lambda: saved(transformers.RobertaConfig(is_decoder=True), "RobertaForCausalLM"),
         "is_decoder: true.*'roberta' runs bidirectional"),
        (lambda: saved(transformers.BertConfig(is_decoder=True, add_cross_attention=True), "BertLMHeadModel"),
         "decoder of an encoder-decoder model"),
        (lambda: saved(transformers.BloomConfig(), "BloomForCausalLM"), "no supported family.*'BloomForCausalLM'"),
    ],
    ids=["remote-code", "encoder-decoder", "mamba", "jamba", "qwen3-next", "linear-layers", "dbrx", "jetmoe",
         "experts-key", "bert-decoder", "roberta-decoder", "cross-attention", "unknown"],
)  # fmt: skip
def test_refused_architectures_name_the_model_the_reason_and_the_supported_families(config, message):
    with pytest.raises(UnsupportedModel, match=message) as err:
        recognise(config(), "hub org/model@abc")
    assert "hub org/model@abc" in str(err.value) and "Supported families: bert (BertModel" in str(err.value)


def test_a_family_that_contradicts_config_json_names_both():
    with pytest.raises(UnsupportedModel, match="gives family 'bert', but its config.json is of family 'llama'"):
        recognise(saved(transformers.LlamaConfig(), "LlamaForCausalLM"), "hub a/b", family="bert")


# --- the config: a hub id is enough ----------------------------------------------------------------------------


def hub_only(default_config, **entry):
    cfg = copy.deepcopy(default_config)
    cfg["models"]["mine"] = {"pretrained": {"source": "hub", "repo_id": "org/mine", "revision": "main"}, **entry}
    cfg["rank_collapse"]["models"].append("mine")
    return cfg


def test_a_hub_id_alone_is_a_valid_model_entry(default_config, tmp_path):
    cfg = hub_only(default_config)
    check_config(cfg, ROOT / "workflow" / "schemas")
    assert weight_sets(cfg["models"]["mine"]) == ["init", "pretrained"]
    assert max(model_priorities(cfg), key=model_priorities(cfg).get) == "mine"  # architecture unknown: first
    check_config(hub_only(default_config, init=None), ROOT / "workflow" / "schemas")
    assert weight_sets(hub_only(default_config, init=None)["models"]["mine"]) == ["pretrained"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"init": {"config": {"hidden_size": 8}}}, r"'models\.mine\.init\.config': an explicit architecture needs"),
        ({"pretrained": None}, r"'models\.mine\.init': without 'config'"),
        ({"init": None, "pretrained": None}, r"'models\.mine': init is null and there is no pretrained source"),
        ({"family": "qwen9"}, r"models\.mine\.family"),
        ({"pretrained": {"source": "hub", "repo_id": "org/mine", "allow_pickle": "yes"}}, "allow_pickle"),
        ({"family": "bert", "init": {"config": {"is_decoder": True}}}, r"init\.config\.is_decoder': family 'bert'"),
        ({"family": "roberta", "init": {"config": {"is_decoder": True}}}, "runs bidirectional attention"),
        ({"family": "bert", "init": {"config": {"add_cross_attention": True}}}, r"add_cross_attention'"),
    ],
    ids=[
        "init-config-without-family",
        "init-without-pretrained",
        "no-weights",
        "unknown-family",
        "pickle-flag",
        "bert-decoder",
        "roberta-decoder",
        "cross-attention",
    ],
)
def test_what_the_config_can_tell_fails_before_any_job(default_config, entry, message):
    with pytest.raises(ConfigError, match=message):
        check_config(hub_only(default_config, **entry), ROOT / "workflow" / "schemas")


def test_the_theorys_embedding_model_names_its_family(default_config):
    """The theory embeds prose with a BERT's init embeddings: a model whose family is known only after
    acquisition, or one without init weights, is refused before any job."""
    for entry in ({}, {"family": "bert", "init": None}):
        cfg = hub_only(default_config, **entry)
        cfg["theory"]["embedding_model"] = "mine"
        with pytest.raises(ConfigError, match=r"'theory\.embedding_model': model 'mine' has family"):
            check_config(cfg, ROOT / "workflow" / "schemas")


# --- acquisition from the local hub -----------------------------------------------------------------------------


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


def test_a_local_folder_alone_is_recognised_and_its_pickle_weights_need_consent(tmp_path):
    """``source: local`` without a family: recognised from the folder's config.json; a folder with only pickle
    weights is refused unless the entry opts in, then converted (the pickle's pin checked first)."""
    arch = transformers.BertConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    folder = tiny_checkpoint(arch, tmp_path / "mine", model_class=transformers.BertModel)
    pins = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    manifest = materialise("m", None, "pretrained", {"source": "local", "path": str(folder), "sha256": pins},
                           tmp_path / "a")  # fmt: skip
    assert (manifest["family"], manifest["recognition"]["by"]) == ("bert", "architectures")
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    pins = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    source = {"source": "local", "path": str(folder), "sha256": pins}
    with pytest.raises(AcquisitionError, match="only when the entry opts in with allow_pickle: true"):
        materialise("m", None, "pretrained", source, tmp_path / "b")
    assert not (tmp_path / "b").exists()
    manifest = materialise("m", None, "pretrained", {**source, "allow_pickle": True}, tmp_path / "c")
    assert manifest["pickle_sha256"] == {"pytorch_model.bin": pins["pytorch_model.bin"]}
    assert load_model(tmp_path / "c", "bert").config.num_hidden_layers == 2
    bad = {**source, "allow_pickle": True, "sha256": {**pins, "pytorch_model.bin": "0" * 64}}
    with pytest.raises(AcquisitionError, match="sha256 of pytorch_model.bin"):
        materialise("m", None, "pretrained", bad, tmp_path / "d")


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
