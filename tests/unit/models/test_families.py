"""Every family of the table, each on a tiny random float64 model built from its transformers config class whose
every parameter is perturbed (tests/family_blocks.py):

- every variant equals the residual stream recomputed from the weights in plain torch (no transformers submodule's
  forward is called by a reference), with the variants written out here (``VARIANT_SWITCHES``: SAN is the attention
  branch only; SAN+MLP attention then the MLP, no skips; SAN+skip attention with its residual; transformer the
  unmodified model) and each family's masks (sliding windows, local layers), multipliers, routing and dense layers
  built from its config; a mixture-of-experts family's MLP is its whole expert layer (router, the chosen experts,
  shared experts and their gates), recomputed from the expert weights with every expert on every token;
- the residual identity holds in every block of the unmodified model whose norms sit inside its branches: block
  input + attention branch + MLP branch (each times the family's branch multiplier) is the block output, and the MLP
  reads the block input (parallel blocks) or the input plus the attention branch (sequential blocks);
- the ``transformer`` variant is the unmodified model's residual stream; leaving a variant restores the model; a
  decoder's variants stay causal.

Adding a family of a known block is one row of the table plus one case here (``CASES``; its reference in
``REFERENCES`` when its block needs one of its own). The paper's BERT, ALBERT and XLNet have their references in
tests/unit/models/test_ablations.py.

Transformers computes a few things in float32 even in a float64 model (RMSNorm, the attention softmax, the rotary
angles, a router's softmax); the references do the same, so that every family is compared at float64 tolerances.
"""

import math
from functools import partial

import pytest
import torch
import torch.nn.functional as F
from family_blocks import (
    F32,
    TOL,
    VARIANT_NAMES,
    VARIANT_SWITCHES,
    attention,
    causal_mask,
    conv1d,
    gelu_erf,
    gelu_tanh,
    heads,
    identity,
    lin,
    ln,
    perturbed_model,
    rms_gemma,
    rms_llama,
    rotary,
    rotate,
    routed,
    top_k_weights,
)

from san.models.ablations import OVERRIDDEN, variant
from san.models.families import FAMILIES
from san.models.spec import FAMILY_TABLE, IMAGE_FAMILIES
from san.rank_collapse.experiment import residual_stream

torch.set_num_threads(1)
N_TOKENS, BATCH = 7, 3

_SIZES = dict(
    vocab_size=100, hidden_size=16, intermediate_size=32, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
)  # fmt: skip
_NO_KV = {k: v for k, v in _SIZES.items() if k != "num_key_value_heads"}
_ENCODER = dict(
    vocab_size=100, hidden_size=16, num_hidden_layers=3, num_attention_heads=4, intermediate_size=32,
    max_position_embeddings=32, hidden_act="gelu",
)  # fmt: skip
_DEFAULT_ROPE = {"rope_type": "default", "rope_theta": 10000.0}
#: each case: (family, architecture). Windows of 4 tokens (ModernBERT: 2 on either side) are shorter than the 7
#: tokens, so windowed and global layers attend differently; biases, q/k norms, multipliers, shared experts and
#: dense layers are switched on where the family has them; 4 experts, 2 chosen per token
CASES = {
    "roberta": ("roberta", _ENCODER),
    "mpnet": ("mpnet", _ENCODER),
    "gpt2": (
        "gpt2",
        dict(vocab_size=100, n_embd=16, n_layer=3, n_head=4, n_inner=32, n_positions=32,
             activation_function="gelu_new", bos_token_id=0, eos_token_id=0),
    ),
    "llama": ("llama", dict(**_SIZES, hidden_act="silu")),
    # the embedding scale sqrt(16) is exact in the float32 buffer transformers keeps it in; head_dim and
    # query_pre_attn_scalar differ, so the attention scaling is checked
    "gemma3": (
        "gemma3",
        dict(**_SIZES, head_dim=8, query_pre_attn_scalar=6, sliding_window=4,
             layer_types=["sliding_attention", "full_attention", "sliding_attention"],
             hidden_activation="gelu_pytorch_tanh"),
    ),
    "qwen2": ("qwen2", dict(**_SIZES, use_sliding_window=True, sliding_window=4, max_window_layers=1)),
    "qwen3": ("qwen3", dict(**_SIZES, head_dim=8, use_sliding_window=True, sliding_window=4, max_window_layers=2)),
    "mistral": ("mistral", dict(**_SIZES, sliding_window=4)),
    "phi3": ("phi3", dict(**_SIZES, original_max_position_embeddings=32, sliding_window=4)),
    "gemma2": (
        "gemma2",
        dict(**_SIZES, head_dim=8, query_pre_attn_scalar=6, sliding_window=4, attn_logit_softcapping=2.0,
             layer_types=["sliding_attention", "full_attention", "sliding_attention"],
             hidden_activation="gelu_pytorch_tanh"),
    ),
    "olmo2": ("olmo2", dict(**_SIZES)),
    "gpt_neox": ("gpt_neox", dict(**_NO_KV, rotary_pct=0.5, use_parallel_residual=True)),
    "gpt_neox_sequential": ("gpt_neox", dict(**_NO_KV, rotary_pct=0.5, use_parallel_residual=False)),
    "phi": ("phi", dict(**_SIZES, partial_rotary_factor=0.5)),
    "granite": (
        "granite", dict(**_SIZES, residual_multiplier=0.5, embedding_multiplier=3.0, attention_multiplier=0.2)
    ),
    "modernbert": (
        "modernbert",
        dict(**_NO_KV, global_attn_every_n_layers=2, local_attention=4, cls_token_id=3, sep_token_id=4),
    ),
    "mixtral": ("mixtral", dict(**_SIZES, num_local_experts=4, num_experts_per_tok=2, sliding_window=4)),
    # layer 0 dense (mlp_only_layers), the others sparse, with the gated shared expert; routing not renormalised
    "qwen2_moe": (
        "qwen2_moe",
        dict(**_SIZES, moe_intermediate_size=16, shared_expert_intermediate_size=24, num_experts=4,
             num_experts_per_tok=2, mlp_only_layers=[0], norm_topk_prob=False),
    ),
    # only layer 1 sparse (decoder_sparse_step 2); routing renormalised
    "qwen3_moe": (
        "qwen3_moe",
        dict(**_SIZES, head_dim=8, moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2,
             decoder_sparse_step=2, norm_topk_prob=True),
    ),
    "olmoe": ("olmoe", dict(**_SIZES, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False)),
    "olmoe_renormalised": ("olmoe", dict(**_SIZES, num_experts=4, num_experts_per_tok=2, norm_topk_prob=True)),
    "gpt_oss": (
        "gpt_oss",
        dict(**_SIZES, head_dim=8, num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
             rope_parameters=_DEFAULT_ROPE),
    ),
    # a wide band (router_jitter_noise 0.5): the second softmax of the sparsemixer weighs several experts
    "phimoe": (
        "phimoe",
        dict(**_SIZES, num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.5, attention_bias=True,
             rope_parameters=_DEFAULT_ROPE),
    ),
    "granitemoe": (
        "granitemoe",
        dict(**_SIZES, num_local_experts=4, num_experts_per_tok=2, residual_multiplier=0.5,
             embedding_multiplier=2.0, attention_multiplier=0.25),
    ),
    "deepseek_v3": (
        "deepseek_v3",
        dict(**{**_SIZES, "num_key_value_heads": 4}, moe_intermediate_size=16, n_routed_experts=4,
             num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1, first_k_dense_replace=1,
             q_lora_rank=8, kv_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=6,
             norm_topk_prob=True, routed_scaling_factor=2.5, rope_parameters=_DEFAULT_ROPE),
    ),
}  # fmt: skip
#: families whose variants tests/unit/models/test_ablations.py recomputes (the paper's encoders), the image
#: encoders (tests/unit/models/test_vision_families.py), the encoder stacks of encoder-decoder models
#: (tests/unit/models/test_encoder_stacks.py) and the text towers of dual text-image checkpoints
#: (tests/unit/models/test_text_towers.py)
ELSEWHERE = {
    "bert", "albert", "xlnet", *IMAGE_FAMILIES, "clip_text", "siglip_text",
    *(n for n, row in FAMILY_TABLE.items() if row.stack_of),
}  # fmt: skip


def family_of(case):
    return CASES[case][0]


@pytest.fixture(scope="module")
def ids():
    return torch.randint(5, 90, (BATCH, N_TOKENS), generator=torch.Generator().manual_seed(1))  # no special tokens


@pytest.fixture(scope="module")
def models():
    built = {case: perturbed_model(family, config) for case, (family, config) in CASES.items()}
    g = torch.Generator().manual_seed(3)
    for layer in built["deepseek_v3"].layers:  # the router's correction bias is a buffer: perturbed here
        bias = getattr(getattr(layer.mlp, "gate", None), "e_score_correction_bias", None)
        if bias is not None:
            bias.copy_(0.5 * torch.randn(bias.shape, generator=g, dtype=bias.dtype))
    return built


def run(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)


# ------------------------------------------------------------------------------------------------ the variants
def post_norm_block(x, attn, norm1, mlp, norm2, name):
    """``h = N1(x + Attn(x))``, ``y = N2(h + MLP(h))`` and its variants (docs/models.md)."""
    skip, with_mlp = VARIANT_SWITCHES[name]
    a = attn(x)
    h = norm1(x + a if skip else a)
    if not with_mlp:
        return h
    m = mlp(h)
    return norm2(h + m if skip else m)


def block(x, name, attn, mlp, n1=identity, n2=identity, na=identity, nm=identity, scale=1.0, parallel=False):
    """One block whose norms sit inside its branches and its variants as docs/models.md defines them:
    ``h = x + s Na(Attn(N1(x)))``, ``y = h + s Nm(MLP(N2(h)))`` (sequential) or
    ``y = x + s Na(Attn(N1(x))) + s Nm(MLP(N2(x)))`` (parallel, the unmodified transformer only); every no-skip
    variant with the MLP feeds the attention output to the MLP."""
    skip, with_mlp = VARIANT_SWITCHES[name]
    a = scale * na(attn(n1(x)))
    if parallel and skip and with_mlp:
        return x + a + scale * nm(mlp(n2(x)))
    h = x + a if skip else a
    if not with_mlp:
        return h
    m = scale * nm(mlp(n2(h)))
    return h + m if skip else m


# ------------------------------------------------------------------------------------------------ references
def roberta_reference(model, ids, name):
    cfg, emb = model.config, model.embeddings
    n = ids.shape[1]
    positions = torch.arange(n) + cfg.pad_token_id + 1  # no padding: positions start at padding_idx + 1
    words, types = emb.word_embeddings.weight[ids], emb.token_type_embeddings.weight[0]  # token type 0
    stream = [ln(words + types + emb.position_embeddings.weight[positions], emb.LayerNorm)]
    for layer in model.encoder.layer:
        sa, dh = layer.attention.self, cfg.hidden_size // cfg.num_attention_heads

        def attn(h, sa=sa, out=layer.attention.output.dense, dh=dh):
            q, k, v = (heads(lin(h, m), dh) for m in (sa.query, sa.key, sa.value))
            return lin(attention(q, k, v, dh**-0.5), out)

        def mlp(h, layer=layer):
            return lin(gelu_erf(lin(h, layer.intermediate.dense)), layer.output.dense)

        norm1 = partial(ln, mod=layer.attention.output.LayerNorm)
        norm2 = partial(ln, mod=layer.output.LayerNorm)
        stream.append(post_norm_block(stream[-1], attn, norm1, mlp, norm2, name))
    return stream


def mpnet_position_bias(weight, n, num_buckets=32, max_distance=128):
    """(heads, tokens, tokens): the learned bias of the bucketed relative position (query minus key), T5-style; the
    encoder computes it once for all layers, with 32 buckets whatever the config says (at 7 tokens every distance
    has its own bucket: the logarithmic buckets start at distance 8)."""
    i = torch.arange(n)
    d = i[:, None] - i[None, :]
    half = num_buckets // 2
    exact = half // 2
    a = d.abs()
    log_bucket = exact + (torch.log(a.clamp(min=1).to(F32) / exact) / math.log(max_distance / exact) * (half - exact))
    bucket = (d < 0).long() * half + torch.where(a < exact, a, log_bucket.long().clamp(max=half - 1))
    return weight[bucket].permute(2, 0, 1)


def mpnet_reference(model, ids, name):
    cfg, emb = model.config, model.embeddings
    n = ids.shape[1]
    positions = torch.arange(n) + emb.padding_idx + 1  # no padding: positions start at padding_idx + 1
    stream = [ln(emb.word_embeddings.weight[ids] + emb.position_embeddings.weight[positions], emb.LayerNorm)]
    bias = mpnet_position_bias(model.encoder.relative_attention_bias.weight, n)  # shared by all layers
    dh = cfg.hidden_size // cfg.num_attention_heads
    for layer in model.encoder.layer:
        sa = layer.attention.attn

        def attn(h, sa=sa):
            q, k, v = (heads(lin(h, m), dh) for m in (sa.q, sa.k, sa.v))
            return lin(attention(q, k, v, dh**-0.5, bias=bias), sa.o)

        def mlp(h, layer=layer):
            return lin(gelu_erf(lin(h, layer.intermediate.dense)), layer.output.dense)

        norm1 = partial(ln, mod=layer.attention.LayerNorm)
        norm2 = partial(ln, mod=layer.output.LayerNorm)
        stream.append(post_norm_block(stream[-1], attn, norm1, mlp, norm2, name))
    return stream


def gpt2_reference(model, ids, name):
    cfg = model.config
    n, d = ids.shape[1], cfg.hidden_size
    dh = d // cfg.num_attention_heads
    stream = [model.wte.weight[ids] + model.wpe.weight[torch.arange(n)]]
    for layer in model.h:

        def attn(h, layer=layer):
            q, k, v = (heads(t, dh) for t in conv1d(h, layer.attn.c_attn).split(d, dim=-1))
            return conv1d(attention(q, k, v, dh**-0.5, mask=causal_mask(n)), layer.attn.c_proj)

        def mlp(h, layer=layer):
            return conv1d(gelu_tanh(conv1d(h, layer.mlp.c_fc)), layer.mlp.c_proj)

        norm1 = partial(ln, mod=layer.ln_1)
        norm2 = partial(ln, mod=layer.ln_2)
        stream.append(block(stream[-1], name, attn, mlp, n1=norm1, n2=norm2))
    return stream


def llama_reference(model, ids, name):
    cfg = model.config
    n, dh = ids.shape[1], cfg.head_dim
    assert cfg.rope_parameters["rope_type"] == "default"
    cos, sin = rotary(cfg.rope_parameters["rope_theta"], dh, n)
    stream = [model.embed_tokens.weight[ids]]
    for layer in model.layers:
        sa = layer.self_attn

        def attn(h, sa=sa):
            q, k, v = (heads(lin(h, m), dh) for m in (sa.q_proj, sa.k_proj, sa.v_proj))
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            return lin(attention(q, k, v, dh**-0.5, mask=causal_mask(n), softmax_dtype=F32), sa.o_proj)

        def mlp(h, m=layer.mlp):
            return lin(F.silu(lin(h, m.gate_proj)) * lin(h, m.up_proj), m.down_proj)

        norm1 = partial(rms_llama, mod=layer.input_layernorm)
        norm2 = partial(rms_llama, mod=layer.post_attention_layernorm)
        stream.append(block(stream[-1], name, attn, mlp, n1=norm1, n2=norm2))
    return stream


def gemma3_reference(model, ids, name):
    cfg = model.config
    n, dh = ids.shape[1], cfg.head_dim
    stream = [model.embed_tokens.weight[ids] * cfg.hidden_size**0.5]
    for layer_type, layer in zip(cfg.layer_types, model.layers, strict=True):
        rope = cfg.rope_parameters[layer_type]
        assert rope["rope_type"] == "default"
        cos, sin = rotary(rope["rope_theta"], dh, n)
        mask = causal_mask(n, cfg.sliding_window if layer_type == "sliding_attention" else None)
        sa = layer.self_attn

        def attn(h, sa=sa, cos=cos, sin=sin, mask=mask):
            q, k, v = (heads(lin(h, m), dh) for m in (sa.q_proj, sa.k_proj, sa.v_proj))
            q, k = rms_gemma(q, sa.q_norm), rms_gemma(k, sa.k_norm)  # per head
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            scaling = cfg.query_pre_attn_scalar**-0.5
            return lin(attention(q, k, v, scaling, mask=mask, softmax_dtype=F32), sa.o_proj)

        def mlp(h, m=layer.mlp):
            return lin(gelu_tanh(lin(h, m.gate_proj)) * lin(h, m.up_proj), m.down_proj)

        n1, na = (
            partial(rms_gemma, mod=layer.input_layernorm),
            partial(rms_gemma, mod=layer.post_attention_layernorm),
        )
        n2, nm = (
            partial(rms_gemma, mod=layer.pre_feedforward_layernorm),
            partial(rms_gemma, mod=layer.post_feedforward_layernorm),
        )
        stream.append(block(stream[-1], name, attn, mlp, n1=n1, n2=n2, na=na, nm=nm))
    return stream


def partial_rotate(x, cos, sin):
    """Rotary embedding of the first ``cos.shape[-1]`` dimensions of every head; the rest pass unchanged."""
    rd = cos.shape[-1]
    return torch.cat([rotate(x[..., :rd], cos, sin), x[..., rd:]], dim=-1)


def rope(cfg, head_dim, layer_type=None):
    """cos and sin of the default rotary embedding of ``cfg`` (per layer type where the config has several)."""
    params = cfg.rope_parameters if layer_type is None else cfg.rope_parameters[layer_type]
    assert params["rope_type"] == "default"
    rotary_dim = int(head_dim * params.get("partial_rotary_factor", 1.0))
    return rotary(params["rope_theta"], rotary_dim, N_TOKENS)


def window_of(cfg, i):
    """The causal window of decoder layer ``i`` from the config: ``layer_types`` where it names them, else the
    config's ``sliding_window`` for every layer (None: the full causal prefix)."""
    layer_types = getattr(cfg, "layer_types", None)
    if layer_types is not None:
        return cfg.sliding_window if layer_types[i] == "sliding_attention" else None
    return getattr(cfg, "sliding_window", None)


def swiglu(h, m, act=F.silu):
    return lin(act(lin(h, m.gate_proj)) * lin(h, m.up_proj), m.down_proj)


# ------------------------------------------------------------------------------------------------ references
def llama_like_reference(model, ids, name):
    """Qwen2 (q/k/v biases), Qwen3 (per-head q/k RMSNorm), Mistral, Phi-3 (fused q/k/v and gate/up projections) and
    Granite (embedding, attention and branch multipliers): pre-RMSNorm decoders with rotary positions."""
    cfg = model.config
    kind = cfg.model_type
    dh = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    cos, sin = rope(cfg, dh)
    emb = model.embed_tokens.weight[ids]
    stream = [emb * cfg.embedding_multiplier if kind == "granite" else emb]
    scaling = cfg.attention_multiplier if kind == "granite" else dh**-0.5
    scale = cfg.residual_multiplier if kind == "granite" else 1.0
    for i, layer in enumerate(model.layers):
        sa, mask = layer.self_attn, causal_mask(N_TOKENS, window_of(cfg, i))

        def attn(h, sa=sa, mask=mask):
            if kind == "phi3":
                qkv = lin(h, sa.qkv_proj)
                nq, nkv = cfg.num_attention_heads * dh, cfg.num_key_value_heads * dh
                q, k, v = (heads(t, dh) for t in qkv.split([nq, nkv, nkv], dim=-1))
            else:
                q, k, v = (heads(lin(h, m), dh) for m in (sa.q_proj, sa.k_proj, sa.v_proj))
            if kind == "qwen3":
                q, k = rms_llama(q, sa.q_norm), rms_llama(k, sa.k_norm)  # per head, before the rotation
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            return lin(attention(q, k, v, scaling, mask=mask, softmax_dtype=F32), sa.o_proj)

        def mlp(h, m=layer.mlp):
            if kind == "phi3":
                gate, up = lin(h, m.gate_up_proj).chunk(2, dim=-1)
                return lin(up * F.silu(gate), m.down_proj)
            return swiglu(h, m)

        n1 = partial(rms_llama, mod=layer.input_layernorm)
        n2 = partial(rms_llama, mod=layer.post_attention_layernorm)
        stream.append(block(stream[-1], name, attn, mlp, n1=n1, n2=n2, scale=scale))
    return stream


def gemma2_reference(model, ids, name):
    """Norms before and after each sub-block, soft-capped attention logits, sqrt(width) embedding scale."""
    cfg = model.config
    dh = cfg.head_dim
    cos, sin = rope(cfg, dh)
    stream = [model.embed_tokens.weight[ids] * cfg.hidden_size**0.5]
    for i, layer in enumerate(model.layers):
        sa, mask = layer.self_attn, causal_mask(N_TOKENS, window_of(cfg, i))

        def attn(h, sa=sa, mask=mask):
            q, k, v = (heads(lin(h, m), dh) for m in (sa.q_proj, sa.k_proj, sa.v_proj))
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            scaling, cap = cfg.query_pre_attn_scalar**-0.5, cfg.attn_logit_softcapping
            return lin(attention(q, k, v, scaling, mask=mask, softmax_dtype=F32, softcap=cap), sa.o_proj)

        norms = {
            key: partial(rms_gemma, mod=getattr(layer, attr))
            for key, attr in (
                ("n1", "input_layernorm"),
                ("na", "post_attention_layernorm"),
                ("n2", "pre_feedforward_layernorm"),
                ("nm", "post_feedforward_layernorm"),
            )
        }
        stream.append(block(stream[-1], name, attn, partial(swiglu, m=layer.mlp, act=gelu_tanh), **norms))
    return stream


def olmo2_reference(model, ids, name):
    """No norm before a sub-block, an RMSNorm after each; q/k RMSNorm over the whole width before the heads."""
    cfg = model.config
    dh = cfg.hidden_size // cfg.num_attention_heads
    cos, sin = rope(cfg, dh)
    stream = [model.embed_tokens.weight[ids]]
    for layer in model.layers:
        sa = layer.self_attn

        def attn(h, sa=sa):
            q = heads(rms_llama(lin(h, sa.q_proj), sa.q_norm), dh)
            k = heads(rms_llama(lin(h, sa.k_proj), sa.k_norm), dh)
            v = heads(lin(h, sa.v_proj), dh)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            return lin(attention(q, k, v, dh**-0.5, mask=causal_mask(N_TOKENS), softmax_dtype=F32), sa.o_proj)

        na = partial(rms_llama, mod=layer.post_attention_layernorm)
        nm = partial(rms_llama, mod=layer.post_feedforward_layernorm)
        stream.append(block(stream[-1], name, attn, partial(swiglu, m=layer.mlp), na=na, nm=nm))
    return stream


def gpt_neox_reference(model, ids, name):
    """Two LayerNorms, fused q/k/v interleaved per head, rotary on part of each head; parallel or sequential as the
    config's ``use_parallel_residual`` says."""
    cfg = model.config
    dh = cfg.hidden_size // cfg.num_attention_heads
    cos, sin = rope(cfg, dh)
    stream = [model.embed_in.weight[ids]]
    for layer in model.layers:
        sa = layer.attention

        def attn(h, sa=sa):
            qkv = lin(h, sa.query_key_value).view(BATCH, N_TOKENS, cfg.num_attention_heads, 3 * dh).transpose(1, 2)
            q, k, v = qkv.chunk(3, dim=-1)
            q, k = partial_rotate(q, cos, sin), partial_rotate(k, cos, sin)
            return lin(attention(q, k, v, dh**-0.5, mask=causal_mask(N_TOKENS), softmax_dtype=F32), sa.dense)

        def mlp(h, m=layer.mlp):
            return lin(gelu_erf(lin(h, m.dense_h_to_4h)), m.dense_4h_to_h)

        n1, n2 = partial(ln, mod=layer.input_layernorm), partial(ln, mod=layer.post_attention_layernorm)
        stream.append(block(stream[-1], name, attn, mlp, n1=n1, n2=n2, parallel=cfg.use_parallel_residual))
    return stream


def phi_reference(model, ids, name):
    """One shared LayerNorm before attention and MLP in parallel; rotary on part of each head; biases everywhere."""
    cfg = model.config
    dh = cfg.hidden_size // cfg.num_attention_heads
    cos, sin = rope(cfg, dh)
    stream = [model.embed_tokens.weight[ids]]
    for layer in model.layers:
        sa = layer.self_attn

        def attn(h, sa=sa):
            q, k, v = (heads(lin(h, m), dh) for m in (sa.q_proj, sa.k_proj, sa.v_proj))
            q, k = partial_rotate(q, cos, sin), partial_rotate(k, cos, sin)
            return lin(attention(q, k, v, dh**-0.5, mask=causal_mask(N_TOKENS), softmax_dtype=F32), sa.dense)

        def mlp(h, m=layer.mlp):
            return lin(gelu_tanh(lin(h, m.fc1)), m.fc2)

        norm = partial(ln, mod=layer.input_layernorm)
        stream.append(block(stream[-1], name, attn, mlp, n1=norm, n2=norm, parallel=True))
    return stream


def modernbert_reference(model, ids, name):
    """Pre-LayerNorm encoder without biases (layer 0 has no norm before attention: the embeddings end in one);
    fused q/k/v, rotary with a base per layer type (q and k rounded to float32 before the rotation), GeGLU MLP;
    local layers attend to the tokens at most ``local_attention / 2`` away, global layers to all."""
    cfg = model.config
    dh = cfg.hidden_size // cfg.num_attention_heads
    emb = model.embeddings
    stream = [ln(emb.tok_embeddings.weight[ids], emb.norm)]
    d = torch.arange(N_TOKENS)[:, None] - torch.arange(N_TOKENS)[None, :]
    for i, layer in enumerate(model.layers):
        layer_type = cfg.layer_types[i]
        mask = d.abs() <= cfg.local_attention // 2 if layer_type == "sliding_attention" else None
        cos, sin = rope(cfg, dh, layer_type)

        def attn(h, sa=layer.attn, mask=mask, cos=cos, sin=sin):
            qkv = lin(h, sa.Wqkv).view(BATCH, N_TOKENS, 3, cfg.num_attention_heads, dh)
            q, k, v = (t.transpose(1, 2) for t in qkv.unbind(dim=2))
            q, k = (rotate(t.to(F32).double(), cos, sin) for t in (q, k))
            return lin(attention(q, k, v, dh**-0.5, mask=mask, softmax_dtype=F32), sa.Wo)

        def mlp(h, m=layer.mlp):
            x, gate = lin(h, m.Wi).chunk(2, dim=-1)
            return lin(gelu_erf(x) * gate, m.Wo)

        n1 = identity if i == 0 else partial(ln, mod=layer.attn_norm)
        stream.append(block(stream[-1], name, attn, mlp, n1=n1, n2=partial(ln, mod=layer.mlp_norm)))
    return stream


# ------------------------------------------------------------------------------------------------ mixture of experts
def gated_expert(gate_up, down, act=F.silu):
    """One expert of stacked weights ``gate_up`` (2I, H) and ``down`` (H, I): ``down(act(gate) * up)``."""

    def expert(x):
        gate, up = (x @ gate_up.T).chunk(2, dim=-1)
        return (act(gate) * up) @ down.T

    return expert


def softmax_top_k(logits, k, renormalise):
    """Softmax over all experts (float32), the ``k`` largest kept, renormalised to sum 1 when ``renormalise``."""
    probs = torch.softmax(logits.to(F32), dim=-1)
    values, indices = probs.topk(k, dim=-1)
    if renormalise:
        values = values / values.sum(-1, keepdim=True)
    return top_k_weights(values.double(), indices, logits.shape[-1])


def top_k_softmax(logits, k, dtype=F32):
    """The ``k`` largest logits, softmax over those ``k`` only (in ``dtype``)."""
    values, indices = logits.to(dtype).topk(k, dim=-1)
    return top_k_weights(torch.softmax(values, dim=-1).double(), indices, logits.shape[-1])


def sparsemixer(logits, eps):
    """Phi-MoE's router in evaluation: the best expert, weighted by a softmax over the experts whose logit is within
    a relative ``2 eps`` of the best one; then the best of the others, weighted by a softmax over the others within
    ``2 eps`` of it (each softmax masks the experts outside its band)."""
    weights = torch.zeros_like(logits)
    remaining = logits.clone()
    for _ in range(2):
        best, choice = remaining.max(dim=-1, keepdim=True)
        far = (best - logits) / logits.abs().clamp(min=best) > 2 * eps
        gates = torch.softmax(remaining.masked_fill(far, -math.inf), dim=-1)
        weights.scatter_(1, choice, gates.gather(1, choice))
        remaining = remaining.scatter(1, choice, -math.inf)
    return weights


def sparse_layer(cfg, i):
    """Whether decoder layer ``i`` of a Qwen-MoE config has the expert layer (else a dense MLP)."""
    return i not in cfg.mlp_only_layers and cfg.num_experts > 0 and (i + 1) % cfg.decoder_sparse_step == 0


def expert_layer(model, h, layer, i):
    """The MLP of decoder layer ``i`` of a mixture-of-experts model on the normed input ``h``, from its weights:
    routing as the family's config says, then the weighted sum of the chosen experts (plus shared experts)."""
    cfg, kind, m = model.config, model.config.model_type, getattr(layer, "block_sparse_moe", None) or layer.mlp
    k, flat = cfg.num_experts_per_tok, h.reshape(-1, h.shape[-1])
    if kind in ("qwen2_moe", "qwen3_moe") and not sparse_layer(cfg, i):
        return swiglu(h, m)
    if kind == "gpt_oss":
        weights = top_k_softmax(lin(flat, m.router), k, dtype=torch.float64)
        ex = m.experts

        def oss_expert(x, e):
            gate_up = x @ ex.gate_up_proj[e] + ex.gate_up_proj_bias[e]
            gate, up = gate_up[..., ::2], gate_up[..., 1::2]  # interleaved
            gate, up = gate.clamp(max=cfg.swiglu_limit), up.clamp(-cfg.swiglu_limit, cfg.swiglu_limit)
            glu = gate * torch.sigmoid(gate * cfg.swiglu_alpha)
            return ((up + 1) * glu) @ ex.down_proj[e] + ex.down_proj_bias[e]

        experts = [partial(oss_expert, e=e) for e in range(cfg.num_local_experts)]
        return routed(h, weights, experts)
    router = m.router if kind in ("granitemoe", "phimoe") else m.gate
    logits = flat @ router.weight.T
    if kind == "phimoe":
        weights = sparsemixer(logits, cfg.router_jitter_noise)
    elif kind == "granitemoe":
        weights = top_k_softmax(logits, k)
    else:
        renormalise = True if kind == "mixtral" else cfg.norm_topk_prob
        weights = softmax_top_k(logits, k, renormalise)
    ex = m.experts
    experts = [gated_expert(ex.gate_up_proj[e], ex.down_proj[e]) for e in range(ex.gate_up_proj.shape[0])]
    out = routed(h, weights, experts)
    if kind == "qwen2_moe":
        out = out + torch.sigmoid(lin(h, m.shared_expert_gate)) * swiglu(h, m.shared_expert)
    return out


def moe_reference(model, ids, name):
    """Mixtral, Qwen2-MoE (q/k/v biases), Qwen3-MoE (per-head q/k RMSNorm), OLMoE (q/k RMSNorm over the full width),
    Granite-MoE (embedding, attention and branch multipliers), gpt-oss (a sink logit per head, biases, sliding and
    full layers) and Phi-MoE (LayerNorms, biases, the sparsemixer router): pre-norm decoders with rotary positions
    and an expert layer as the MLP."""
    cfg = model.config
    kind = cfg.model_type
    dh = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    cos, sin = rope(cfg, dh)
    emb = model.embed_tokens.weight[ids]
    stream = [emb * cfg.embedding_multiplier if kind == "granitemoe" else emb]
    scaling = cfg.attention_multiplier if kind == "granitemoe" else dh**-0.5
    scale = cfg.residual_multiplier if kind == "granitemoe" else 1.0
    for i, layer in enumerate(model.layers):
        sa, mask = layer.self_attn, causal_mask(N_TOKENS, window_of(cfg, i))

        def attn(h, sa=sa, mask=mask):
            if kind == "olmoe":
                q = heads(rms_llama(lin(h, sa.q_proj), sa.q_norm), dh)
                k = heads(rms_llama(lin(h, sa.k_proj), sa.k_norm), dh)
                v = heads(lin(h, sa.v_proj), dh)
            else:
                q, k, v = (heads(lin(h, m), dh) for m in (sa.q_proj, sa.k_proj, sa.v_proj))
            if kind == "qwen3_moe":
                q, k = rms_llama(q, sa.q_norm), rms_llama(k, sa.k_norm)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            if kind == "gpt_oss":
                return lin(sink_attention(q, k, v, scaling, mask, sa.sinks), sa.o_proj)
            return lin(attention(q, k, v, scaling, mask=mask, softmax_dtype=F32), sa.o_proj)

        norm = ln if kind == "phimoe" else rms_llama  # Phi-MoE: LayerNorms with bias
        n1 = partial(norm, mod=layer.input_layernorm)
        n2 = partial(norm, mod=layer.post_attention_layernorm)
        mlp = partial(expert_layer, model, layer=layer, i=i)
        stream.append(block(stream[-1], name, attn, mlp, n1=n1, n2=n2, scale=scale))
    return stream


def sink_attention(q, k, v, scaling, mask, sinks):
    """gpt-oss's attention: every row's softmax runs over the real tokens and one sink logit of its head, which
    has no value (attention to a zero vector), so a row's weights over the tokens sum to less than one."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = ((q @ k.transpose(-1, -2)) * scaling).masked_fill(~mask, -math.inf)
    sink = sinks.view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
    p = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    b, _, n, _ = q.shape
    return (p @ v).transpose(1, 2).reshape(b, n, -1)


def rotate_pairs(x, cos, sin):
    """Rotary embedding in interleaved pairs: dimensions ``2j`` and ``2j + 1`` rotate by the ``j``-th angle
    (DeepSeek's ``rope_interleave``)."""
    half = cos.shape[-1] // 2
    c, s = cos[..., :half], sin[..., :half]
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * c - odd * s, odd * c + even * s], dim=-1).flatten(-2)


def grouped_sigmoid_routing(logits, bias, cfg):
    """DeepSeek-V3's router (float32): sigmoid scores; the experts chosen by score + correction bias among the
    ``topk_group`` groups whose two best biased scores sum highest; weighted by their unbiased scores (renormalised
    iff ``norm_topk_prob``) times ``routed_scaling_factor``."""
    scores = logits.sigmoid()
    biased = scores + bias
    n_tokens, n_experts = scores.shape
    per_group = n_experts // cfg.n_group
    group_strength = biased.view(n_tokens, cfg.n_group, per_group).topk(2, dim=-1).values.sum(-1)
    best_groups = group_strength.topk(cfg.topk_group, dim=-1).indices
    allowed = torch.zeros(n_tokens, cfg.n_group, dtype=torch.bool).scatter(1, best_groups, True)
    allowed = allowed.repeat_interleave(per_group, dim=1)
    chosen = biased.masked_fill(~allowed, -math.inf).topk(cfg.num_experts_per_tok, dim=-1).indices
    weights = scores.gather(1, chosen)
    if cfg.norm_topk_prob:
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
    return top_k_weights((weights * cfg.routed_scaling_factor).double(), chosen, n_experts)


def deepseek_v3_reference(model, ids, name):
    """Multi-head latent attention (queries through a low-rank bottleneck with its RMSNorm; keys and values
    expanded from a normed latent, one rotary key part shared by all heads, rotary on part of each head in
    interleaved pairs), dense MLPs in the first ``first_k_dense_replace`` layers, then grouped sigmoid routing plus
    ungated shared experts."""
    cfg = model.config
    nope, rot, dv = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    cos, sin = rope(cfg, rot)
    stream = [model.embed_tokens.weight[ids]]
    for i, layer in enumerate(model.layers):
        sa = layer.self_attn

        def attn(h, sa=sa):
            q = heads(lin(rms_llama(lin(h, sa.q_a_proj), sa.q_a_layernorm), sa.q_b_proj), nope + rot)
            q = torch.cat([q[..., :nope], rotate_pairs(q[..., nope:], cos, sin)], dim=-1)
            latent, k_rot = lin(h, sa.kv_a_proj_with_mqa).split([cfg.kv_lora_rank, rot], dim=-1)
            kv = heads(lin(rms_llama(latent, sa.kv_a_layernorm), sa.kv_b_proj), nope + dv)
            k_rot = rotate_pairs(k_rot[:, None], cos, sin).expand(-1, kv.shape[1], -1, -1)
            k, v = torch.cat([kv[..., :nope], k_rot], dim=-1), kv[..., nope:]
            mask = causal_mask(N_TOKENS)
            return lin(attention(q, k, v, (nope + rot) ** -0.5, mask=mask, softmax_dtype=F32), sa.o_proj)

        def mlp(h, m=layer.mlp, i=i):
            if i < cfg.first_k_dense_replace:
                return swiglu(h, m)
            flat = h.reshape(-1, h.shape[-1])
            logits = flat.to(F32) @ m.gate.weight.to(F32).T
            weights = grouped_sigmoid_routing(logits, m.gate.e_score_correction_bias.to(F32), cfg)
            ex = m.experts
            experts = [gated_expert(ex.gate_up_proj[e], ex.down_proj[e]) for e in range(ex.gate_up_proj.shape[0])]
            return routed(h, weights, experts) + swiglu(h, m.shared_experts)

        n1 = partial(rms_llama, mod=layer.input_layernorm)
        n2 = partial(rms_llama, mod=layer.post_attention_layernorm)
        stream.append(block(stream[-1], name, attn, mlp, n1=n1, n2=n2))
    return stream


REFERENCES = {
    "roberta": roberta_reference,
    "mpnet": mpnet_reference,
    "gpt2": gpt2_reference,
    "llama": llama_reference,
    "gemma3": gemma3_reference,
    "qwen2": llama_like_reference,
    "qwen3": llama_like_reference,
    "mistral": llama_like_reference,
    "phi3": llama_like_reference,
    "granite": llama_like_reference,
    "gemma2": gemma2_reference,
    "olmo2": olmo2_reference,
    "gpt_neox": gpt_neox_reference,
    "phi": phi_reference,
    "modernbert": modernbert_reference,
    "mixtral": moe_reference,
    "qwen2_moe": moe_reference,
    "qwen3_moe": moe_reference,
    "olmoe": moe_reference,
    "granitemoe": moe_reference,
    "gpt_oss": moe_reference,
    "phimoe": moe_reference,
    "deepseek_v3": deepseek_v3_reference,
}
#: the cases with a reference
REFERENCED = [case for case in CASES if family_of(case) in REFERENCES]


# ------------------------------------------------------------------------------------------------ tests
#: the scalar each family multiplies its branches by, as the config key that holds it
MULTIPLIER = {"granite": "residual_multiplier", "granitemoe": "residual_multiplier"}
#: the families whose blocks add attention and MLP in parallel (GPT-NeoX: as its config says)
PARALLEL = {"phi": True, "gpt_neox": "use_parallel_residual"}


def test_every_family_of_the_table_has_a_case():
    """One case per family (the paper's encoders in tests/unit/models/test_ablations.py), each with its reference."""
    assert {family_of(case) for case in CASES} | ELSEWHERE == set(FAMILY_TABLE) and len(FAMILY_TABLE) >= 24
    assert set(REFERENCES) | ELSEWHERE == set(FAMILY_TABLE)
    assert len({f for f in REFERENCES if FAMILY_TABLE[f].experts_key}) >= 6


@pytest.mark.parametrize("case", [c for c in CASES if FAMILY_TABLE[family_of(c)].pre_norm_parts])
def test_residual_identity_in_every_block(models, ids, case):
    """Unmodified model, every block: output = input + s attention branch + s MLP branch (``s``: the config's branch
    multiplier, 1 without one), each branch taken at the module that ends it (the norm after the sub-block where
    there is one); the MLP's input is the norm of the block input (parallel blocks) or of the input plus the
    attention branch (sequential blocks), as the config says."""
    model, family = models[case], family_of(case)
    entry = FAMILIES[family]
    norm_a, attn, post_a, norm_m, mlp, post_m = entry.row.pre_norm_parts
    scale = float(getattr(model.config, MULTIPLIER[family])) if family in MULTIPLIER else 1.0
    flag = PARALLEL.get(family, False)
    parallel = bool(getattr(model.config, flag)) if isinstance(flag, str) else flag
    assert entry.parallel_residual(model.config) == parallel
    seen = {}

    def keep(key):
        def hook(module, args, kwargs, out):
            seen[key] = out[0] if isinstance(out, tuple) else out
            if key == "block":
                seen["x"] = args[0] if args else kwargs["hidden_states"]

        return hook

    def keep_input(module, args, kwargs):
        seen["mlp_in"] = args[0] if args else kwargs["hidden_states"]

    for i, layer in enumerate(entry.layers(model)):
        hooks = [
            layer.register_forward_hook(keep("block"), with_kwargs=True),
            getattr(layer, post_a or attn).register_forward_hook(keep("a"), with_kwargs=True),
            getattr(layer, post_m or mlp).register_forward_hook(keep("m"), with_kwargs=True),
            getattr(layer, mlp).register_forward_pre_hook(keep_input, with_kwargs=True),
        ]
        try:
            run(model, ids)
        finally:
            for h in hooks:
                h.remove()
        x, a, m, y = seen["x"], seen["a"], seen["m"], seen["block"]
        torch.testing.assert_close(y, x + scale * a + scale * m, **TOL, msg=lambda s, i=i: f"{case} block {i}: {s}")
        norm = getattr(layer, norm_m) if norm_m else identity
        with torch.no_grad():
            want = norm(x) if parallel else norm(x + scale * a)
        torch.testing.assert_close(seen["mlp_in"], want, **TOL, msg=lambda s, i=i: f"{case} block {i} MLP input: {s}")
        if scale != 1.0:  # the multiplier matters: without it the identity fails
            assert (y - (x + a + m)).abs().max() > 1e-3


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("case", REFERENCED)
def test_variant_matches_reference(models, ids, case, name):
    model, family = models[case], family_of(case)
    with variant(model, family, name):
        stream = residual_stream(model, family, ids)
    with torch.no_grad():
        expected = REFERENCES[family](model, ids, name)
    assert len(stream) == len(expected) == model.config.num_hidden_layers + 1
    for layer, (got, want) in enumerate(zip(stream, expected, strict=True)):
        torch.testing.assert_close(got, want, **TOL, msg=lambda m, layer=layer: f"{case} {name} layer {layer}: {m}")


@pytest.mark.parametrize("case", REFERENCED)
def test_references_distinguish_the_variants(models, ids, case):
    """The comparison above can tell the variants apart (their last layers all differ), and the references depend
    on the structure the config gives: windows, parallel blocks and multipliers change the unmodified stream."""
    model, family = models[case], family_of(case)
    with torch.no_grad():
        last = {name: REFERENCES[family](model, ids, name)[-1] for name in VARIANT_NAMES}
    for i, a in enumerate(VARIANT_NAMES):
        for b in VARIANT_NAMES[i + 1 :]:
            assert (last[a] - last[b]).abs().max() > 1e-3, (a, b)


def test_structure_read_from_the_config_changes_the_stream(models, ids):
    """A parallel and a sequential GPT-NeoX with the same weights differ only in the unmodified transformer; the
    windows of the sliding and local layers change what they attend to."""
    parallel, sequential = models["gpt_neox"], models["gpt_neox_sequential"]
    for name in VARIANT_NAMES:
        with variant(parallel, "gpt_neox", name), variant(sequential, "gpt_neox", name):
            a, b = residual_stream(parallel, "gpt_neox", ids)[-1], residual_stream(sequential, "gpt_neox", ids)[-1]
        if name == "transformer":
            assert (a - b).abs().max() > 1e-3
        else:
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    for case in ("qwen2", "mistral", "phi3", "gemma2", "modernbert"):
        model, family = models[case], family_of(case)
        stream = residual_stream(model, family, ids)
        cfg = model.config
        saved = (cfg.sliding_window, getattr(cfg, "local_attention", None))
        try:
            if case == "modernbert":
                cfg.local_attention = 64
            else:
                cfg.sliding_window = 64
            wide = residual_stream(model, family, ids)
        finally:
            cfg.sliding_window = saved[0]
            if case == "modernbert":
                cfg.local_attention = saved[1]
        assert (stream[-1] - wide[-1]).abs().max() > 1e-6, case


@pytest.mark.parametrize("case", list(CASES))
def test_transformer_variant_is_the_unmodified_model(models, ids, case):
    """Post-norm encoders: every hidden state of transformers is the recorded stream. Pre-norm models: all but the
    last, which transformers replaces by the output of the final norm; the stream is never normalised."""
    model, family = models[case], family_of(case)
    with variant(model, family, "transformer"):
        stream = residual_stream(model, family, ids)
    hidden = run(model, ids).hidden_states
    assert len(hidden) == len(stream) == model.config.num_hidden_layers + 1
    exact = {"rtol": 0, "atol": 0}
    final_norm = FAMILIES[family].final_norm
    if final_norm is None:
        for got, want in zip(stream, hidden, strict=True):
            torch.testing.assert_close(got, want, **exact)
        return
    for got, want in zip(stream[:-1], hidden[:-1], strict=True):
        torch.testing.assert_close(got, want, **exact)
    with torch.no_grad():
        torch.testing.assert_close(getattr(model, final_norm)(stream[-1]), hidden[-1], **exact)
    assert (stream[-1] - hidden[-1]).abs().max() > 1e-3


@pytest.mark.parametrize("case", list(CASES))
def test_leaving_a_variant_restores_the_model(models, ids, case):
    model, family = models[case], family_of(case)
    before = run(model, ids).hidden_states
    for name in VARIANT_NAMES:
        with variant(model, family, name):
            residual_stream(model, family, ids)
        assert not [(m, a) for m in model.modules() for a in OVERRIDDEN if a in m.__dict__]
        for got, want in zip(run(model, ids).hidden_states, before, strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("name", ("SAN", "SAN+MLP"))
@pytest.mark.parametrize("case", [c for c in CASES if FAMILIES[family_of(c)].row.causal])
def test_decoder_variants_stay_causal(models, ids, case, name):
    """Changing the last token leaves every earlier position of every layer unchanged."""
    model, family = models[case], family_of(case)
    changed = ids.clone()
    changed[:, -1] = 95 - ids[:, -1]
    with variant(model, family, name):
        a, b = residual_stream(model, family, ids), residual_stream(model, family, changed)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x[:, :-1], y[:, :-1], **TOL)
        assert (x[:, -1] - y[:, -1]).abs().max() > 0


def test_mixture_of_experts_structure_from_the_config(models, ids):
    """The dense layers of a mixed model are dense modules (Qwen-MoE's ``mlp_only_layers`` and
    ``decoder_sparse_step``, DeepSeek-V3's ``first_k_dense_replace``); renormalising the routing changes the
    stream; gpt-oss's rows over real tokens sum to less than one (its sinks), Mixtral's to one."""
    sparse = {case: [hasattr(layer.mlp, "experts") for layer in models[case].layers]
              for case in ("qwen2_moe", "qwen3_moe", "deepseek_v3")}  # fmt: skip
    assert sparse == {"qwen2_moe": [False, True, True], "qwen3_moe": [False, True, False],
                      "deepseek_v3": [False, True, True]}  # fmt: skip
    plain, renormalised = models["olmoe"], models["olmoe_renormalised"]
    assert (
        residual_stream(plain, "olmoe", ids)[-1] - residual_stream(renormalised, "olmoe", ids)[-1]
    ).abs().max() > 1e-3
    for case, below_one in (("gpt_oss", True), ("mixtral", False)):
        with torch.no_grad():
            attentions = models[case](input_ids=ids, output_attentions=True).attentions
        sums = torch.stack([a.sum(-1) for a in attentions])
        if below_one:
            assert sums.max() < 1 - 1e-3
        else:
            torch.testing.assert_close(sums, torch.ones_like(sums), rtol=0, atol=1e-6)  # a float32 softmax


def test_the_test_variants_are_the_papers():
    """The variants the references use, as the paper defines them (Fig. 2), and the names the code runs."""
    from san.models.spec import VARIANTS

    assert VARIANT_SWITCHES == {
        "SAN": (False, False), "SAN+MLP": (False, True), "SAN+skip": (True, False), "transformer": (True, True)
    }  # fmt: skip
    assert set(VARIANTS) == set(VARIANT_NAMES)


@pytest.mark.slow
def test_registry_names_transformers_classes_and_imports_them_on_use():
    """Every family's class names resolve to transformers classes of the right kind, and importing the registry
    imports no family's modelling code (a job imports only the family it runs)."""
    import subprocess
    import sys

    from transformers import PretrainedConfig, PreTrainedModel

    for name, entry in FAMILIES.items():
        assert issubclass(entry.config_cls, PretrainedConfig), name
        assert issubclass(entry.model_cls, PreTrainedModel), name
        assert entry.model_cls.config_class is entry.config_cls, name
        assert entry.lm_cls is None or issubclass(entry.lm_cls, PreTrainedModel), name
    probe = (
        "import sys; from san.models.families import FAMILIES; "
        "print(sorted(m for m in sys.modules if '.modeling_' in m and '.models.' in m)); "
        "FAMILIES['bert'].model_cls; "
        "print(sorted(m for m in sys.modules if '.modeling_' in m and '.models.' in m))"
    )
    before, after = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert before == "[]"
    assert "transformers.models.bert.modeling_bert" in after and "gemma3" not in after


def test_init_clears_only_token_ids_outside_the_bundled_vocabulary(tmp_path, caplog):
    """An init model gets the bundled 30,522-id tokenizer: GPT-2's end-of-text id 50,256 is cleared (recorded in
    the manifest), ids inside the vocabulary stay, and the weights are those the default config draws."""
    import json

    from safetensors.torch import load_file

    from san.models.acquire import materialise_init

    arch = {"n_embd": 16, "n_layer": 2, "n_head": 2, "n_positions": 64}
    manifest = materialise_init("gpt2", arch, 0, tmp_path / "gpt2")
    config = json.loads((tmp_path / "gpt2" / "config.json").read_text())
    assert manifest["cleared_token_ids"] == {"bos_token_id": 50256, "eos_token_id": 50256}
    assert config["bos_token_id"] is None and config["eos_token_id"] is None
    entry = FAMILIES["gpt2"]
    torch.manual_seed(0)
    reference = entry.model_cls(entry.config_cls(**arch, vocab_size=config["vocab_size"]))
    saved = load_file(tmp_path / "gpt2" / "model.safetensors")
    for name, tensor in reference.state_dict().items():
        if name in saved:
            assert torch.equal(saved[name], tensor), name
    assert set(saved) <= set(reference.state_dict())

    kept = materialise_init(
        "roberta",
        {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32},
        0,
        tmp_path / "roberta",
    )
    assert "cleared_token_ids" not in kept
    assert json.loads((tmp_path / "roberta" / "config.json").read_text())["pad_token_id"] == 1


def test_every_family_row_names_a_known_ablation_and_its_blocks():
    """The table names each family's ablation (looked up in san.models.ablations) and, for a pre-norm ablation, the
    block's parts."""
    from san.models.ablations import ABLATIONS
    from san.models.spec import FAMILY_TABLE

    for name, row in FAMILY_TABLE.items():
        assert row.ablation in ABLATIONS, name
        assert (row.pre_norm_parts is not None) == (row.ablation in ("gpt2", "pre_norm", "vision", "t5")), name
    assert not set(ABLATIONS) - {row.ablation for row in FAMILY_TABLE.values()}, "an ablation no family uses"


@pytest.mark.slow
def test_a_rank_collapse_job_holds_one_copy_of_the_weights(tmp_path, monkeypatch):
    """``run`` loads each weight set once per dtype, in the dtype asked, and only after the previous copy is gone:
    the four variants are overrides on one model, never four models (the memory a job needs is one copy of the
    weights; benchmarks/bench_rank_collapse.py --memory measures it on a 1B model)."""
    import gc
    import weakref

    import xarray as xr

    import san.rank_collapse.experiment as experiment
    from san.models.acquire import materialise_init

    arch = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 32}
    folders = {w: tmp_path / w for w in ("init", "pretrained")}
    for seed, folder in enumerate(folders.values()):
        materialise_init("llama", arch, seed, folder)
    inputs = {
        w: xr.Dataset(
            {"input_ids": (("sample", "token"), torch.randint(5, 90, (2, 6)).numpy())}, attrs={"input_sha256": w}
        )
        for w in folders
    }
    loaded, load = [], experiment.load_model

    def counting_load(folder, family, dtype):
        gc.collect()
        assert not [m for m in loaded if m() is not None], "a second copy of the weights while one is alive"
        model = load(folder, family, dtype)
        assert {p.dtype for p in model.parameters()} == {dtype}
        loaded.append(weakref.ref(model))
        return model

    monkeypatch.setattr(experiment, "load_model", counting_load)
    settings = {
        "variants": list(VARIANT_NAMES), "dtype": {"SAN": "float32", "SAN+MLP": "float32"}, "batch_size": 1,
        "albert_no_mlp": "identity_linears", "control_token_seed": 0,
    }  # fmt: skip
    ds = experiment.run("llama", folders, inputs, settings)
    assert len(loaded) == 4  # two weight sets x two dtypes
    assert list(ds["dtype"].values) == ["float32", "float32", "float64", "float64"]


# ------------------------------------------------------------------------------------------------ generated tables
def test_the_documents_family_tables_are_the_table():
    """README.md's list and docs/models.md's tables are generated from the family table: every family appears, and
    the committed documents' blocks are the table (``python -m san.report.readme sync``; tests/unit/report/)."""
    from helpers import ROOT

    readme, models = ((ROOT / p).read_text(encoding="utf-8") for p in ("README.md", "docs/models.md"))
    assert f"Families ({len(FAMILY_TABLE)}):" in readme
    for family in FAMILY_TABLE:
        assert f"`{family}`" in readme and f"| `{family}` |" in models, family


def test_a_new_row_is_in_every_generated_table(tmp_path):
    """A row added to the table reaches the list and both tables with its kind and block."""
    import dataclasses

    from san.models import tables

    new = dataclasses.replace(FAMILY_TABLE["mixtral"], notes="a new family", branch_multiplier="m")
    table = {**FAMILY_TABLE, "newmoe": new}
    assert f"Families ({len(FAMILY_TABLE) + 1}):" in tables.family_list(table)
    assert "`newmoe`" in tables.family_list(table)
    row_line = next(line for line in tables.family_table(table).splitlines() if line.startswith("| `newmoe`"))
    assert "mixture-of-experts decoder" in row_line and "`h = x + s Attn(N1(x))`, `y = h + s MoE(N2(h))`" in row_line


def test_the_generated_formulas_are_the_papers_variants():
    """The formulas of the generated tables, written out for one family of each kind of block."""
    from san.models.tables import block, variants

    expected = {
        "bert": ("`N1(Attn(x))`", "`N2(MLP(N1(Attn(x))))`", "`N1(x + Attn(x))`"),
        "llama": ("`Attn(N1(x))`", "`MLP(N2(Attn(N1(x))))`", "`x + Attn(N1(x))`"),
        "gemma2": ("`Na(Attn(N1(x)))`", "`Nm(MLP(N2(Na(Attn(N1(x))))))`", "`x + Na(Attn(N1(x)))`"),
        "olmo2": ("`Na(Attn(x))`", "`Nm(MLP(Na(Attn(x))))`", "`x + Na(Attn(x))`"),
        "phi": ("`Attn(N(x))`", "`MLP(N(Attn(N(x))))`", "`x + Attn(N(x))`"),
        "granitemoe": ("`s Attn(N1(x))`", "`s MoE(N2(s Attn(N1(x))))`", "`x + s Attn(N1(x))`"),
    }
    for family, (san, san_mlp, san_skip) in expected.items():
        got = variants(FAMILY_TABLE[family])
        assert (got["SAN"], got["SAN+MLP"], got["SAN+skip"]) == (san, san_mlp, san_skip), family
        assert got["transformer"] == block(FAMILY_TABLE[family])
    assert block(FAMILY_TABLE["phi"]) == "`y = x + Attn(N(x)) + MLP(N(x))`"
