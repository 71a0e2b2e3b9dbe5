"""The variants of RoBERTa, MPNet, GPT-2, Llama and Gemma-3, checked against the residual stream recomputed from the
weights in plain torch (embeddings, positions, masks, attention and MLP; no transformers submodule's forward is
called by a reference).

Transformers computes a few things in float32 even in a float64 model (Llama's and Gemma-3's RMSNorm, their attention
softmax and the rotary angles); the references do the same, so that every family is compared at float64 tolerances.
"""

import math
from functools import partial

import pytest
import torch
import torch.nn.functional as F
from family_blocks import (
    F32,
    TOL,
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
)

from san.models.ablations import OVERRIDDEN, VARIANTS, variant, variant_switches
from san.models.families import FAMILIES
from san.rank_collapse.experiment import residual_stream

torch.set_num_threads(1)
N_TOKENS, BATCH = 7, 3

CONFIGS = {
    "roberta": dict(
        vocab_size=100, hidden_size=16, num_hidden_layers=3, num_attention_heads=4, intermediate_size=32,
        max_position_embeddings=32, hidden_act="gelu",
    ),
    "mpnet": dict(
        vocab_size=100, hidden_size=16, num_hidden_layers=3, num_attention_heads=4, intermediate_size=32,
        max_position_embeddings=32, hidden_act="gelu",
    ),
    "gpt2": dict(
        vocab_size=100, n_embd=16, n_layer=3, n_head=4, n_inner=32, n_positions=32, activation_function="gelu_new",
        bos_token_id=0, eos_token_id=0,
    ),
    # grouped key/value heads: 2 kv heads for 4 query heads
    "llama": dict(
        vocab_size=100, hidden_size=16, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=32, max_position_embeddings=32, hidden_act="silu",
    ),
    # hidden_size 16: the embedding scale sqrt(16) is exact in the float32 buffer transformers keeps it in;
    # head_dim and query_pre_attn_scalar differ, so the attention scaling is checked; the 4-token window is shorter
    # than the 7 tokens, so the sliding layers attend differently from the full one
    "gemma3": dict(
        vocab_size=100, hidden_size=16, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        intermediate_size=32, max_position_embeddings=32, query_pre_attn_scalar=6, sliding_window=4,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        hidden_activation="gelu_pytorch_tanh",
    ),
}  # fmt: skip
DECODERS = {"gpt2": "ln_f", "llama": "norm", "gemma3": "norm"}  # the final norm outside the blocks


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def ids():
    return torch.randint(5, 90, (BATCH, N_TOKENS), generator=torch.Generator().manual_seed(1))  # no padding token


def tiny(family):
    return perturbed_model(family, CONFIGS[family])


@pytest.fixture(scope="module")
def models():
    return {family: tiny(family) for family in CONFIGS}


def run(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)


# ------------------------------------------------------------------------------------------------ the variants
def post_norm_block(x, attn, norm1, mlp, norm2, name):
    """``h = N1(x + Attn(x))``, ``y = N2(h + MLP(h))`` and its variants (module docstring of the ablations)."""
    skip, with_mlp = variant_switches(name)
    a = attn(x)
    h = norm1(x + a if skip else a)
    if not with_mlp:
        return h
    m = mlp(h)
    return norm2(h + m if skip else m)


def pre_norm_block(x, norm1, attn, norm2, mlp, name, post_attn=identity, post_mlp=identity):
    """``h = x + Na(Attn(N1(x)))``, ``y = h + Nm(MLP(N2(h)))`` (Na, Nm: Gemma-3's sandwich norms, identities
    otherwise) and its variants."""
    skip, with_mlp = variant_switches(name)
    a = post_attn(attn(norm1(x)))
    h = x + a if skip else a
    if not with_mlp:
        return h
    m = post_mlp(mlp(norm2(h)))
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
    for block in model.h:

        def attn(h, block=block):
            q, k, v = (heads(t, dh) for t in conv1d(h, block.attn.c_attn).split(d, dim=-1))
            return conv1d(attention(q, k, v, dh**-0.5, mask=causal_mask(n)), block.attn.c_proj)

        def mlp(h, block=block):
            return conv1d(gelu_tanh(conv1d(h, block.mlp.c_fc)), block.mlp.c_proj)

        norm1 = partial(ln, mod=block.ln_1)
        norm2 = partial(ln, mod=block.ln_2)
        stream.append(pre_norm_block(stream[-1], norm1, attn, norm2, mlp, name))
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
        stream.append(pre_norm_block(stream[-1], norm1, attn, norm2, mlp, name))
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
        stream.append(pre_norm_block(stream[-1], n1, attn, n2, mlp, name, post_attn=na, post_mlp=nm))
    return stream


REFERENCES = {
    "roberta": roberta_reference,
    "mpnet": mpnet_reference,
    "gpt2": gpt2_reference,
    "llama": llama_reference,
    "gemma3": gemma3_reference,
}


# ------------------------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("family", list(REFERENCES))
def test_variant_matches_reference(models, ids, family, name):
    model = models[family]
    with variant(model, family, name):
        stream = residual_stream(model, family, ids)
    with torch.no_grad():
        expected = REFERENCES[family](model, ids, name)
    assert len(stream) == len(expected) == model.config.num_hidden_layers + 1
    for layer, (got, want) in enumerate(zip(stream, expected, strict=True)):
        torch.testing.assert_close(got, want, **TOL, msg=lambda m, layer=layer: f"{family} {name} layer {layer}: {m}")


@pytest.mark.parametrize("family", list(REFERENCES))
def test_references_distinguish_the_variants(models, ids, family):
    """The comparison above can tell the variants apart: their last layers all differ."""
    with torch.no_grad():
        last = {name: REFERENCES[family](models[family], ids, name)[-1] for name in VARIANTS}
    for i, a in enumerate(VARIANTS):
        for b in VARIANTS[i + 1 :]:
            assert (last[a] - last[b]).abs().max() > 1e-3, (a, b)


@pytest.mark.parametrize("family", list(REFERENCES))
def test_transformer_variant_is_the_unmodified_model(models, ids, family):
    """Encoders: every hidden state of transformers is the recorded stream. Decoders: all but the last, which
    transformers replaces by the output of the final norm; the stream is never normalised."""
    model = models[family]
    with variant(model, family, "transformer"):
        stream = residual_stream(model, family, ids)
    hidden = run(model, ids).hidden_states
    assert len(hidden) == len(stream) == model.config.num_hidden_layers + 1
    exact = {"rtol": 0, "atol": 0}
    if family in DECODERS:
        for got, want in zip(stream[:-1], hidden[:-1], strict=True):
            torch.testing.assert_close(got, want, **exact)
        with torch.no_grad():
            torch.testing.assert_close(getattr(model, DECODERS[family])(stream[-1]), hidden[-1], **exact)
        assert (stream[-1] - hidden[-1]).abs().max() > 1e-3
    else:
        for got, want in zip(stream, hidden, strict=True):
            torch.testing.assert_close(got, want, **exact)


@pytest.mark.parametrize("family", list(REFERENCES))
def test_leaving_a_variant_restores_the_model(models, ids, family):
    model = models[family]
    before, unmodified = run(model, ids).hidden_states, residual_stream(model, family, ids)
    for name in VARIANTS:
        with variant(model, family, name):
            ablated = residual_stream(model, family, ids)
        assert (ablated[-1] - unmodified[-1]).abs().max() > 1e-3 or name == "transformer"
        assert not [(m, a) for m in model.modules() for a in OVERRIDDEN if a in m.__dict__]
        after = run(model, ids).hidden_states
        for got, want in zip(after, before, strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("family", list(DECODERS))
def test_decoder_variants_stay_causal(models, ids, family, name):
    """Changing the last token leaves every earlier position of every layer unchanged."""
    model = models[family]
    changed = ids.clone()
    changed[:, -1] = 95 - ids[:, -1]  # another token
    with variant(model, family, name):
        a, b = residual_stream(model, family, ids), residual_stream(model, family, changed)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x[:, :-1], y[:, :-1], **TOL)
        assert (x[:, -1] - y[:, -1]).abs().max() > 0


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
        assert (row.pre_norm_parts is not None) == (row.ablation in ("gpt2", "pre_norm")), name
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
        "variants": list(VARIANTS), "dtype": {"SAN": "float32", "SAN+MLP": "float32"}, "batch_size": 1,
        "albert_no_mlp": "identity_linears",
    }  # fmt: skip
    ds = experiment.run("llama", folders, inputs, settings)
    assert len(loaded) == 4  # two weight sets x two dtypes
    assert list(ds["dtype"].values) == ["float32", "float32", "float64", "float64"]
