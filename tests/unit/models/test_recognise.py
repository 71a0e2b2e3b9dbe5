"""A model's family recognised from its config.json (san.models.recognise), with its structural facts, and the
models refused by design (remote code, encoder-decoder and its decoders, encoder configs that say is_decoder, token
mixers that are not softmax attention, mixture-of-experts of no family of the table, an unknown architecture, a
family that contradicts the file), each with its message; a config entry that gives only a hub id, checked before
any job; a local folder recognised alone. Their acquisition by hub id, through the local hub:
tests/integration/test_recognition_by_hub_id.py."""

import copy
import hashlib

import pytest
import torch
import transformers
from safetensors.torch import load_file

from san.core.config import ConfigError
from san.experiments import check_config
from san.models.entries import weight_sets
from san.models.folders import AcquisitionError
from san.models.load import load_model
from san.models.recognise import UnsupportedModel, norm_placement, recognise
from san.models.spec import FAMILY_TABLE
from san.models.store import materialise
from san.rank_collapse.spec import model_priorities

from helpers import ROOT
from hub_repos import tiny_checkpoint

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
