"""The encoder stacks of encoder-decoder models (T5, mT5, UMT5, BART), each on a tiny random float64 encoder whose
every parameter is perturbed (tests/family_blocks.py):

- every variant equals the residual stream recomputed from the weights in plain torch (the relative position
  buckets, RMSNorm, unscaled attention with the position bias and the MLPs written out here; SAN is the attention
  branch with its bias only, SAN+MLP attention then the MLP, no skips; SAN+skip attention with its residual;
  transformer the unmodified encoder; BART's post-norm block keeps both LayerNorms, as BERT's does);
- the residual identity holds in every block of the pre-norm stacks: input + attention branch + MLP branch is the
  block output, and the MLP reads the norm of the input plus the attention branch;
- the ``transformer`` variant is the encoder's hidden states; leaving a variant restores the model;
- a whole encoder-decoder checkpoint served by the local hub (tests/hub_server.py) is refused, naming its decoder,
  unless its source says ``stack: encoder``, and then the acquired encoder gives the hidden states of the whole
  checkpoint's own encoder.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from family_blocks import (
    F32,
    TOL,
    VARIANT_NAMES,
    VARIANT_SWITCHES,
    attention,
    gelu_erf,
    gelu_tanh,
    heads,
    lin,
    ln,
    perturbed_model,
)

from san.models.ablations import OVERRIDDEN, variant
from san.models.families import FAMILIES
from san.models.recognise import UnsupportedModel, recognise
from san.rank_collapse.experiment import residual_stream

from hub_repos import checkpoint_repo, tiny_checkpoint

torch.set_num_threads(1)
N_TOKENS, BATCH = 9, 2
#: 4 buckets each way, exact up to 2 tokens apart, then logarithmic up to 6: 9 tokens use every kind of bucket
_SIZES = dict(
    vocab_size=100, d_model=16, d_kv=4, d_ff=32, num_layers=3, num_heads=4, relative_attention_num_buckets=8,
    relative_attention_max_distance=6,
)  # fmt: skip
#: each case: (family, architecture): T5 with its ReLU MLP, mT5 and UMT5 with their gated-GELU MLPs
CASES = {
    "t5": ("t5", {**_SIZES, "feed_forward_proj": "relu"}),
    "mt5": ("mt5", {**_SIZES, "feed_forward_proj": "gated-gelu"}),
    "umt5": ("umt5", {**_SIZES, "feed_forward_proj": "gated-gelu"}),
}
#: the families whose every block has a position bias of its own (the others: the first block's, shared)
OWN_BIAS = {"umt5"}
#: BART's post-norm encoder stack, its embeddings scaled by ``sqrt(d_model)``
BART = dict(
    vocab_size=100, d_model=16, encoder_layers=3, encoder_attention_heads=4, encoder_ffn_dim=32, decoder_layers=1,
    decoder_attention_heads=4, decoder_ffn_dim=32, max_position_embeddings=32, scale_embedding=True,
    activation_function="gelu",
)  # fmt: skip
#: every case: the T5-like ones and BART's
ALL = {**CASES, "bart": ("bart", BART)}


@pytest.fixture(scope="module")
def ids():
    return torch.randint(5, 90, (BATCH, N_TOKENS), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def models():
    return {case: perturbed_model(family, config) for case, (family, config) in ALL.items()}


def run(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)


# ------------------------------------------------------------------------------------------------ the reference
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
    """BART's encoder stack: ``sqrt(d) E[ids]`` plus the learned positions (counted from 2), LayerNorm, then
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
REFERENCES = {"t5": encoder_reference, "mt5": encoder_reference, "umt5": encoder_reference, "bart": bart_reference}


def depth(model):
    return model.config.num_hidden_layers


# ------------------------------------------------------------------------------------------------ tests
def test_the_encoder_stack_families_are_rows_of_the_table():
    from san.models.spec import FAMILY_TABLE

    assert {family for family, _ in ALL.values()} == {n for n, row in FAMILY_TABLE.items() if row.stack_of}


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("case", list(ALL))
def test_variant_matches_reference(models, ids, case, name):
    model, family = models[case], ALL[case][0]
    with variant(model, family, name):
        stream = residual_stream(model, family, ids)
    with torch.no_grad():
        expected = REFERENCES[family](model, ids, name, family)
    assert len(stream) == len(expected) == depth(model) + 1
    for layer, (got, want) in enumerate(zip(stream, expected, strict=True)):
        torch.testing.assert_close(got, want, **TOL, msg=lambda m, layer=layer: f"{case} {name} layer {layer}: {m}")


@pytest.mark.parametrize("case", list(CASES))
def test_references_distinguish_the_variants_and_the_bias(models, ids, case):
    """The comparison above tells the variants apart, and the position bias matters: zeroing it changes the
    reference (so a variant that dropped it would fail)."""
    model, family = models[case], CASES[case][0]
    with torch.no_grad():
        last = {name: encoder_reference(model, ids, name, family)[-1] for name in VARIANT_NAMES}
        bart = {name: bart_reference(models["bart"], ids, name)[-1] for name in VARIANT_NAMES}
        for i, a in enumerate(VARIANT_NAMES):
            for b in VARIANT_NAMES[i + 1 :]:
                assert (bart[a] - bart[b]).abs().max() > 1e-3, ("bart", a, b)
        for i, a in enumerate(VARIANT_NAMES):
            for b in VARIANT_NAMES[i + 1 :]:
                assert (last[a] - last[b]).abs().max() > 1e-3, (a, b)
        biases = [blk.layer[0].SelfAttention.relative_attention_bias.weight for blk in model.encoder.block
                  if blk.layer[0].SelfAttention.has_relative_attention_bias]  # fmt: skip
        saved = [w.clone() for w in biases]
        for w in biases:
            w.zero_()
        try:
            without = encoder_reference(model, ids, "SAN", family)[-1]
        finally:
            for w, s in zip(biases, saved, strict=True):
                w.copy_(s)
    assert (without - last["SAN"]).abs().max() > 1e-3


@pytest.mark.parametrize("case", list(CASES))
def test_residual_identity_in_every_block(models, ids, case):
    """Unmodified encoder, every block: output = input + attention branch (the self-attention's output) + MLP
    branch (the MLP's output), and the MLP reads the RMSNorm of input plus attention branch."""
    model = models[case]
    seen = {}

    def keep(key):
        def hook(module, args, kwargs, out):
            seen[key] = out[0] if isinstance(out, tuple) else out
            if key == "block":
                seen["x"] = args[0] if args else kwargs["hidden_states"]

        return hook

    def keep_input(module, args):
        seen["mlp_in"] = args[0]

    for i, blk in enumerate(model.encoder.block):
        hooks = [
            blk.register_forward_hook(keep("block"), with_kwargs=True),
            blk.layer[0].SelfAttention.register_forward_hook(keep("a"), with_kwargs=True),
            blk.layer[1].DenseReluDense.register_forward_hook(keep("m"), with_kwargs=True),
            blk.layer[1].DenseReluDense.register_forward_pre_hook(keep_input),
        ]
        try:
            run(model, ids)
        finally:
            for h in hooks:
                h.remove()
        x, a, m, y = seen["x"], seen["a"], seen["m"], seen["block"]
        torch.testing.assert_close(y, x + a + m, **TOL, msg=lambda s, i=i: f"{case} block {i}: {s}")
        with torch.no_grad():
            want = rms(x + a, blk.layer[1].layer_norm)
        torch.testing.assert_close(seen["mlp_in"], want, **TOL, msg=lambda s, i=i: f"{case} block {i} MLP input: {s}")


@pytest.mark.parametrize("case", list(CASES))
def test_transformer_variant_is_the_unmodified_encoder(models, ids, case):
    """Every hidden state of transformers but the last is the recorded stream; the last is the final RMSNorm of the
    stream's last, which the stream never applies."""
    model, family = models[case], CASES[case][0]
    with variant(model, family, "transformer"):
        stream = residual_stream(model, family, ids)
    hidden = run(model, ids).hidden_states
    assert len(hidden) == len(stream) == model.config.num_layers + 1
    for got, want in zip(stream[:-1], hidden[:-1], strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(model.encoder.final_layer_norm(stream[-1]), hidden[-1], rtol=0, atol=0)
    assert (stream[-1] - hidden[-1]).abs().max() > 1e-3


def test_the_bart_transformer_variant_is_the_unmodified_encoder(models, ids):
    """BART's encoder has no final norm: every hidden state of transformers is the recorded stream."""
    model = models["bart"]
    with variant(model, "bart", "transformer"):
        stream = residual_stream(model, "bart", ids)
    hidden = run(model, ids).hidden_states
    assert len(hidden) == len(stream) == depth(model) + 1
    for got, want in zip(stream, hidden, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("case", list(ALL))
def test_leaving_a_variant_restores_the_model(models, ids, case):
    model, family = models[case], ALL[case][0]
    before = run(model, ids).hidden_states
    for name in VARIANT_NAMES:
        with variant(model, family, name):
            residual_stream(model, family, ids)
        assert not [(m, a) for m in model.modules() for a in OVERRIDDEN if a in m.__dict__]
        for got, want in zip(run(model, ids).hidden_states, before, strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)


# ------------------------------------------------------------------------------------------------ recognition
@pytest.mark.parametrize("family", [family for family, _ in ALL.values()])
def test_a_whole_encoder_decoder_config_is_refused_naming_its_decoder(family):
    whole = f"{FAMILIES[family].row.config_class.removesuffix('Config')}ForConditionalGeneration"
    config = {"architectures": [whole], "model_type": family, "is_encoder_decoder": True}
    with pytest.raises(UnsupportedModel, match=rf"decoder \(cross-attention.*family '{family}'.*'stack: encoder'"):
        recognise(config, "model m")
    encoder = {**config, "architectures": [FAMILIES[family].row.model_class]}
    assert recognise(encoder, "model m").family == family


def test_an_encoder_decoder_of_no_encoder_family_is_refused_without_a_hint():
    config = {"architectures": ["MarianMTModel"], "model_type": "marian", "is_encoder_decoder": True}
    with pytest.raises(UnsupportedModel, match="decoder") as err:
        recognise(config, "model m")
    assert "stack: encoder" not in str(err.value)


# ------------------------------------------------------------------------------------------------ the local hub
#: tiny whole checkpoints under the names of the families' reference checkpoints (docs/models.md)
REPOS = {
    "google-t5/t5-small": "t5",
    "google/mt5-small": "mt5",
    "google/umt5-small": "umt5",
    "facebook/bart-base": "bart",
}


def _whole_checkpoint(family, folder):
    import transformers

    row = FAMILIES[family].row
    config = FAMILIES[family].config_cls(**ALL[family][1])
    whole = getattr(transformers, row.stack_of[0])
    return tiny_checkpoint(config, folder, seed=0, model_class=whole), whole


@pytest.mark.parametrize("repo_id", list(REPOS))
def test_the_encoder_stack_of_a_whole_checkpoint_from_a_hub_id(repo_id, hub, tmp_path):
    """``stack: encoder``: the encoder of a ``<...>ForConditionalGeneration`` checkpoint, taken out at acquisition,
    is recognised as its family; its unmodified variant gives the whole checkpoint's own encoder's hidden states
    (transformers, the whole checkpoint loaded) and every variant its recomputation from the weights."""
    from san.models.acquire import load_model, materialise, read_manifest

    family = REPOS[repo_id]
    built, whole = _whole_checkpoint(family, tmp_path / "built")
    hub.add(checkpoint_repo(repo_id, built))
    out = tmp_path / "pretrained"
    materialise("m", None, "pretrained", {"source": "hub", "repo_id": repo_id, "stack": "encoder"}, out)
    manifest = read_manifest(out)
    assert manifest["family"] == family and manifest["repo_id"] == repo_id
    assert manifest["encoder_stack_of"]["architecture"] == [whole.__name__]
    assert manifest["encoder_stack_of"]["left_out"] > 0  # the decoder and the LM head
    model = load_model(out, family, torch.float64)
    ids = torch.randint(5, 90, (BATCH, N_TOKENS), generator=torch.Generator().manual_seed(4))
    with variant(model, family, "transformer"):
        states = residual_stream(model, family, ids)
    reference = whole.from_pretrained(built, dtype=torch.float64, attn_implementation="eager").eval()
    with torch.no_grad():
        want = reference.get_encoder()(input_ids=ids, output_hidden_states=True).hidden_states
    assert len(states) == len(want) == depth(model) + 1
    for s, w in zip(states[:-1], want[:-1], strict=True):
        torch.testing.assert_close(s, w, rtol=1e-12, atol=1e-12)
    for name in VARIANT_NAMES:
        with variant(model, family, name):
            got = residual_stream(model, family, ids)
        with torch.no_grad():
            expected = REFERENCES[family](model, ids, name, family)
        for g, w in zip(got, expected, strict=True):
            torch.testing.assert_close(g, w, **TOL)


def test_a_whole_checkpoint_without_stack_is_refused_and_leaves_nothing(hub, tmp_path):
    from san.models.acquire import materialise

    built, _ = _whole_checkpoint("t5", tmp_path / "built")
    hub.add(checkpoint_repo("tiny-org/t5-whole", built))
    with pytest.raises(UnsupportedModel, match="decoder.*'stack: encoder'"):
        materialise("m", None, "pretrained", {"source": "hub", "repo_id": "tiny-org/t5-whole"}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_encoder_stack_of_a_single_stack_checkpoint_is_refused(hub, tmp_path):
    from san.models.acquire import materialise, materialise_init
    from san.models.folders import AcquisitionError

    built = tmp_path / "built"
    materialise_init("roberta", {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                                 "intermediate_size": 32}, 0, built)  # fmt: skip
    (built / "manifest.json").unlink()
    hub.add(checkpoint_repo("tiny-org/roberta-single", built))
    source = {"source": "hub", "repo_id": "tiny-org/roberta-single", "stack": "encoder"}
    with pytest.raises(AcquisitionError, match="encoder stack is taken from an encoder-decoder checkpoint"):
        materialise("m", None, "pretrained", source, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("family", [family for family, _ in ALL.values()])
def test_an_init_of_an_encoder_stack_is_recognised_and_loads(family, tmp_path):
    """A random initialisation of an explicit architecture is saved as the encoder-only class (its config still says
    ``is_encoder_decoder``, as transformers writes it) and recognised as its family; it loads, and its attention
    matrices have one per block and head; the memory estimate reads the encoder's shape."""
    from san.core.memory import model_size
    from san.models.acquire import load_model, materialise_init
    from san.rank_collapse.experiment import attention_matrices

    arch = {k: v for k, v in ALL[family][1].items() if k != "vocab_size"}
    manifest = materialise_init(family, arch, 0, tmp_path / "init")
    assert manifest["family"] == family
    assert manifest["recognition"]["architecture"] == FAMILIES[family].row.model_class
    model = load_model(tmp_path / "init", family, torch.float64)
    matrices = attention_matrices(model, torch.randint(5, 90, (BATCH, N_TOKENS)), BATCH)
    assert tuple(matrices.shape) == (depth(model), BATCH, 4, N_TOKENS, N_TOKENS)
    size = model_size(tmp_path / "init")  # what the job's memory estimate reads from config.json
    assert (size.width, size.layers, size.heads, size.mlp) == (16, 3, 4, 32)


@pytest.mark.parametrize(("stack", "ok"), [("encoder", True), ("decoder", False)])
def test_the_config_asks_for_the_encoder_stack_by_name(default_config, stack, ok):
    """``stack: encoder`` is a key of a hub source; any other stack (the decoder) is refused naming the key, before
    any job."""
    import copy

    from san.core.config import ConfigError
    from san.experiments import check_config

    from helpers import ROOT

    cfg = copy.deepcopy(default_config)
    source = {"source": "hub", "repo_id": "google-t5/t5-small", "revision": "main", "stack": stack}
    cfg["models"]["t5-small"] = {"pretrained": source}
    schema = ROOT / "workflow" / "schemas"
    if ok:
        check_config(cfg, schema)
        return
    with pytest.raises(ConfigError, match=r"models.t5-small.pretrained"):
        check_config(cfg, schema)


def test_heads_of_their_own_width_need_no_divisible_width(ids):
    """T5's heads project to ``num_heads x d_kv``, whatever ``d_model``: 3 heads of width 4 in a width of 16 pass the
    config check (which refuses them in a family whose heads split the width) and every variant is its reference."""
    from san.core.config import ConfigError
    from san.models.spec import check_architecture

    arch = {**CASES["t5"][1], "num_heads": 3}
    check_architecture("m", "t5", {k: v for k, v in arch.items() if k != "vocab_size"})
    with pytest.raises(ConfigError, match="hidden_size 16 is not divisible by num_attention_heads 3"):
        check_architecture("m", "roberta", {"hidden_size": 16, "num_attention_heads": 3})
    model = perturbed_model("t5", arch)
    for name in VARIANT_NAMES:
        with variant(model, "t5", name):
            stream = residual_stream(model, "t5", ids)
        with torch.no_grad():
            expected = encoder_reference(model, ids, name, "t5")
        for got, want in zip(stream, expected, strict=True):
            torch.testing.assert_close(got, want, **TOL)


def test_an_encoder_only_checkpoint_is_recognised_with_or_without_stack(hub, tmp_path):
    """A checkpoint saved as the encoder-only class (``T5EncoderModel``, as image-generation pipelines ship their
    text encoder) is its encoder stack already: recognised as it is, and ``stack: encoder`` keeps every tensor."""
    import transformers

    from san.models.acquire import materialise, read_manifest

    config = FAMILIES["t5"].config_cls(**CASES["t5"][1])
    built = tiny_checkpoint(config, tmp_path / "built", model_class=transformers.T5EncoderModel)
    hub.add(checkpoint_repo("tiny-org/t5-encoder", built))
    plain, stacked = tmp_path / "plain", tmp_path / "stacked"
    materialise("m", None, "pretrained", {"source": "hub", "repo_id": "tiny-org/t5-encoder"}, plain)
    source = {"source": "hub", "repo_id": "tiny-org/t5-encoder", "stack": "encoder"}
    materialise("m", None, "pretrained", source, stacked)
    assert read_manifest(plain)["family"] == read_manifest(stacked)["family"] == "t5"
    assert "encoder_stack_of" not in read_manifest(plain)
    assert read_manifest(stacked)["encoder_stack_of"]["left_out"] == 0
