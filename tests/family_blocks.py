"""The reference forwards of every family's residual stream, recomputed from the weights in plain torch (no
transformers submodule's forward is called by a reference), their building blocks, and the tiny perturbed float64
models they are checked on: the parametrised family suite (``CASES`` and ``REFERENCES``, checked by
tests/unit/models/test_families.py), the encoder stacks of encoder-decoder models (``STACKS``,
tests/unit/models/test_encoder_stacks.py), the text towers of dual text-image checkpoints (``TEXT_TOWERS``,
tests/unit/models/test_text_towers.py) and the image encoders (:func:`vision_reference`,
tests/unit/models/test_vision_families.py); the tests of acquisition by hub id (tests/integration/) hold the acquired
models against the same references.

Adding a family of a known block is one row of the family table plus one case here (``CASES``; its reference in
``REFERENCES``, the reference of its block when it has one). The variants are written out here
(``VARIANT_SWITCHES``), not taken from the code under test. Transformers computes a few things in float32 even in a
float64 model (RMSNorm, the attention softmax, the rotary angles, a router's softmax); the references do the same, so
that every family is compared at float64 tolerances.
"""

import math
from functools import partial

import torch
import torch.nn.functional as F

from san.models.families import FAMILIES

F32 = torch.float32  # what transformers computes in float32 even in a float64 model
TOL = {"rtol": 1e-10, "atol": 1e-10}


def perturbed_model(family, config):
    """A tiny float64 model of ``family`` with architecture ``config`` whose every parameter is perturbed (zero
    biases, unit or zero norm weights would let a wrong formula pass)."""
    config = FAMILIES[family].config_cls(**config, attn_implementation="eager", experts_implementation="eager")
    torch.manual_seed(0)
    model = FAMILIES[family].model_cls(config).double().eval()
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def identity(x):
    return x


def lin(x, mod):
    y = x @ mod.weight.T
    return y if mod.bias is None else y + mod.bias


def conv1d(x, mod):
    """GPT-2's Conv1D: weight of shape (in, out)."""
    return x @ mod.weight + mod.bias


def ln(x, mod):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    y = (x - mu) / torch.sqrt(var + mod.eps) * mod.weight
    return y if mod.bias is None else y + mod.bias


def rms_llama(x, mod):
    """``x / sqrt(mean(x^2) + eps) * weight``, the normalisation in float32."""
    xf = x.to(F32)
    return mod.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + mod.variance_epsilon)).to(x.dtype)


def rms_gemma(x, mod):
    """``x / sqrt(mean(x^2) + eps) * (1 + weight)``, all in float32."""
    xf = x.to(F32)
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + mod.eps) * (1.0 + mod.weight.to(F32))).to(x.dtype)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def heads(t, head_dim):
    """(batch, tokens, heads * head_dim) -> (batch, heads, tokens, head_dim)."""
    b, n, _ = t.shape
    return t.view(b, n, -1, head_dim).transpose(1, 2)


def attention(q, k, v, scaling, mask=None, bias=None, softmax_dtype=torch.float64, softcap=None):
    """Softmax attention of query heads ``q`` over key/value heads ``k``, ``v`` (fewer when grouped: each run of
    consecutive query heads shares one key/value head); ``mask`` (tokens, tokens) is True where a query may attend,
    ``bias`` is added to the scores, ``softcap`` caps them at ``softcap * tanh(scores / softcap)``. Returns (batch,
    tokens, heads * head_dim)."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    p = torch.softmax(scores.to(softmax_dtype), dim=-1).to(q.dtype)
    b, _, n, _ = q.shape
    return (p @ v).transpose(1, 2).reshape(b, n, -1)


def causal_mask(n, window=None):
    i = torch.arange(n)
    d = i[:, None] - i[None, :]  # query position minus key position
    return (d >= 0) & (d < window) if window is not None else d >= 0


def rotary(theta, head_dim, n):
    """cos and sin of the rotary angles ``position * theta^(-2j/head_dim)`` (float32 as in transformers)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=F32) / head_dim))
    angles = torch.arange(n, dtype=F32)[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().double(), angles.sin().double()


def rotate(x, cos, sin):
    """Rotary embedding, rotate-half convention: dimension j pairs with j + head_dim/2."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


#: the paper's four variants (Fig. 2), written out here rather than taken from the code under test:
#: ``(attention skip, MLP)``. SAN is the attention branch only; SAN+MLP is attention then the MLP, no skips;
#: SAN+skip is attention with its residual; transformer is the unmodified model
VARIANT_SWITCHES = {
    "SAN": (False, False),
    "SAN+MLP": (False, True),
    "SAN+skip": (True, False),
    "transformer": (True, True),
}
VARIANT_NAMES = tuple(VARIANT_SWITCHES)


def routed(x, weights, experts):
    """A mixture-of-experts layer's routed sum ``sum_e w_e(x) expert_e(x)``: ``weights`` (tokens, experts) holds each
    token's routing weight of every expert (zero for an expert not chosen); every expert runs on every token and
    the weights select (the references never gather tokens by expert, as transformers does)."""
    flat = x.reshape(-1, x.shape[-1])
    out = sum(weights[:, e, None] * expert(flat) for e, expert in enumerate(experts))
    return out.reshape(x.shape)


def top_k_weights(scores, indices, n_experts):
    """(tokens, experts): ``scores`` (tokens, k) placed at the chosen experts ``indices``, zeros elsewhere."""
    return torch.zeros(scores.shape[0], n_experts, dtype=scores.dtype).scatter(1, indices, scores)


# --------------------------------------------------------------------------------------- the variants of a block


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


# ---------------------------------------------------------------------------------------------- the family suite
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
    # every second layer without rotary positions (no_rope_layers [1, 0, 1]); the NoPE layer slides a window
    "smollm3": ("smollm3", dict(**_SIZES, no_rope_layer_interval=2, use_sliding_window=True, sliding_window=4)),
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
    # the experts' SwiGLU clamps its gate and its linear part at swiglu_limit: 1 here, which part of the
    # activations (up to about 3) exceeds, so that the clamp changes the stream (the default 7 would never bind)
    "gpt_oss": (
        "gpt_oss",
        dict(**_SIZES, head_dim=8, num_local_experts=4, num_experts_per_tok=2, sliding_window=4, swiglu_limit=1.0,
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


def branch_states(forward, layer, attn, mlp, mlp_out=None):
    """The states of one block around ``forward()`` (a forward pass of its model), read by hooks: the block's input
    ``x`` and output ``y``, the attention branch ``a`` (module ``attn``'s output), the MLP's input ``mlp_in`` (module
    ``mlp``) and the MLP branch ``m`` (module ``mlp_out``'s output, ``mlp``'s by default)."""
    seen = {}

    def first(out):
        return out[0] if isinstance(out, tuple) else out

    def keep(key):
        def hook(module, args, kwargs, out):
            seen[key] = first(out)
            if key == "y":
                seen["x"] = args[0] if args else kwargs["hidden_states"]

        return hook

    def keep_input(module, args, kwargs):
        seen["mlp_in"] = args[0] if args else kwargs["hidden_states"]

    hooks = [
        layer.register_forward_hook(keep("y"), with_kwargs=True),
        attn.register_forward_hook(keep("a"), with_kwargs=True),
        (mlp_out or mlp).register_forward_hook(keep("m"), with_kwargs=True),
        mlp.register_forward_pre_hook(keep_input, with_kwargs=True),
    ]
    try:
        forward()
    finally:
        for h in hooks:
            h.remove()
    return seen


def assert_variants_restore(model, family, ids, run):
    """Every variant of ``model`` (of ``family``) entered and left: no override stays on any module, and the
    hidden states of ``run(model, ids)`` (the test module's forward pass) are those before, bit for bit."""
    from san.models.ablations import OVERRIDDEN, variant
    from san.rank_collapse.experiment import residual_stream

    before = run(model, ids).hidden_states
    for name in VARIANT_NAMES:
        with variant(model, family, name):
            residual_stream(model, family, ids)
        assert not [(m, a) for m in model.modules() for a in OVERRIDDEN if a in m.__dict__]
        for got, want in zip(run(model, ids).hidden_states, before, strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)


def family_of(case):
    return CASES[case][0]


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
            q, k, v = qkv_heads(h, sa, dh)
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
            q, k, v = qkv_heads(h, sa, dh)
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
def qkv_heads(h, sa, dh):
    """Queries, keys and values of ``h`` from the separate projections ``q_proj``, ``k_proj``, ``v_proj``, split into
    heads of width ``dh``."""
    return (heads(lin(h, m), dh) for m in (sa.q_proj, sa.k_proj, sa.v_proj))


def causal_attention(q, k, v, dh, out):
    """Causal attention over all ``N_TOKENS`` tokens at the scale ``dh**-0.5`` (float32 softmax), then ``out``."""
    return lin(attention(q, k, v, dh**-0.5, mask=causal_mask(N_TOKENS), softmax_dtype=F32), out)


def rotary_decoder(model):
    """What every rotary decoder's reference starts from: its config, head width (the config's ``head_dim``, else
    width over heads) and the rotary tables."""
    cfg = model.config
    dh = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return (cfg, dh, *rope(cfg, dh))


def multiplied(model, ids, dh, granite):
    """The embedding output, attention scale and branch scale of a decoder; Granite's (``granite``) multiply the
    embeddings, the attention logits and every branch by its config's multipliers."""
    cfg, emb = model.config, model.embed_tokens.weight[ids]
    if granite:
        return [emb * cfg.embedding_multiplier], cfg.attention_multiplier, cfg.residual_multiplier
    return [emb], dh**-0.5, 1.0


def llama_like_reference(model, ids, name):
    """Qwen2 (q/k/v biases), Qwen3 (per-head q/k RMSNorm), Mistral, Phi-3 (fused q/k/v and gate/up projections),
    Granite (embedding, attention and branch multipliers) and SmolLM3 (no rotation in the layers its config's
    ``no_rope_layers`` marks 0, NoPE): pre-RMSNorm decoders with rotary positions."""
    cfg, dh, cos, sin = rotary_decoder(model)
    kind = cfg.model_type
    stream, scaling, scale = multiplied(model, ids, dh, kind == "granite")
    for i, layer in enumerate(model.layers):
        sa, mask = layer.self_attn, causal_mask(N_TOKENS, window_of(cfg, i))
        rotary_here = kind != "smollm3" or cfg.no_rope_layers[i] == 1

        def attn(h, sa=sa, mask=mask, rotary_here=rotary_here):
            if kind == "phi3":
                qkv = lin(h, sa.qkv_proj)
                nq, nkv = cfg.num_attention_heads * dh, cfg.num_key_value_heads * dh
                q, k, v = (heads(t, dh) for t in qkv.split([nq, nkv, nkv], dim=-1))
            else:
                q, k, v = qkv_heads(h, sa, dh)
            if kind == "qwen3":
                q, k = rms_llama(q, sa.q_norm), rms_llama(k, sa.k_norm)  # per head, before the rotation
            if rotary_here:
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
            q, k, v = qkv_heads(h, sa, dh)
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
    cfg, dh, cos, sin = rotary_decoder(model)
    stream = [model.embed_tokens.weight[ids]]
    for layer in model.layers:
        sa = layer.self_attn

        def attn(h, sa=sa):
            q = heads(rms_llama(lin(h, sa.q_proj), sa.q_norm), dh)
            k = heads(rms_llama(lin(h, sa.k_proj), sa.k_norm), dh)
            v = heads(lin(h, sa.v_proj), dh)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            return causal_attention(q, k, v, dh, sa.o_proj)

        na = partial(rms_llama, mod=layer.post_attention_layernorm)
        nm = partial(rms_llama, mod=layer.post_feedforward_layernorm)
        stream.append(block(stream[-1], name, attn, partial(swiglu, m=layer.mlp), na=na, nm=nm))
    return stream


def gpt_neox_reference(model, ids, name):
    """Two LayerNorms, fused q/k/v interleaved per head, rotary on part of each head; parallel or sequential as the
    config's ``use_parallel_residual`` says."""
    cfg, dh, cos, sin = rotary_decoder(model)
    stream = [model.embed_in.weight[ids]]
    for layer in model.layers:
        sa = layer.attention

        def attn(h, sa=sa):
            qkv = lin(h, sa.query_key_value).view(BATCH, N_TOKENS, cfg.num_attention_heads, 3 * dh).transpose(1, 2)
            q, k, v = qkv.chunk(3, dim=-1)
            q, k = partial_rotate(q, cos, sin), partial_rotate(k, cos, sin)
            return causal_attention(q, k, v, dh, sa.dense)

        def mlp(h, m=layer.mlp):
            return lin(gelu_erf(lin(h, m.dense_h_to_4h)), m.dense_4h_to_h)

        n1, n2 = partial(ln, mod=layer.input_layernorm), partial(ln, mod=layer.post_attention_layernorm)
        stream.append(block(stream[-1], name, attn, mlp, n1=n1, n2=n2, parallel=cfg.use_parallel_residual))
    return stream


def phi_reference(model, ids, name):
    """One shared LayerNorm before attention and MLP in parallel; rotary on part of each head; biases everywhere."""
    cfg, dh, cos, sin = rotary_decoder(model)
    stream = [model.embed_tokens.weight[ids]]
    for layer in model.layers:
        sa = layer.self_attn

        def attn(h, sa=sa):
            q, k, v = qkv_heads(h, sa, dh)
            q, k = partial_rotate(q, cos, sin), partial_rotate(k, cos, sin)
            return causal_attention(q, k, v, dh, sa.dense)

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
    cfg, dh, cos, sin = rotary_decoder(model)
    kind = cfg.model_type
    stream, scaling, scale = multiplied(model, ids, dh, kind == "granitemoe")
    for i, layer in enumerate(model.layers):
        sa, mask = layer.self_attn, causal_mask(N_TOKENS, window_of(cfg, i))

        def attn(h, sa=sa, mask=mask):
            if kind == "olmoe":
                q = heads(rms_llama(lin(h, sa.q_proj), sa.q_norm), dh)
                k = heads(rms_llama(lin(h, sa.k_proj), sa.k_norm), dh)
                v = heads(lin(h, sa.v_proj), dh)
            else:
                q, k, v = qkv_heads(h, sa, dh)
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
    "smollm3": llama_like_reference,
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


# ------------------------------------------------------------------------------------------------ encoder stacks
#: 4 buckets each way, exact up to 2 tokens apart, then logarithmic up to 6: 9 tokens use every kind of bucket
_T5_SIZES = dict(
    vocab_size=100, d_model=16, d_kv=4, d_ff=32, num_layers=3, num_heads=4, relative_attention_num_buckets=8,
    relative_attention_max_distance=6,
)  # fmt: skip
#: each case: (family, architecture): T5 with its ReLU MLP, mT5 and UMT5 with their gated-GELU MLPs
STACK_CASES = {
    "t5": ("t5", {**_T5_SIZES, "feed_forward_proj": "relu"}),
    "mt5": ("mt5", {**_T5_SIZES, "feed_forward_proj": "gated-gelu"}),
    "umt5": ("umt5", {**_T5_SIZES, "feed_forward_proj": "gated-gelu"}),
}
#: the families whose every block has a position bias of its own (the others: the first block's, shared)
OWN_BIAS = {"umt5"}
#: _BART's post-norm encoder stack, its embeddings scaled by ``sqrt(d_model)``
_BART = dict(
    vocab_size=100, d_model=16, encoder_layers=3, encoder_attention_heads=4, encoder_ffn_dim=32, decoder_layers=1,
    decoder_attention_heads=4, decoder_ffn_dim=32, max_position_embeddings=32, scale_embedding=True,
    activation_function="gelu",
)  # fmt: skip
#: every case: the T5-like ones and _BART's
STACKS = {**STACK_CASES, "bart": ("bart", _BART)}


def buckets(n, num_buckets, max_distance):
    """T5's bidirectional relative position buckets (Raffel et al. 2020, Sec. 2.1) of key position minus query
    position, written out per pair: half the buckets for keys after the query; exact buckets below half of each
    half, then logarithmic ones up to ``max_distance``, the last bucket beyond."""
    half = num_buckets // 2
    exact = half // 2
    out = torch.zeros(n, n, dtype=torch.long)
    for i in range(n):
        for j in range(n):
            d = j - i
            base = half if d > 0 else 0
            r = abs(d)
            if r < exact:
                out[i, j] = base + r
            else:
                log_bucket = exact + int(math.log(r / exact) / math.log(max_distance / exact) * (half - exact))
                out[i, j] = base + min(log_bucket, half - 1)
    return out


def position_bias(attention, cfg, n):
    """(1, heads, tokens, tokens): the learned bias of each bucket."""
    b = buckets(n, cfg.relative_attention_num_buckets, cfg.relative_attention_max_distance)
    return attention.relative_attention_bias.weight[b].permute(2, 0, 1)[None]


def rms(x, mod):
    """T5's RMSNorm: ``weight * x / sqrt(mean(x^2) + eps)``, no mean subtracted, no bias; the mean square in
    float32, as transformers computes it."""
    var = x.to(F32).pow(2).mean(-1, keepdim=True)
    return mod.weight * (x * torch.rsqrt(var + mod.variance_epsilon))


def feed_forward(h, dense, cfg):
    """ReLU MLP ``wo(relu(wi(h)))`` or gated-GELU MLP ``wo(gelu_tanh(wi_0(h)) * wi_1(h))``."""
    if cfg.feed_forward_proj == "relu":
        return lin(F.relu(lin(h, dense.wi)), dense.wo)
    assert cfg.feed_forward_proj == "gated-gelu"
    return lin(gelu_tanh(lin(h, dense.wi_0)) * lin(h, dense.wi_1), dense.wo)


def encoder_reference(model, ids, name, family):
    """The residual stream of the encoder stack (embeddings, then each block's output) as variant ``name``:
    ``h = x + Attn(N1(x))``, ``y = h + MLP(N2(h))``; the attention's scores are ``q k^T`` (no ``1/sqrt(d)``) plus
    the relative position bias, which every variant keeps."""
    cfg, skip_and_mlp = model.config, VARIANT_SWITCHES[name]
    skip, with_mlp = skip_and_mlp
    n = ids.shape[1]
    stream = [model.shared.weight[ids]]
    blocks = model.encoder.block
    shared_bias = position_bias(blocks[0].layer[0].SelfAttention, cfg, n)
    for blk in blocks:
        sa, ff = blk.layer[0], blk.layer[1]
        att = sa.SelfAttention
        bias = position_bias(att, cfg, n) if family in OWN_BIAS else shared_bias
        x = stream[-1]
        hx = rms(x, sa.layer_norm)
        q, k, v = (heads(lin(hx, m), cfg.d_kv) for m in (att.q, att.k, att.v))
        p = torch.softmax(q @ k.transpose(-1, -2) + bias, dim=-1)
        a = lin((p @ v).transpose(1, 2).reshape(x.shape[0], n, -1), att.o)
        h = x + a if skip else a
        if with_mlp:
            m = feed_forward(rms(h, ff.layer_norm), ff.DenseReluDense, cfg)
            h = h + m if skip else m
        stream.append(h)
    return stream


def bart_reference(model, ids, name, family="bart"):
    """_BART's encoder stack: ``sqrt(d) E[ids]`` plus the learned positions (counted from 2), LayerNorm, then
    post-norm blocks ``h = N1(x + Attn(x))``, ``y = N2(h + MLP(h))`` as variant ``name`` (both norms stay)."""
    cfg = model.config
    skip, with_mlp = VARIANT_SWITCHES[name]
    n = ids.shape[1]
    words = model.embed_tokens.weight[ids] * math.sqrt(cfg.d_model)
    stream = [ln(words + model.embed_positions.weight[torch.arange(n) + 2], model.layernorm_embedding)]
    dh = cfg.d_model // cfg.encoder_attention_heads
    for layer in model.layers:
        x, sa = stream[-1], layer.self_attn
        q, k, v = (heads(lin(x, m), dh) for m in (sa.q_proj, sa.k_proj, sa.v_proj))
        a = lin(attention(q, k, v, dh**-0.5), sa.out_proj)
        h = ln(x + a if skip else a, layer.self_attn_layer_norm)
        if with_mlp:
            m = lin(gelu_erf(lin(h, layer.fc1)), layer.fc2)
            h = ln(h + m if skip else m, layer.final_layer_norm)
        stream.append(h)
    return stream


#: the reference of each family
STACK_REFERENCES = {
    "t5": encoder_reference,
    "mt5": encoder_reference,
    "umt5": encoder_reference,
    "bart": bart_reference,
}


# --------------------------------------------------------------------------------------------------- text towers
TOWER_ARCH = {"hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 64,
        "vocab_size": 100}  # fmt: skip
#: per tower, written out here (Radford et al. 2021; Zhai et al. 2023): causal attention or not, the MLP's activation
TEXT_TOWERS = {
    "clip_text": {"causal": True, "act": lambda x: x * torch.sigmoid(1.702 * x)},  # quick GELU
    "siglip_text": {"causal": False, "act": gelu_tanh},
}


def tower_reference(model, family, ids, name):
    """The residual stream of variant ``name``, from the weights (the softmax in float32, as transformers computes
    it): ``x0 = E_tok[ids] + E_pos``; per block the
    attention branch ``a = Attn(LN1(x))``, ``h = x + a`` (skip) or ``a``; with the MLP ``m = MLP(LN2(h))``, the output
    ``h + m`` (skip) or ``m``."""
    skip, with_mlp = VARIANT_SWITCHES[name]
    emb = model.embeddings
    x = emb.token_embedding.weight[ids] + emb.position_embedding.weight[: ids.shape[1]]
    mask = causal_mask(ids.shape[1]) if TEXT_TOWERS[family]["causal"] else None
    act = TEXT_TOWERS[family]["act"]
    states = [x]
    for layer in model.encoder.layers:
        att = layer.self_attn
        d = att.head_dim
        z = ln(x, layer.layer_norm1)
        q, k, v = (heads(lin(z, p), d) for p in (att.q_proj, att.k_proj, att.v_proj))
        a = lin(attention(q, k, v, 1 / math.sqrt(d), mask=mask, softmax_dtype=F32), att.out_proj)
        h = x + a if skip else a
        if with_mlp:
            m = lin(act(lin(ln(h, layer.layer_norm2), layer.mlp.fc1)), layer.mlp.fc2)
            h = h + m if skip else m
        x = h
        states.append(x)
    return states


# ------------------------------------------------------------------------------------------------ image encoders
#: module names of each family's block, written out here (not read from the family table)
VISION_NAMES = {
    "vit": ("layernorm_before", "attention", "o_proj", "layernorm_after", None),
    "deit": ("layernorm_before", "attention", "o_proj", "layernorm_after", None),
    "dinov2": ("norm1", "attention", "o_proj", "norm2", ("layer_scale1", "layer_scale2")),
    "dinov2_with_registers": ("norm1", "attention", "o_proj", "norm2", ("layer_scale1", "layer_scale2")),
    "siglip": ("layer_norm1", "self_attn", "out_proj", "layer_norm2", None),
    "clip": ("layer_norm1", "self_attn", "out_proj", "layer_norm2", None),
}


#: families whose eager attention takes the softmax in float32 and casts it back (transformers' modelling files)
FLOAT32_SOFTMAX = {"vit", "deit", "siglip", "clip"}


def _vision_activation(name: str):
    """The MLP's activation, written out from its formula."""
    if name == "gelu":
        return lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    if name == "gelu_pytorch_tanh":
        return lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    if name == "quick_gelu":
        return lambda x: x * torch.sigmoid(1.702 * x)
    raise AssertionError(name)


def _vision_layer_norm(ln, x):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias


def _vision_attention(module, out_name, x, heads, float32_softmax):
    b, n, d = x.shape
    hd = d // heads

    def split(t):
        return t.reshape(b, n, heads, hd).transpose(1, 2)

    q, k, v = (split(x @ getattr(module, p).weight.T + getattr(module, p).bias) for p in ("q_proj", "k_proj", "v_proj"))
    scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
    att = torch.softmax(scores.float(), dim=-1).to(scores.dtype) if float32_softmax else torch.softmax(scores, dim=-1)
    out = (att @ v).transpose(1, 2).reshape(b, n, d)
    o = getattr(module, out_name)
    return out @ o.weight.T + o.bias


def vision_branches(family, layer, config):
    """The attention branch ``a(x)`` and MLP branch ``m(h)`` of one block, from its weights."""
    norm1, attn, out, norm2, scales = VISION_NAMES[family]
    act = _vision_activation(config.hidden_act)
    lam1, lam2 = (getattr(layer, s).lambda1 for s in scales) if scales else (1.0, 1.0)

    def a(x):
        return lam1 * _vision_attention(getattr(layer, attn), out, _vision_layer_norm(getattr(layer, norm1), x),
                                 config.num_attention_heads, family in FLOAT32_SOFTMAX)  # fmt: skip

    def m(h):
        z = _vision_layer_norm(getattr(layer, norm2), h)
        fc1, fc2 = layer.mlp.fc1, layer.mlp.fc2
        return lam2 * (act(z @ fc1.weight.T + fc1.bias) @ fc2.weight.T + fc2.bias)

    return a, m


def vision_reference(family, model, x0, name):
    """Every layer of a variant, recomputed from the weights: SAN ``a(x)``, SAN+MLP ``m(a(x))``, SAN+skip
    ``x + a(x)``, transformer ``h + m(h)`` with ``h = x + a(x)``."""
    states = [x0]
    for layer in vision_blocks(family, model):
        a, m = vision_branches(family, layer, model.config)
        x = states[-1]
        if name == "SAN":
            y = a(x)
        elif name == "SAN+MLP":
            y = m(a(x))
        elif name == "SAN+skip":
            y = x + a(x)
        else:
            h = x + a(x)
            y = h + m(h)
        states.append(y)
    return states


def vision_blocks(family, model):
    return {"vit": lambda: model.layers, "deit": lambda: model.layers, "dinov2": lambda: model.encoder.layer,
            "dinov2_with_registers": lambda: model.encoder.layer, "siglip": lambda: model.encoder.layers,
            "clip": lambda: model.encoder.layers}[family]()  # fmt: skip
