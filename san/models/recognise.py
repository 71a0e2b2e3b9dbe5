"""The family of a model, recognised from its ``config.json``, and the structural facts its ablation depends on.

A model entry may name no ``family``: the acquisition job reads the downloaded ``config.json`` and looks up
``architectures[0]`` among the class names the family table accepts (:attr:`san.models.spec.FamilyRow.architectures`),
then ``model_type`` (:attr:`~san.models.spec.FamilyRow.model_types`); a multimodal wrapper whose config holds a
``text_config`` resolves to its text model. A ``family`` given in the config must agree with what the file says.

Refused, with a message naming the model, its architecture and the supported families, rather than mis-ablated:
models whose code is not transformers' own (``auto_map``: remote code is never trusted), encoder-decoder models and
the decoders of such models (``is_encoder_decoder``, ``add_cross_attention``: the paper's variants are defined for
one stack of self-attention blocks; the encoder stack of a T5-like or BART model is a family of its own, an
encoder-only class such as ``T5EncoderModel``, which the acquisition takes out of a whole checkpoint when the
entry's source says ``stack: encoder``), an encoder family's config that says ``is_decoder`` (its variants would run
a causal model as bidirectional), token mixers that are not softmax attention (state-space layers such as Mamba,
linear or gated-delta attention in hybrids: the paper's SAN is a stack of softmax attention layers, and a layer
without an attention matrix has no SAN), and mixture-of-experts MLPs of a family the table does not hold (a
family's row says whether its MLP is an expert layer, ``experts_key``; an expert count in the config of a dense
family would be mis-ablated).
A dual text-image checkpoint (CLIP, SigLIP: two stacks) is refused unless its entry names the tower to analyse
(``tower: vision`` or ``tower: text``).

What the ablation depends on is recorded from the config, not assumed from the family's name
(:func:`structural_facts`): parallel or sequential residual, where the norms sit, q/k norms, residual and embedding
multipliers, sliding-window or local layers, grouped key/value heads, attention sinks, and a mixture-of-experts
layer's expert count, routing and dense layers. The acquisition job writes the recognition and
the facts into the model folder's manifest; the analysis jobs read the family from there and record it, with how
it was recognised and the facts, in every result file. Torch-free.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from san.models.folders import AcquisitionError
from san.models.spec import FAMILY_TABLE

#: ``model_type`` values whose token mixers are not (only) softmax attention: state-space, recurrent, linear or
#: gated-delta layers, alone or in hybrids with attention
NON_ATTENTION_MODEL_TYPES = frozenset(
    {
        "mamba", "mamba2", "falcon_mamba", "jamba", "falcon_h1", "nemotron_h", "qwen3_next", "zamba", "zamba2",
        "bamba", "granitemoehybrid", "lfm2", "lfm2_moe", "rwkv", "recurrent_gemma", "xlstm", "minimax",
        "kimi_linear",
    }
)  # fmt: skip
#: ``model_type`` values of dual text-image checkpoints, whose entry names the tower to analyse (``tower``): the
#: checkpoints whose towers are rows of the table (:attr:`san.models.spec.FamilyRow.tower_of`)
DUAL_MODEL_TYPES = frozenset(row.tower_of[0] for row in FAMILY_TABLE.values() if row.tower_of)
#: ``model_type`` values with mixture-of-experts MLPs
MOE_MODEL_TYPES = frozenset(
    {
        "mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v2", "deepseek_v3", "gpt_oss", "dbrx", "jetmoe",
        "granitemoe", "granitemoeshared", "phimoe", "llama4", "llama4_text", "glm4_moe", "ernie4_5_moe",
        "hunyuan_v1_moe", "switch_transformers", "nllb_moe", "flex_olmo", "dots1", "longcat_flash",
    }
)  # fmt: skip
#: config keys that count experts (a count above one: a mixture-of-experts MLP)
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
#: ``model_type`` values of the table's mixture-of-experts families (their rows name an ``experts_key``)
MOE_FAMILY_MODEL_TYPES = frozenset(t for row in FAMILY_TABLE.values() if row.experts_key for t in row.model_types)
#: config keys of a mixture-of-experts layer's routing, shared experts and dense layers, recorded as facts
ROUTING_KEYS = (
    "num_experts_per_tok", "norm_topk_prob", "moe_intermediate_size", "shared_expert_intermediate_size",
    "n_shared_experts", "routed_scaling_factor", "n_group", "topk_group", "mlp_only_layers", "decoder_sparse_step",
    "first_k_dense_replace", "router_jitter_noise",
)  # fmt: skip
#: entries of ``layer_types`` that are softmax attention (full, sliding-window or chunked)
ATTENTION_LAYER_TYPES = frozenset({"full_attention", "sliding_attention", "chunked_attention"})
#: config keys that lay out hybrid stacks of attention and other mixers
HYBRID_KEYS = ("layers_block_type", "hybrid_override_pattern", "attn_layer_indices", "attn_layer_period")
#: config keys of the structural facts, by fact (the first key present is recorded)
FACT_KEYS = {
    "parallel_residual": ("use_parallel_residual", "parallel_attn", "parallel_residual"),
    "qk_norm": ("use_qk_norm", "qk_layernorm", "qk_norm"),
}
#: multipliers and scalings of the residual stream, embeddings, attention and logits
MULTIPLIER_KEYS = (
    "residual_multiplier", "embedding_multiplier", "attention_multiplier", "logits_scaling",
    "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping",
)  # fmt: skip
#: keys of sliding-window or local attention
WINDOW_KEYS = (
    "sliding_window", "use_sliding_window", "max_window_layers", "sliding_window_pattern", "local_attention",
    "global_attn_every_n_layers",
)  # fmt: skip


#: the encoder-decoder checkpoints whose encoder stack a family of the table is, by ``architectures[0]``, and that
#: family (:attr:`san.models.spec.FamilyRow.stack_of`)
STACK_FAMILIES = {arch: name for name, row in FAMILY_TABLE.items() for arch in row.stack_of}
#: the encoder-only classes of those families (an encoder stack saved alone, or taken from a whole checkpoint)
ENCODER_STACK_ARCHITECTURES = frozenset(a for row in FAMILY_TABLE.values() if row.stack_of for a in row.architectures)


def encoder_decoder_refusal(config: Mapping[str, Any]) -> str:
    """Why a whole encoder-decoder model is refused: its decoder's blocks attend to the encoder's output
    (cross-attention), outside the paper's stack of self-attention blocks; the message says how to analyse the
    encoder stack where a family of the table is that encoder."""
    family = STACK_FAMILIES.get(_architecture(config) or "")
    why = (
        "it is an encoder-decoder model (is_encoder_decoder): its decoder (cross-attention to the encoder's "
        "output) is refused, the variants being defined for one stack of self-attention blocks"
    )
    if family is None:
        return why
    return (
        f"{why}; its encoder stack is analysed as family {family!r} when the entry's pretrained source asks for it "
        "with 'stack: encoder'"
    )


class UnsupportedModel(AcquisitionError, ValueError):
    """A model whose architecture no family of the table covers, or one refused by design (module docstring)."""


@dataclass(frozen=True)
class Recognition:
    """A model's family and how it was found: ``by`` is ``architectures`` (``architectures[0]`` is a class the
    family accepts), ``model_type`` (the fallback) or ``config`` (the family given in the config, which the file
    agrees with); ``text_config`` when a multimodal wrapper's text model was recognised."""

    family: str
    by: str
    architecture: str | None
    model_type: str | None
    text_config: bool = False
    facts: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The manifest's and result files' record of the recognition (JSON-serialisable)."""
        return asdict(self)


def supported() -> str:
    """The supported families with the architectures and model types each accepts, for error messages."""
    return "; ".join(f"{name} ({', '.join(row.architectures + row.model_types)})" for name, row in FAMILY_TABLE.items())


def _architecture(config: Mapping[str, Any]) -> str | None:
    archs = config.get("architectures") or []
    return str(archs[0]) if archs else None


def refusal(config: Mapping[str, Any]) -> str | None:
    """Why a model of ``config`` is refused by design (module docstring), or None."""
    model_type = config.get("model_type")
    if config.get("auto_map"):
        return (
            f"its config.json has an auto_map ({sorted(config['auto_map'])}): the model runs code from its "
            "repository (trust_remote_code), which is never trusted"
        )
    if config.get("is_encoder_decoder") and _architecture(config) not in ENCODER_STACK_ARCHITECTURES:
        return encoder_decoder_refusal(config)
    if config.get("add_cross_attention"):
        return (
            "it is the decoder of an encoder-decoder model (add_cross_attention: its blocks attend to an encoder's "
            "output): the variants are defined for one stack of self-attention blocks"
        )
    if model_type in DUAL_MODEL_TYPES and isinstance(config.get("text_config"), Mapping):
        return (
            "it is a dual text-image checkpoint (a vision and a text tower): its entry chooses the tower to analyse "
            "with 'tower: vision' or 'tower: text' (hub sources)"
        )
    if model_type in NON_ATTENTION_MODEL_TYPES:
        return (
            f"model_type {model_type!r} mixes tokens with layers that are not softmax attention (state-space, "
            "recurrent or linear attention): such a layer has no attention matrix, so it has no SAN"
        )
    other = sorted({str(t) for t in config.get("layer_types") or []} - ATTENTION_LAYER_TYPES)
    if other:
        return (
            f"its layer_types name layers that are not softmax attention ({other}): such a layer has no attention "
            "matrix, so it has no SAN"
        )
    hybrid = [key for key in HYBRID_KEYS if config.get(key) is not None]
    if hybrid:
        return f"its config lays out a hybrid stack of attention and other token mixers ({hybrid})"
    experts = {key: config[key] for key in EXPERT_KEYS if isinstance(config.get(key), int) and config[key] > 1}
    if (model_type in MOE_MODEL_TYPES or experts) and model_type not in MOE_FAMILY_MODEL_TYPES:
        return (
            f"it has mixture-of-experts MLPs (model_type {model_type!r}{f', {experts}' if experts else ''}) of no "
            f"mixture-of-experts family of the table ({sorted(MOE_FAMILY_MODEL_TYPES)}): its expert layer's routing "
            "is not defined there"
        )
    return None


def family_refusal(config: Mapping[str, Any], family: str) -> str | None:
    """Why a (text) config recognised as ``family`` is refused all the same, or None: a config that says
    ``is_decoder`` in a bidirectional family (a BERT or RoBERTa decoder is causal; its variants would be run
    bidirectional)."""
    if config.get("is_decoder") and not FAMILY_TABLE[family].causal:
        return (
            f"its config sets is_decoder: true (a causal decoder), but family {family!r} runs bidirectional "
            "attention: its variants would analyse a causal model as bidirectional"
        )
    return None


def _lookup(config: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(family, by)`` of a (text) config by its ``architectures[0]``, then its ``model_type``; None otherwise."""
    arch, model_type = _architecture(config), config.get("model_type")
    for by, value in (("architectures", arch), ("model_type", model_type)):
        for name, row in FAMILY_TABLE.items():
            if value is not None and value in (row.architectures if by == "architectures" else row.model_types):
                return name, by
    return None


def text_model_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The config the ablation applies to: a multimodal wrapper's ``text_config`` when its own architecture is no
    family's (e.g. a vision-language model around a Gemma-3 text model), else ``config`` itself."""
    text = config.get("text_config")
    if isinstance(text, Mapping) and _lookup(config) is None:
        return text
    return config


def recognise(config: Mapping[str, Any], where: str, family: str | None = None) -> Recognition:
    """The family of the model whose ``config.json`` is ``config`` (``where``: the model and its source, named in
    errors); ``family``, when the config gives one, must agree. Raises :class:`UnsupportedModel` naming the model,
    its architecture and the supported families."""
    arch, model_type = _architecture(config), config.get("model_type")
    described = f"{where} (architecture {arch!r}, model_type {model_type!r})"
    why = refusal(config)
    text = text_model_config(config)
    wrapped = text is not config
    if why is None and wrapped:
        why = refusal(text)
    if why is not None:
        raise UnsupportedModel(f"{described} is refused: {why}. Supported families: {supported()}")
    found = _lookup(text)
    if found is None:
        raise UnsupportedModel(
            f"{described} is of no supported family: no family accepts architecture {_architecture(text)!r} or "
            f"model_type {text.get('model_type')!r}. Supported families: {supported()}. A new family is a row of "
            "the family table in san/models/spec.py (docs/models.md)"
        )
    name, by = found
    why = family_refusal(text, name)
    if why is not None:
        raise UnsupportedModel(f"{described} is refused: {why}. Supported families: {supported()}")
    if family is not None and family != name:
        raise UnsupportedModel(
            f"{described}: the config gives family {family!r}, but its config.json is of family {name!r} "
            f"(by its {by}); remove the family or correct it"
        )
    return Recognition(
        family=name,
        by="config" if family is not None else by,
        architecture=_architecture(text) or arch,
        model_type=text.get("model_type"),
        text_config=wrapped,
        facts=structural_facts(text, name),
    )


def recognise_folder(folder: Path, where: str, family: str | None = None) -> Recognition:
    """The family of the model in ``folder`` from its ``config.json`` (:func:`recognise`): ``family``, when given,
    must agree; raises :class:`UnsupportedModel` naming ``where``."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise AcquisitionError(f"{where} has no config.json: its architecture is unknown")
    return recognise(json.loads(path.read_text()), where, family)


def norm_placement(family: str) -> str:
    """Where a family's blocks normalise: ``post_residual`` (``N(x + f(x))``, the post-norm encoders), ``pre``
    (``x + f(N(x))``), ``pre_and_post`` (``x + N(f(N(x)))``) or ``post`` (``x + N(f(x))``)."""
    parts = FAMILY_TABLE[family].pre_norm_parts
    if parts is None:
        return "post_residual"
    if FAMILY_TABLE[family].layer_scale:  # LayerScales, not norms, multiply the branch outputs
        parts = (*parts[:2], None, *parts[3:5], None)
    before, after = parts[0] is not None or parts[3] is not None, parts[2] is not None or parts[5] is not None
    return {(True, False): "pre", (True, True): "pre_and_post", (False, True): "post"}.get((before, after), "none")


def structural_facts(config: Mapping[str, Any], family: str) -> dict[str, Any]:
    """The facts of ``config`` that a family's ablation depends on (module docstring), JSON-serialisable: depth,
    heads, width and key/value heads; where the norms sit; and each parallel-residual, q/k-norm, multiplier and
    sliding-window key the config sets."""
    row = FAMILY_TABLE[family]
    facts: dict[str, Any] = {
        "layers": config.get(row.layers_key),
        "heads": config.get(row.heads_key),
        "width": config.get(row.width_key),
        "norms": norm_placement(family),
    }
    kv_heads = config.get("num_key_value_heads")
    if isinstance(kv_heads, int):
        facts["kv_heads"] = kv_heads
        facts["grouped_kv"] = isinstance(facts["heads"], int) and kv_heads < facts["heads"]
    for fact, keys in FACT_KEYS.items():
        key = next((k for k in keys if k in config), None)
        if key is not None:
            facts[fact] = {key: config[key]}
    if "qk_norm" not in facts and row.qk_norm:  # the family's attention: no config key says so
        facts["qk_norm"] = {"model_type": config.get("model_type")}
    if row.attention_sinks:
        facts["attention_sinks"] = {"model_type": config.get("model_type")}
    if row.experts_key is not None:
        routing = {k: config[k] for k in (row.experts_key, *ROUTING_KEYS) if config.get(k) is not None}
        facts["experts"] = routing
    multipliers = {k: config[k] for k in MULTIPLIER_KEYS if config.get(k) is not None}
    if multipliers:
        facts["multipliers"] = multipliers
    window = {k: config[k] for k in WINDOW_KEYS if config.get(k) is not None}
    if config.get("layer_types"):
        window["layer_types"] = dict(Counter(map(str, config["layer_types"])))
    if window:
        facts["attention_window"] = window
    return facts
