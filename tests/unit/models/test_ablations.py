"""Every ablation of the paper's encoders (BERT, ALBERT, XLNet) is checked against an independent recomputation of
the layer from its weights, with the variants written out in tests/family_blocks.py (``VARIANT_SWITCHES``)."""

import math

import pytest
import torch
import torch.nn.functional as F
from family_blocks import VARIANT_NAMES as VARIANTS
from family_blocks import VARIANT_SWITCHES
from transformers import AlbertConfig, AlbertModel, BertConfig, BertModel, XLNetConfig, XLNetModel
from transformers.models.xlnet.modeling_xlnet import XLNetRelativeAttention

from san.models.ablations import apply_variant, restore, variant
from san.rank_collapse.experiment import layer_residuals, residual_stream
from san.rank_collapse.spec import METRICS

torch.set_num_threads(1)
N_TOKENS, BATCH = 7, 3


def ln(x, mod):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + mod.eps) * mod.weight + mod.bias


def lin(x, mod):
    return x @ mod.weight.T + mod.bias


def mha(x, q, k, v, n_heads):
    b, n, d = x.shape
    dh = d // n_heads

    def heads(t):
        return t.view(b, n, n_heads, dh).transpose(1, 2)

    qh, kh, vh = heads(lin(x, q)), heads(lin(x, k)), heads(lin(x, v))
    p = torch.softmax(qh @ kh.transpose(-1, -2) / math.sqrt(dh), dim=-1)
    return (p @ vh).transpose(1, 2).reshape(b, n, d)


def run(model, ids):
    kwargs = {"use_mems": False} if isinstance(model, XLNetModel) else {}
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True, **kwargs)


@pytest.fixture(scope="module")
def ids():
    return torch.randint(5, 90, (BATCH, N_TOKENS), generator=torch.Generator().manual_seed(1))


def tiny(model_cls, config):
    torch.manual_seed(0)
    return model_cls(config).double().eval()


# ------------------------------------------------------------------------------------------------ BERT
def bert_layer_reference(layer, x, variant_name):
    skip, mlp = VARIANT_SWITCHES[variant_name]
    att = layer.attention
    o = lin(mha(x, att.self.query, att.self.key, att.self.value, att.self.num_attention_heads), att.output.dense)
    y = ln(o + x if skip else o, att.output.LayerNorm)
    if not mlp:
        return y
    m = lin(F.gelu(lin(y, layer.intermediate.dense)), layer.output.dense)
    return ln(m + y if skip else m, layer.output.LayerNorm)


@pytest.fixture(scope="module")
def bert():
    cfg = BertConfig(
        vocab_size=100,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=32,
        hidden_act="gelu",
        attn_implementation="eager",
    )
    return tiny(BertModel, cfg)


@pytest.mark.parametrize("name", VARIANTS)
def test_bert_variant_matches_reference(bert, ids, name):
    with variant(bert, "bert", name):
        hs = run(bert, ids).hidden_states
    assert len(hs) == 4
    for i, layer in enumerate(bert.encoder.layer):
        expected = bert_layer_reference(layer, hs[i], name)
        torch.testing.assert_close(hs[i + 1], expected, rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------------------------------------ ALBERT
def albert_layer_reference(layer, x, variant_name, no_mlp):
    skip, mlp = VARIANT_SWITCHES[variant_name]
    att = layer.attention
    o = lin(mha(x, att.query, att.key, att.value, att.num_attention_heads), att.dense)
    y = ln(o + x if skip else o, att.LayerNorm)
    act = lambda t: F.gelu(t, approximate="tanh")  # noqa: E731 - gelu_new
    if not mlp:
        return ln(act(y) + y, layer.full_layer_layer_norm) if no_mlp == "identity_linears" else y
    f = lin(act(lin(y, layer.ffn)), layer.ffn_output)
    return ln(f + y if skip else f, layer.full_layer_layer_norm)


@pytest.fixture(scope="module")
def albert():
    cfg = AlbertConfig(
        vocab_size=100,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=32,
        hidden_act="gelu_new",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="eager",
    )
    return tiny(AlbertModel, cfg)


@pytest.mark.parametrize("no_mlp", ["identity_linears", "remove"])
@pytest.mark.parametrize("name", VARIANTS)
def test_albert_variant_matches_reference(albert, ids, name, no_mlp):
    with variant(albert, "albert", name, albert_no_mlp=no_mlp):
        hs = run(albert, ids).hidden_states
    assert len(hs) == 4
    layer = albert.encoder.albert_layer_groups[0].albert_layers[0]  # shared by all layers
    for i in range(3):
        torch.testing.assert_close(
            hs[i + 1], albert_layer_reference(layer, hs[i], name, no_mlp), rtol=1e-10, atol=1e-10
        )


# ------------------------------------------------------------------------------------------------ XLNet
@pytest.fixture(scope="module")
def xlnet():
    cfg = XLNetConfig(vocab_size=100, d_model=16, n_layer=3, n_head=4, d_inner=32, ff_activation="gelu")
    return tiny(XLNetModel, cfg)


@pytest.mark.parametrize("name", VARIANTS)
def test_xlnet_variant_matches_reference(xlnet, ids, name, monkeypatch):
    seen = []
    original = XLNetRelativeAttention.post_attention

    def recording(self, h, attn_vec, residual=True):
        seen.append((h, attn_vec))
        return original(self, h, attn_vec, residual)

    monkeypatch.setattr(XLNetRelativeAttention, "post_attention", recording)
    with variant(xlnet, "xlnet", name):
        hs = run(xlnet, ids).hidden_states
    skip, mlp = VARIANT_SWITCHES[name]
    assert len(seen) == 3 and len(hs) == 4
    for i, layer in enumerate(xlnet.layer):
        h, attn_vec = seen[i]  # (tokens, batch, ...): XLNet's internal layout
        torch.testing.assert_close(h.permute(1, 0, 2), hs[i])
        o = torch.einsum("ibnd,hnd->ibh", attn_vec, layer.rel_attn.o)
        y = ln(o + h if skip else o, layer.rel_attn.layer_norm)
        if mlp:
            f = lin(F.gelu(lin(y, layer.ff.layer_1)), layer.ff.layer_2)
            y = ln(f + y if skip else f, layer.ff.layer_norm)
        torch.testing.assert_close(hs[i + 1], y.permute(1, 0, 2), rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------------------------------------ generic
def test_restore_returns_the_unmodified_model(bert, ids):
    before = run(bert, ids).last_hidden_state
    apply_variant(bert, "bert", "SAN")
    ablated = run(bert, ids).last_hidden_state
    restore(bert)
    after = run(bert, ids).last_hidden_state
    assert not torch.allclose(before, ablated)
    torch.testing.assert_close(before, after, rtol=0, atol=0)


def test_san_collapses_and_skip_does_not(bert, ids):
    with variant(bert, "bert", "SAN"):
        san = layer_residuals(bert, "bert", ids, batch_size=2)
    with variant(bert, "bert", "SAN+skip"):
        skip = layer_residuals(bert, "bert", ids, batch_size=2)
    assert san.shape == (len(METRICS), 4, BATCH)
    for m in range(len(METRICS)):
        assert san[m, -1].max() < 1e-3 * san[m, 0].min()
        assert skip[m, -1].min() > 0.1 * skip[m, 0].max()


@pytest.mark.parametrize("family", ["bert", "albert", "xlnet"])
@pytest.mark.parametrize("name", VARIANTS)
def test_the_hooked_stream_is_the_encoders_hidden_states(request, ids, family, name):
    """For the post-norm encoders the residual stream recorded by hooks on the blocks (ALBERT: one shared group,
    run once per layer) is exactly transformers' ``hidden_states``, so the paper's models keep their numbers."""
    model = request.getfixturevalue(family)
    with variant(model, family, name):
        hooked = residual_stream(model, family, ids)
        states = run(model, ids).hidden_states
    assert len(hooked) == len(states) == model.config.num_hidden_layers + 1
    for h, s in zip(hooked, states, strict=True):
        torch.testing.assert_close(h, s, rtol=0, atol=0)


def test_unknown_variant_and_family_are_rejected(bert):
    with pytest.raises(ValueError, match="unknown variant"):
        apply_variant(bert, "bert", "SAN+LN")
    with pytest.raises(ValueError, match="unknown family"):
        apply_variant(bert, "not_a_family", "SAN")
