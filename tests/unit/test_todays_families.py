"""The families of today's models (Qwen2, Qwen3, Mistral, Phi-3, Gemma-2, OLMo-2, GPT-NeoX, Phi, Granite,
ModernBERT), each on a tiny random float64 model built from its transformers config class:

- the residual identity holds in every block of the unmodified model: block input + attention branch + MLP branch
  (each times the family's branch multiplier) is the block output, and the MLP reads the block input (parallel
  blocks) or the input plus the attention branch (sequential blocks), as the config says;
- every variant equals the residual stream recomputed from the weights in plain torch (no transformers submodule's
  forward is called by a reference), with each family's masks (sliding windows, local layers) built from its config;
- the ``transformer`` variant is the unmodified model's residual stream.

Transformers computes a few things in float32 even in a float64 model (RMSNorm, the attention softmax, the rotary
angles, ModernBERT's rotation); the references do the same (see tests/unit/test_families.py).
"""

from functools import partial

import pytest
import torch
import torch.nn.functional as F
from family_blocks import (
    F32,
    TOL,
    attention,
    causal_mask,
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
)

from san.models.ablations import OVERRIDDEN, VARIANTS, variant, variant_switches
from san.models.families import FAMILIES
from san.rank_collapse.experiment import residual_stream

torch.set_num_threads(1)
N_TOKENS, BATCH = 7, 3

_SIZES = dict(
    vocab_size=100, hidden_size=16, intermediate_size=32, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
)  # fmt: skip
_NO_KV = {k: v for k, v in _SIZES.items() if k != "num_key_value_heads"}
#: each case: (family, architecture). Windows of 4 tokens (ModernBERT: 2 on either side) are shorter than the 7
#: tokens, so windowed and global layers attend differently; biases, q/k norms and multipliers are switched on where
#: the family has them
CASES = {
    "qwen2": ("qwen2", dict(**_SIZES, use_sliding_window=True, sliding_window=4, max_window_layers=1)),
    "qwen3": ("qwen3", dict(**_SIZES, head_dim=8, use_sliding_window=True, sliding_window=4, max_window_layers=2)),
    "mistral": ("mistral", dict(**_SIZES, sliding_window=4)),
    "phi3": ("phi3", dict(**_SIZES, original_max_position_embeddings=32, sliding_window=4)),
    "gemma2": (
        "gemma2",
        dict(
            **_SIZES, head_dim=8, query_pre_attn_scalar=6, sliding_window=4, attn_logit_softcapping=2.0,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            hidden_activation="gelu_pytorch_tanh",
        ),
    ),
    "olmo2": ("olmo2", dict(**_SIZES)),
    "gpt_neox": ("gpt_neox", dict(**_NO_KV, rotary_pct=0.5, use_parallel_residual=True)),
    "gpt_neox_sequential": ("gpt_neox", dict(**_NO_KV, rotary_pct=0.5, use_parallel_residual=False)),
    "phi": ("phi", dict(**_SIZES, partial_rotary_factor=0.5)),
    "granite": (
        "granite",
        dict(**_SIZES, residual_multiplier=0.5, embedding_multiplier=3.0, attention_multiplier=0.2),
    ),
    "modernbert": (
        "modernbert",
        dict(**_NO_KV, global_attn_every_n_layers=2, local_attention=4, cls_token_id=3, sep_token_id=4),
    ),
}  # fmt: skip
#: the other families whose norms sit inside their branches (their variants: tests/unit/test_families.py), for the
#: residual identity
EARLIER = {
    "gpt2": ("gpt2", dict(vocab_size=100, n_embd=16, n_layer=3, n_head=4, n_inner=32, n_positions=32, bos_token_id=0)),
    "llama": ("llama", dict(**_SIZES)),
    "gemma3": (
        "gemma3",
        dict(
            **_SIZES,
            head_dim=8,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        ),
    ),
}
#: the scalar each family multiplies its branches by, as the config key that holds it (Granite)
MULTIPLIER = {"granite": "residual_multiplier"}


@pytest.fixture(scope="module")
def ids():
    return torch.randint(5, 90, (BATCH, N_TOKENS), generator=torch.Generator().manual_seed(1))  # no special tokens


@pytest.fixture(scope="module")
def models():
    return {case: perturbed_model(family, config) for case, (family, config) in {**CASES, **EARLIER}.items()}


def run(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)


# ------------------------------------------------------------------------------------------------ the variants
def block(x, name, attn, mlp, n1=identity, n2=identity, na=identity, nm=identity, scale=1.0, parallel=False):
    """One block and its variants as docs/models.md defines them: ``h = x + s Na(Attn(N1(x)))``,
    ``y = h + s Nm(MLP(N2(h)))`` (sequential) or ``y = x + s Na(Attn(N1(x))) + s Nm(MLP(N2(x)))`` (parallel, the
    unmodified transformer only); every no-skip variant with the MLP feeds the attention output to the MLP."""
    skip, with_mlp = variant_switches(name)
    a = scale * na(attn(n1(x)))
    if parallel and skip and with_mlp:
        return x + a + scale * nm(mlp(n2(x)))
    h = x + a if skip else a
    if not with_mlp:
        return h
    m = scale * nm(mlp(n2(h)))
    return h + m if skip else m


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


REFERENCES = {
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
}


def family_of(case):
    return {**CASES, **EARLIER}[case][0]


# ------------------------------------------------------------------------------------------------ tests
def test_every_family_of_todays_models_is_in_the_table():
    from san.models.spec import FAMILIES as TABLE

    assert set(REFERENCES) <= set(TABLE) and len(TABLE) >= 18
    assert {family_of(case) for case in CASES} == set(REFERENCES)


@pytest.mark.parametrize("case", [*CASES, *EARLIER])
def test_residual_identity_in_every_block(models, ids, case):
    """Unmodified model, every block: output = input + s attention branch + s MLP branch (``s``: the config's branch
    multiplier, 1 without one), each branch taken at the module that ends it (the norm after the sub-block where
    there is one); the MLP's input is the norm of the block input (parallel blocks) or of the input plus the
    attention branch (sequential blocks), as the config says."""
    model, family = models[case], family_of(case)
    entry = FAMILIES[family]
    norm_a, attn, post_a, norm_m, mlp, post_m = entry.row.pre_norm_parts
    scale = float(getattr(model.config, MULTIPLIER[family])) if family in MULTIPLIER else 1.0
    parallel = family == "phi" or (family == "gpt_neox" and model.config.use_parallel_residual)
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


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("case", list(CASES))
def test_variant_matches_reference(models, ids, case, name):
    model, family = models[case], family_of(case)
    with variant(model, family, name):
        stream = residual_stream(model, family, ids)
    with torch.no_grad():
        expected = REFERENCES[family](model, ids, name)
    assert len(stream) == len(expected) == model.config.num_hidden_layers + 1
    for layer, (got, want) in enumerate(zip(stream, expected, strict=True)):
        torch.testing.assert_close(got, want, **TOL, msg=lambda m, layer=layer: f"{case} {name} layer {layer}: {m}")


@pytest.mark.parametrize("case", list(CASES))
def test_references_distinguish_the_variants(models, ids, case):
    """The comparison above can tell the variants apart (their last layers all differ), and the references depend
    on the structure the config gives: windows, parallel blocks and multipliers change the unmodified stream."""
    model, family = models[case], family_of(case)
    with torch.no_grad():
        last = {name: REFERENCES[family](model, ids, name)[-1] for name in VARIANTS}
    for i, a in enumerate(VARIANTS):
        for b in VARIANTS[i + 1 :]:
            assert (last[a] - last[b]).abs().max() > 1e-3, (a, b)


def test_structure_read_from_the_config_changes_the_stream(models, ids):
    """A parallel and a sequential GPT-NeoX with the same weights differ only in the unmodified transformer; the
    windows of the sliding and local layers change what they attend to."""
    parallel, sequential = models["gpt_neox"], models["gpt_neox_sequential"]
    for name in VARIANTS:
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
    """Every hidden state of transformers is the recorded stream, but the last, which transformers replaces by the
    output of the final norm; the stream is never normalised."""
    model, family = models[case], family_of(case)
    with variant(model, family, "transformer"):
        stream = residual_stream(model, family, ids)
    hidden = run(model, ids).hidden_states
    assert len(hidden) == len(stream) == model.config.num_hidden_layers + 1
    exact = {"rtol": 0, "atol": 0}
    for got, want in zip(stream[:-1], hidden[:-1], strict=True):
        torch.testing.assert_close(got, want, **exact)
    with torch.no_grad():
        torch.testing.assert_close(getattr(model, FAMILIES[family].final_norm)(stream[-1]), hidden[-1], **exact)
    assert (stream[-1] - hidden[-1]).abs().max() > 1e-3


@pytest.mark.parametrize("case", list(CASES))
def test_leaving_a_variant_restores_the_model(models, ids, case):
    model, family = models[case], family_of(case)
    before = run(model, ids).hidden_states
    for name in VARIANTS:
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
