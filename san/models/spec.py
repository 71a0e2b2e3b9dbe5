"""The family table: everything the workflow knows about a transformers architecture, one row per family, free of
torch (the workflow reads it while it parses the rules).

A row names the family's transformers classes (by name: the registry :mod:`san.models.families` imports them on
first use), the keys of its architecture config (layers, heads, width, longest input), where its blocks are, how its
variants are made (``ablation``: a name that :mod:`san.models.ablations` looks up, so this table never imports the
ablation code), which checkpoint weights belong to a head the base model does not load, and which
``architectures`` and ``model_types`` of a model's config.json it accepts (:mod:`san.models.recognise` recognises a
model's family from them when its config entry names none), and the facts of the family that its config does not
state (q/k norms, attention sinks, the towers of dual text-image checkpoints). A family is one row here
(keyword-only) and one case in tests/family_blocks.py's ``CASES``, whose reference recomputes every variant from the
weights (tests/unit/models/test_families.py); a new kind of block adds its ablation code. The README's family list
and docs/models.md's tables are generated from the rows (:mod:`san.models.tables`), and ``models.<name>.family`` is
checked against them (:func:`san.models.entries.check_models`). No other module of ``san`` names a family
(tests/unit/test_structure.py checks it).

The paper's three post-norm encoders (BERT, ALBERT, XLNet), two more encoders (RoBERTa; MPNet with its relative
position bias), the pre-norm causal decoders (GPT-2 with learned positions and LayerNorm; Llama, Qwen2, Qwen3 with
per-head q/k norms, Mistral, Phi-3 with fused projections, Granite with its branch, embedding and attention
multipliers and SmolLM3 with rotary positions left out of some layers, all with RMSNorm and grouped key/value
heads), the decoders that also normalise each
sub-block's output (Gemma-2 and Gemma-3, with norms before and after each sub-block; OLMo-2, with norms after each
sub-block and none before), the parallel decoders (Phi-1/2: attention and MLP on one shared norm; GPT-NeoX/Pythia:
parallel or sequential as its config says), ModernBERT, a pre-norm encoder alternating local and global
attention, and the mixture-of-experts decoders (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, gpt-oss, Phi-MoE, Granite-MoE,
DeepSeek-V3), whose MLP is their whole expert layer: router, chosen experts, shared experts and their gates; a layer
their config makes dense is the dense MLP it is; and the encoder stacks of encoder-decoder models (T5, mT5 and UMT5:
pre-norm RMSNorm blocks with a relative position bias; BART: BERT's post-norm block), taken out of a whole
checkpoint when its entry asks for the encoder (``stack_of``, ``stack_tensors``). The structural facts that differ
between checkpoints of one family (parallel residual, multipliers, sliding windows, grouped heads, routing) are read
from the model's config, never assumed from the family name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: the paper's four variants (Fig. 2): pure attention, attention + MLP, attention + skip, the unmodified model
VARIANTS = ("SAN", "SAN+MLP", "SAN+skip", "transformer")
#: the variants without skip connections (the theorem's setting) and those with them
PURE_ATTENTION = ("SAN", "SAN+MLP")
WITH_SKIP = ("SAN+skip", "transformer")


@dataclass(frozen=True, kw_only=True)
class FamilyRow:
    """One model family of the table (module docstring). Rows are keyword-only: each fact is named where it is
    stated."""

    #: transformers source file (relative to the package) and name of the config class, and the base model's class
    config_module: str
    config_class: str
    model_class: str
    #: keys of the architecture config: layers, heads per layer, width, longest input (None: relative positions
    #: only, no limit)
    layers_key: str
    heads_key: str
    width_key: str
    position_key: str | None
    #: name of the ablation that makes the variants (a key of ``san.models.ablations.ABLATIONS``)
    ablation: str
    #: dotted attribute path of the blocks whose outputs are the residual stream, in order (a shared block appears
    #: once: ALBERT's group runs ``num_hidden_layers`` times and is measured at every run)
    blocks: str
    #: what the family's blocks hold beyond their kind and norms (docs/models.md's family table quotes it): the
    #: attention's specifics, what stays in every variant and why
    notes: str
    #: prefixes of checkpoint weights outside the base model (pretraining or LM heads; not loaded, not an error)
    head_prefixes: tuple[str, ...] = ()
    #: whether attention is causal (a decoder's SAN stays a causal SAN: the mask is never removed)
    causal: bool = False
    #: attribute names of a block whose norms sit inside its residual branches: (norm before attention or None,
    #: attention, norm of the attention output or None, norm before the MLP or None, MLP, norm of the MLP output or
    #: None); None for post-norm blocks (norm after the add)
    pre_norm_parts: tuple[str | None, ...] | None = None
    #: position ids that are never a token's (RoBERTa and MPNet count positions from padding_idx + 1 = 2)
    position_offset: int = 0
    #: name of the causal-LM class (decoders: the continuation sanity check of pretrained weights)
    lm_class: str | None = None
    #: whether the blocks pass hidden states as ``(tokens, sequences, width)`` instead of ``(sequences, tokens,
    #: width)``
    tokens_first: bool = False
    #: the base model's norm after the last block (pre-norm models), which transformers applies to the last hidden
    #: state
    final_norm: str | None = None
    #: keyword arguments of every forward pass on full-length sequences (XLNet: no memories)
    forward_kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: whether attention and MLP read the same block input and their outputs add in parallel
    #: (``y = x + Attn(N1(x)) + MLP(N2(x))``): True for every checkpoint of the family, a key of the model's config
    #: that says so per checkpoint (GPT-NeoX's ``use_parallel_residual``), False for sequential blocks
    parallel_residual: bool | str = False
    #: key of the model's config whose scalar multiplies each sub-block's output before it is added to the residual
    #: stream (Granite's ``residual_multiplier``); the ablations keep it on every branch
    branch_multiplier: str | None = None
    #: key of the model's config that counts the routed experts of a mixture-of-experts MLP (None: a dense MLP).
    #: "The MLP" of such a family is its whole expert layer: router, the chosen experts, shared experts and their
    #: gates (the module ``pre_norm_parts`` names; a layer that the config makes dense has a dense MLP there)
    experts_key: str | None = None
    #: a variant's block output without the MLP where it is not the attention sub-block's output ``h``, as the
    #: generated tables of docs/models.md write it (ALBERT's paper ablation: the FFN's two linear maps become
    #: identities)
    without_mlp: str | None = None
    #: whether ``model.embeddings(input_ids=...)`` gives the embedded prose that the theory and propagation
    #: experiments feed to their own blocks (word + position + token-type embeddings, then LayerNorm)
    prose_embeddings: bool = False
    #: class names of ``architectures[0]`` in a model's config.json recognised as this family
    #: (:mod:`san.models.recognise`): the family's own classes, and any class whose blocks compute the family's
    #: block with the same module names (OLMo's ``OlmoForCausalLM``: a Llama block with parameter-free LayerNorms;
    #: XLM-RoBERTa's classes: RoBERTa's blocks), loaded by transformers' auto classes for its own ``model_type``
    architectures: tuple[str, ...] = ()
    #: ``model_type`` values of config.json recognised as this family when ``architectures[0]`` names no family's
    #: class (a fine-tuned head, e.g. ``BertForSequenceClassification``, falls back to ``bert``)
    model_types: tuple[str, ...] = ()
    #: what the model reads: ``text`` (token ids) or ``image`` (``pixel_values`` prepared by the model folder's own
    #: image processor, :mod:`san.models.images`)
    modality: str = "text"
    #: the roles of the tokens an image encoder puts before its patch tokens, in order (ViT's class token, DeiT's
    #: class and distillation tokens); registers follow them (``register_key``), then the patches
    prefix_tokens: tuple[str, ...] = ()
    #: key of the model's config that counts its register tokens (DINOv2 with registers), None for none
    register_key: str | None = None
    #: prefixes of base-model weights outside the measured residual stream that a checkpoint may lack (ViT's and
    #: DeiT's pooler, which their classification checkpoints do not hold): left at their initialisation, never used
    optional_prefixes: tuple[str, ...] = ()
    #: whether the third and sixth of ``pre_norm_parts`` are LayerScales (DINOv2: a learned per-channel ``λ`` that
    #: multiplies the branch output) rather than norms of the branch output; either way they stay on their branch
    layer_scale: bool = False
    #: ``architectures[0]`` of whole encoder-decoder checkpoints whose encoder stack this row is (T5's
    #: ``T5ForConditionalGeneration``): such a checkpoint is refused unless its entry's source asks for the encoder
    #: (``stack: encoder``), and then the acquisition keeps only the encoder (``stack_tensors``)
    stack_of: tuple[str, ...] = ()
    #: how the acquisition renames the tensors of a whole checkpoint it keeps for the encoder stack, ``(prefix in the
    #: checkpoint, prefix in the encoder's class)``: the first that matches applies; the others (decoder, LM head)
    #: are left out
    stack_tensors: tuple[tuple[str, str], ...] = ()
    #: key of the model's config that gives each head's width independently of the model's width (T5's ``d_kv``:
    #: the heads project to ``heads x d_kv``), None where a head's width is the width divided by the heads
    head_width_key: str | None = None
    #: whether the base model's forward reads ``eos_token_id`` (CLIP's text tower pools the end-of-text token): an
    #: init model whose default id lies outside the bundled vocabulary takes the bundled tokenizer's end token
    #: (its ``sep_token``) rather than none
    reads_end_token: bool = False
    #: whether the attention always normalises queries and keys (transformers' classes hold ``q_norm`` and ``k_norm``
    #: modules, no config key says so): recorded as a structural fact of every model of the family
    qk_norm: bool = False
    #: whether the attention has a learned sink logit per head in its softmax (gpt-oss: a row's weights over the
    #: tokens sum to less than one); recorded as a structural fact
    attention_sinks: bool = False
    #: ``(model_type, tower)`` of the dual text-image checkpoints (CLIP, SigLIP) whose ``tower`` (``vision`` or
    #: ``text``) this row's class is: the acquisition takes it out of a whole checkpoint when the entry asks for it
    #: (``tower: vision``), and such a checkpoint without a tower is refused
    tower_of: tuple[str, str] | None = None


_ENCODER = {"layers_key": "num_hidden_layers", "heads_key": "num_attention_heads", "width_key": "hidden_size"}
_DECODER = {**_ENCODER, "position_key": "max_position_embeddings", "causal": True, "head_prefixes": ("lm_head.",)}
_LLAMA_PARTS = ("input_layernorm", "self_attn", None, "post_attention_layernorm", "mlp", None)
_GEMMA3_PARTS = (
    "input_layernorm", "self_attn", "post_attention_layernorm", "pre_feedforward_layernorm", "mlp",
    "post_feedforward_layernorm",
)  # fmt: skip
#: norms after each sub-block only: the attention and the MLP read the raw residual stream
_OLMO2_PARTS = (None, "self_attn", "post_attention_layernorm", None, "mlp", "post_feedforward_layernorm")
#: one shared norm before both sub-blocks
_PHI_PARTS = ("input_layernorm", "self_attn", None, "input_layernorm", "mlp", None)
_NEOX_PARTS = ("input_layernorm", "attention", None, "post_attention_layernorm", "mlp", None)
_MODERNBERT_PARTS = ("attn_norm", "attn", None, "mlp_norm", "mlp", None)
_GRANITEMOE_PARTS = ("input_layernorm", "self_attn", None, "post_attention_layernorm", "block_sparse_moe", None)

#: image encoders: bidirectional, no position limit of the text input, variants by the vision block's forward
_VISION = {**_ENCODER, "position_key": None, "ablation": "vision", "modality": "image"}
_VIT_PARTS = ("layernorm_before", "attention", None, "layernorm_after", "mlp", None)
#: LayerScale multiplies each branch's output: it sits where a sandwich norm of the branch output sits
_DINOV2_PARTS = ("norm1", "attention", "layer_scale1", "norm2", "mlp", "layer_scale2")
_CLIP_PARTS = ("layer_norm1", "self_attn", None, "layer_norm2", "mlp", None)

#: the encoder stack of an encoder-decoder model (T5, mT5, UMT5): pre-norm blocks of a self-attention sub-layer
#: (``layer.0``: RMSNorm ``layer_norm``, ``SelfAttention``) and a feed-forward sub-layer (``layer.1``), relative
#: positions only; the decoder, which attends to the encoder's output, stays refused
_T5_PARTS = ("layer.0.layer_norm", "layer.0.SelfAttention", None, "layer.1.layer_norm", "layer.1.DenseReluDense", None)
_T5_TENSORS = (("shared.", "shared."), ("encoder.", "encoder."))


def _t5_encoder(name: str, prefix: str, **facts: Any) -> FamilyRow:
    """The row of the encoder stack of a T5-like encoder-decoder model whose classes follow ``<Prefix>Config``,
    ``<Prefix>EncoderModel`` and ``<Prefix>ForConditionalGeneration``; ``facts`` state the rest."""
    row = {
        "config_module": f"models/{name}/configuration_{name}.py", "config_class": f"{prefix}Config",
        "model_class": f"{prefix}EncoderModel", "layers_key": "num_layers", "heads_key": "num_heads",
        "width_key": "d_model", "position_key": None, "ablation": "t5", "blocks": "encoder.block",
        "pre_norm_parts": _T5_PARTS, "architectures": (f"{prefix}EncoderModel",), "model_types": (name,),
        "stack_of": (f"{prefix}ForConditionalGeneration", f"{prefix}Model"), "stack_tensors": _T5_TENSORS,
        "head_width_key": "d_kv",
    }  # fmt: skip
    return FamilyRow(**{**row, **facts})


def _decoder(name: str, module: str, prefix: str, **facts: Any) -> FamilyRow:
    """The row of a pre-norm causal decoder whose transformers classes follow the ``<Prefix>Config``,
    ``<Prefix>Model``, ``<Prefix>ForCausalLM`` pattern, with blocks ``layers``, a final ``norm`` and its own
    classes and ``model_type`` recognised; ``facts`` state the rest (and override these)."""
    row = {
        **_DECODER, "config_module": f"models/{module}/configuration_{module}.py", "config_class": f"{prefix}Config",
        "model_class": f"{prefix}Model", "lm_class": f"{prefix}ForCausalLM", "ablation": "pre_norm",
        "blocks": "layers", "pre_norm_parts": _LLAMA_PARTS, "final_norm": "norm",
        "architectures": (f"{prefix}Model", f"{prefix}ForCausalLM"), "model_types": (name,),
    }  # fmt: skip
    return FamilyRow(**{**row, **facts})


FAMILY_TABLE: dict[str, FamilyRow] = {
    "bert": FamilyRow(
        config_module="models/bert/configuration_bert.py", config_class="BertConfig", model_class="BertModel",
        **_ENCODER, position_key="max_position_embeddings", ablation="bert", blocks="encoder.layer",
        head_prefixes=("cls.",), prose_embeddings=True,
        architectures=("BertModel", "BertForMaskedLM", "BertForPreTraining"), model_types=("bert",),
        notes="the paper's BERT: the LayerNorm after attention stays in every variant (it normalises the attention "
        "layer's own output)",
    ),
    "albert": FamilyRow(
        config_module="models/albert/configuration_albert.py", config_class="AlbertConfig", model_class="AlbertModel",
        **_ENCODER, position_key="max_position_embeddings", ablation="albert", blocks="encoder.albert_layer_groups",
        head_prefixes=("predictions.", "sop_classifier."),
        architectures=("AlbertModel", "AlbertForMaskedLM", "AlbertForPreTraining"), model_types=("albert",),
        without_mlp="`N2(gelu(h) + h)`",
        notes="the paper's ALBERT: one shared layer, measured at each of its runs; without the MLP the FFN's two "
        "linear maps become identities (`LN(gelu(h) + h)` remains; `albert_no_mlp: remove` drops the FFN block)",
    ),
    "xlnet": FamilyRow(
        config_module="models/xlnet/configuration_xlnet.py", config_class="XLNetConfig", model_class="XLNetModel",
        layers_key="n_layer", heads_key="n_head", width_key="d_model", position_key=None, ablation="xlnet",
        blocks="layer", head_prefixes=("lm_loss.",), tokens_first=True, forward_kwargs={"use_mems": False},
        architectures=("XLNetModel", "XLNetLMHeadModel"), model_types=("xlnet",),
        notes="the paper's XLNet: relative attention, no memories",
    ),
    "roberta": FamilyRow(
        config_module="models/roberta/configuration_roberta.py", config_class="RobertaConfig",
        model_class="RobertaModel", **_ENCODER, position_key="max_position_embeddings", ablation="bert",
        blocks="encoder.layer", head_prefixes=("lm_head.",), position_offset=2,
        architectures=("RobertaModel", "RobertaForMaskedLM", "XLMRobertaModel", "XLMRobertaForMaskedLM"),
        model_types=("roberta", "xlm-roberta"),
        notes="BERT's block; positions counted from `padding_idx + 1`; XLM-RoBERTa runs as RoBERTa",
    ),
    "mpnet": FamilyRow(
        config_module="models/mpnet/configuration_mpnet.py", config_class="MPNetConfig", model_class="MPNetModel",
        **_ENCODER, position_key="max_position_embeddings", ablation="mpnet", blocks="encoder.layer",
        head_prefixes=("lm_head.",), position_offset=2, architectures=("MPNetModel", "MPNetForMaskedLM"),
        model_types=("mpnet",),
        notes="BERT's block with a relative position bias added to every layer's attention scores",
    ),
    "gpt2": FamilyRow(
        config_module="models/gpt2/configuration_gpt2.py", config_class="GPT2Config", model_class="GPT2Model",
        layers_key="n_layer", heads_key="n_head", width_key="n_embd", position_key="n_positions", ablation="gpt2",
        blocks="h", head_prefixes=("lm_head.",), causal=True,
        pre_norm_parts=("ln_1", "attn", None, "ln_2", "mlp", None), lm_class="GPT2LMHeadModel", final_norm="ln_f",
        architectures=("GPT2Model", "GPT2LMHeadModel"), model_types=("gpt2",),
        notes="learned positions, LayerNorm, fused `c_attn`",
    ),
    "llama": _decoder(
        "llama", "llama", "Llama",
        architectures=("LlamaModel", "LlamaForCausalLM", "OlmoModel", "OlmoForCausalLM"), model_types=("llama", "olmo"),
        notes="rotary positions, RMSNorm, grouped key/value heads; OLMo (parameter-free LayerNorms) runs as Llama",
    ),
    "gemma3": _decoder(
        "gemma3", "gemma3", "Gemma3", config_class="Gemma3TextConfig", model_class="Gemma3TextModel",
        pre_norm_parts=_GEMMA3_PARTS, qk_norm=True, architectures=("Gemma3TextModel", "Gemma3ForCausalLM"),
        model_types=("gemma3_text",),
        notes="per-head q/k norms inside attention; sliding and global layers as `layer_types` says; the embedding "
        "scale `sqrt(width)`",
    ),
    "qwen2": _decoder("qwen2", "qwen2", "Qwen2", notes="q/k/v biases; sliding layers when `use_sliding_window`"),
    "qwen3": _decoder("qwen3", "qwen3", "Qwen3", qk_norm=True, notes="per-head q/k RMSNorms inside attention"),
    "mistral": _decoder("mistral", "mistral", "Mistral", notes="a sliding window on every layer (`sliding_window`)"),
    "phi3": _decoder(
        "phi3", "phi3", "Phi3", notes="fused `qkv_proj` and `gate_up_proj`: one attention and one MLP each"
    ),
    "gemma2": _decoder(
        "gemma2", "gemma2", "Gemma2", pre_norm_parts=_GEMMA3_PARTS,
        notes="soft-capped attention logits; sliding and global layers; the embedding scale `sqrt(width)`",
    ),
    "olmo2": _decoder(
        "olmo2", "olmo2", "Olmo2", pre_norm_parts=_OLMO2_PARTS, qk_norm=True,
        notes="no norm before a sub-block (none is added: SAN is `Na(Attn(x))`); q/k RMSNorms over the full width",
    ),
    "gpt_neox": _decoder(
        "gpt_neox", "gpt_neox", "GPTNeoX", head_prefixes=("embed_out.", "lm_head."), pre_norm_parts=_NEOX_PARTS,
        final_norm="final_layer_norm", parallel_residual="use_parallel_residual",
        notes="parallel in Pythia; SAN+MLP reads attention's output in either wiring (the choice of `phi`), so the "
        "two wirings differ only in the unmodified transformer",
    ),
    "phi": _decoder(
        "phi", "phi", "Phi", pre_norm_parts=_PHI_PARTS, final_norm="final_layernorm", parallel_residual=True,
        notes="parallel on one shared norm `N`; SAN+MLP applies the MLP after attention, as in the paper (the "
        "parallel MLP reading `x` would be a path around attention)",
    ),
    "granite": _decoder(
        "granite", "granite", "Granite", branch_multiplier="residual_multiplier",
        notes="the branch multiplier `s` (`residual_multiplier`) stays on each branch it scales; embedding and "
        "attention multipliers stay",
    ),
    "smollm3": _decoder(
        "smollm3", "smollm3", "SmolLM3",
        notes="Llama's block; the layers that `no_rope_layers` marks 0 (every `no_rope_layer_interval`-th) attend "
        "without rotary positions (NoPE)",
    ),
    "modernbert": FamilyRow(
        config_module="models/modernbert/configuration_modernbert.py", config_class="ModernBertConfig",
        model_class="ModernBertModel", **_ENCODER, position_key="max_position_embeddings", ablation="pre_norm",
        blocks="layers", head_prefixes=("head.", "decoder."), pre_norm_parts=_MODERNBERT_PARTS,
        final_norm="final_norm", architectures=("ModernBertModel", "ModernBertForMaskedLM"),
        model_types=("modernbert",),
        notes="a pre-norm encoder: no `N1` in layer 0 (the embeddings end in a norm); local layers (a window of "
        "`local_attention` tokens) between global ones",
    ),
    "mixtral": _decoder(
        "mixtral", "mixtral", "Mixtral", experts_key="num_local_experts",
        notes="softmax router over all experts, top-k, renormalised; optional sliding window",
    ),
    "qwen2_moe": _decoder(
        "qwen2_moe", "qwen2_moe", "Qwen2Moe", experts_key="num_experts",
        notes="softmax router, top-k renormalised iff `norm_topk_prob`, plus a shared expert behind a sigmoid gate; "
        "layers in `mlp_only_layers` or off the `decoder_sparse_step` are dense",
    ),
    "qwen3_moe": _decoder(
        "qwen3_moe", "qwen3_moe", "Qwen3Moe", experts_key="num_experts", qk_norm=True,
        notes="Qwen2-MoE's routing without the shared expert; per-head q/k RMSNorms inside attention",
    ),
    "olmoe": _decoder(
        "olmoe", "olmoe", "Olmoe", experts_key="num_experts", qk_norm=True,
        notes="softmax router, top-k (renormalised iff `norm_topk_prob`); q/k RMSNorms over the full width",
    ),
    "gpt_oss": _decoder(
        "gpt_oss", "gpt_oss", "GptOss", experts_key="num_local_experts", attention_sinks=True,
        notes="a learned sink logit per head in the softmax (rows over real tokens sum to less than one); router "
        "with a bias, softmax over the top-k logits, clamped SwiGLU experts; sliding and full layers",
    ),
    "phimoe": _decoder(
        "phimoe", "phimoe", "Phimoe", experts_key="num_local_experts",
        notes="LayerNorms with bias; the sparsemixer router (top-2 by two masked softmaxes)",
    ),
    "granitemoe": _decoder(
        "granitemoe", "granitemoe", "GraniteMoe", pre_norm_parts=_GRANITEMOE_PARTS,
        branch_multiplier="residual_multiplier", experts_key="num_local_experts",
        notes="Granite's multipliers around `block_sparse_moe`: top-k logits, softmax over the k",
    ),
    "deepseek_v3": _decoder(
        "deepseek_v3", "deepseek_v3", "DeepseekV3", experts_key="n_routed_experts",
        notes="multi-head latent attention; sigmoid router choosing within the best groups, scaled by "
        "`routed_scaling_factor`, plus ungated shared experts; the first `first_k_dense_replace` layers are dense",
    ),
    # The encoder stacks of encoder-decoder models (docs/models.md, "Encoder stacks")
    "t5": _t5_encoder(
        "t5", "T5",
        notes="the encoder stack (`stack: encoder`); RMSNorm without mean or bias; no `1/sqrt(d)` in the scores; a "
        "relative position bias computed by the first block's attention, added in every block, stays in every "
        "variant (it belongs to attention)",
    ),
    "mt5": _t5_encoder("mt5", "MT5", notes="T5's encoder stack (gated-GELU MLP), multilingual vocabulary"),
    "umt5": _t5_encoder(
        "umt5", "UMT5", notes="T5's encoder stack with a relative position bias of its own in every block's attention"
    ),
    "bart": FamilyRow(
        config_module="models/bart/configuration_bart.py", config_class="BartConfig", model_class="BartEncoder",
        layers_key="encoder_layers", heads_key="encoder_attention_heads", width_key="d_model",
        position_key="max_position_embeddings", ablation="bart", blocks="layers", architectures=("BartEncoder",),
        model_types=("bart",), stack_of=("BartForConditionalGeneration", "BartModel"),
        stack_tensors=(("model.encoder.", ""), ("model.shared.", "embed_tokens."), ("encoder.", ""),
                       ("shared.", "embed_tokens.")),
        notes="the encoder stack (`stack: encoder`): BERT's post-norm block; learned positions and the LayerNorm "
        "`layernorm_embedding` before the first block belong to the embeddings (layer 0 is their output)",
    ),
    # Vision transformers: pre-norm encoders over patch tokens (docs/models.md, "Vision transformers")
    "vit": FamilyRow(
        **_VISION, config_module="models/vit/configuration_vit.py", config_class="ViTConfig", model_class="ViTModel",
        blocks="layers", pre_norm_parts=_VIT_PARTS, prefix_tokens=("class",),
        head_prefixes=("classifier.",), optional_prefixes=("pooler.",),
        architectures=("ViTModel", "ViTForImageClassification"), model_types=("vit",),
        notes="a class token before the patches; learned absolute positions; non-distilled DeiT and DINO (v1) "
        "checkpoints are published as ViT",
    ),
    "deit": FamilyRow(
        **_VISION, config_module="models/deit/configuration_deit.py", config_class="DeiTConfig",
        model_class="DeiTModel", blocks="layers", pre_norm_parts=_VIT_PARTS,
        prefix_tokens=("class", "distillation"), head_prefixes=("cls_classifier.", "distillation_classifier."),
        optional_prefixes=("pooler.",),
        architectures=("DeiTModel", "DeiTForImageClassificationWithTeacher", "DeiTForImageClassification"),
        model_types=("deit",),
        notes="ViT's block; a class and a distillation token before the patches",
    ),
    "dinov2": FamilyRow(
        **_VISION, config_module="models/dinov2/configuration_dinov2.py", config_class="Dinov2Config",
        model_class="Dinov2Model", blocks="encoder.layer", pre_norm_parts=_DINOV2_PARTS, layer_scale=True,
        prefix_tokens=("class",), head_prefixes=("classifier.",),
        architectures=("Dinov2Model", "Dinov2ForImageClassification"), model_types=("dinov2",),
        notes="LayerScale `λ` multiplies each branch and stays with it in every variant (as Granite's multiplier): "
        "SAN is `λ1 Attn(N1(x))`; positions interpolated to the image's patch grid",
    ),
    "dinov2_with_registers": FamilyRow(
        **_VISION, config_module="models/dinov2_with_registers/configuration_dinov2_with_registers.py",
        config_class="Dinov2WithRegistersConfig", model_class="Dinov2WithRegistersModel", blocks="encoder.layer",
        pre_norm_parts=_DINOV2_PARTS, layer_scale=True, prefix_tokens=("class",),
        register_key="num_register_tokens", head_prefixes=("classifier.",),
        architectures=("Dinov2WithRegistersModel", "Dinov2WithRegistersForImageClassification"),
        model_types=("dinov2_with_registers",),
        notes="DINOv2's block with LayerScale; `num_register_tokens` registers (no positions) between the class "
        "token and the patches",
    ),
    "siglip": FamilyRow(
        **_VISION, config_module="models/siglip/configuration_siglip.py", config_class="SiglipVisionConfig",
        model_class="SiglipVisionModel", blocks="encoder.layers", pre_norm_parts=_CLIP_PARTS,
        tower_of=("siglip", "vision"), architectures=("SiglipVisionModel",),
        model_types=("siglip_vision_model",),
        notes="the vision tower: patch tokens only (no class token); the attention-pooling head after the final "
        "norm is not measured",
    ),
    "clip": FamilyRow(
        **_VISION, config_module="models/clip/configuration_clip.py", config_class="CLIPVisionConfig",
        model_class="CLIPVisionModel", blocks="encoder.layers", pre_norm_parts=_CLIP_PARTS, tower_of=("clip", "vision"),
        architectures=("CLIPVisionModel", "CLIPVisionModelWithProjection"), model_types=("clip_vision_model",),
        prefix_tokens=("class",),
        notes="the vision tower: a class token; the LayerNorm `pre_layrnorm` on the embeddings belongs to the stem "
        "(layer 0 is its output) and stays in every variant",
    ),
    # Text towers of dual text-image checkpoints: pre-norm, a final LayerNorm, text token ids (docs/models.md); their
    # blocks are the vision towers' (CLIP's encoder layer, the mask passed positionally): the same ablation
    "clip_text": FamilyRow(
        **_ENCODER, config_module="models/clip/configuration_clip.py", config_class="CLIPTextConfig",
        model_class="CLIPTextModel", position_key="max_position_embeddings", ablation="vision", causal=True,
        blocks="encoder.layers", pre_norm_parts=_CLIP_PARTS, final_norm="final_layer_norm", reads_end_token=True,
        tower_of=("clip", "text"),
        architectures=("CLIPTextModel", "CLIPTextModelWithProjection"), model_types=("clip_text_model",),
        notes="the text tower: causal attention (a token sees the tokens before it), 77 learned positions; the "
        "pooled end-of-text token and the projection act after the final norm and are not measured",
    ),
    "siglip_text": FamilyRow(
        **_ENCODER, config_module="models/siglip/configuration_siglip.py", config_class="SiglipTextConfig",
        model_class="SiglipTextModel", position_key="max_position_embeddings", ablation="vision",
        blocks="encoder.layers", pre_norm_parts=_CLIP_PARTS, final_norm="final_layer_norm",
        tower_of=("siglip", "text"), architectures=("SiglipTextModel",), model_types=("siglip_text_model",),
        notes="the text tower: bidirectional attention, 64 learned positions; the pooled last token's `head` acts "
        "after the final norm and is not measured",
    ),
}  # fmt: skip

#: the family names, in table order (``models.<name>.family`` must be one: :func:`check_models`)
FAMILIES = tuple(FAMILY_TABLE)
#: families whose input is an image (``pixel_values``)
IMAGE_FAMILIES = tuple(name for name, row in FAMILY_TABLE.items() if row.modality == "image")
#: families whose attention is causal
CAUSAL = frozenset(name for name, row in FAMILY_TABLE.items() if row.causal)
#: the family whose embeddings embed the prose input of the theory and propagation experiments
(PROSE_EMBEDDING_FAMILY,) = (name for name, row in FAMILY_TABLE.items() if row.prose_embeddings)


def row(family: str) -> FamilyRow:
    """The table row of ``family``; ValueError naming the known families otherwise."""
    try:
        return FAMILY_TABLE[family]
    except KeyError:
        raise ValueError(f"unknown model family {family!r}; expected one of {list(FAMILIES)}") from None
