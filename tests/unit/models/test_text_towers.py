"""The text towers of the dual text-image checkpoints (CLIP, SigLIP) as text families, on tiny random float64 models
built from their config classes with every parameter perturbed (tests/family_blocks.py): the residual identity of
every block, every variant recomputed here from the weights in plain torch (token and position embeddings, layer
norm, multi-head attention with CLIP's causal mask, the MLP with each tower's activation written out), the
unmodified variant equal to transformers' hidden states, CLIP's tower causal and SigLIP's bidirectional in every
variant, the position limit of the config check, and a dual checkpoint analysed through its text tower from a hub id
alone (the local hub, tests/hub_server.py)."""

import math

import pytest
import torch
from family_blocks import (
    F32,
    TOL,
    VARIANT_NAMES,
    VARIANT_SWITCHES,
    attention,
    causal_mask,
    gelu_tanh,
    heads,
    lin,
    ln,
    perturbed_model,
)

from san.core.config import ConfigError
from san.models.ablations import variant
from san.models.spec import check_models
from san.rank_collapse.experiment import residual_stream

ARCH = {"hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 64,
        "vocab_size": 100}  # fmt: skip
#: per tower, written out here (Radford et al. 2021; Zhai et al. 2023): causal attention or not, the MLP's activation
TOWERS = {
    "clip_text": {"causal": True, "act": lambda x: x * torch.sigmoid(1.702 * x)},  # quick GELU
    "siglip_text": {"causal": False, "act": gelu_tanh},
}
BATCH, N_TOKENS = 2, 7


@pytest.fixture(scope="module")
def models():
    return {family: perturbed_model(family, dict(ARCH)) for family in TOWERS}


@pytest.fixture(scope="module")
def ids():
    return torch.randint(5, 90, (BATCH, N_TOKENS), generator=torch.Generator().manual_seed(1))


def run(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, output_hidden_states=True)


def reference(model, family, ids, name):
    """The residual stream of variant ``name``, from the weights (the softmax in float32, as transformers computes
    it): ``x0 = E_tok[ids] + E_pos``; per block the
    attention branch ``a = Attn(LN1(x))``, ``h = x + a`` (skip) or ``a``; with the MLP ``m = MLP(LN2(h))``, the output
    ``h + m`` (skip) or ``m``."""
    skip, with_mlp = VARIANT_SWITCHES[name]
    emb = model.embeddings
    x = emb.token_embedding.weight[ids] + emb.position_embedding.weight[: ids.shape[1]]
    mask = causal_mask(ids.shape[1]) if TOWERS[family]["causal"] else None
    act = TOWERS[family]["act"]
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


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("family", list(TOWERS))
def test_variant_matches_reference(models, ids, family, name):
    model = models[family]
    with variant(model, family, name):
        stream = residual_stream(model, family, ids)
    with torch.no_grad():
        want = reference(model, family, ids, name)
    assert len(stream) == len(want) == ARCH["num_hidden_layers"] + 1
    for layer, (g, w) in enumerate(zip(stream, want, strict=True)):
        torch.testing.assert_close(g, w, **TOL, msg=lambda m, layer=layer: f"{family} {name} layer {layer}: {m}")


@pytest.mark.parametrize("family", list(TOWERS))
def test_references_distinguish_the_variants(models, ids, family):
    with torch.no_grad():
        last = {name: reference(models[family], family, ids, name)[-1] for name in VARIANT_NAMES}
    for i, a in enumerate(VARIANT_NAMES):
        for b in VARIANT_NAMES[i + 1 :]:
            assert (last[a] - last[b]).abs().max() > 1e-3, (a, b)


@pytest.mark.parametrize("family", list(TOWERS))
def test_residual_identity_in_every_block(models, ids, family):
    """Unmodified model, every block: output = input + attention branch (``self_attn``'s output) + MLP branch
    (``mlp``'s output), and the MLP reads ``layer_norm2`` of the input plus the attention branch."""
    model = models[family]
    seen = {}
    for i, layer in enumerate(model.encoder.layers):
        seen.clear()

        def block_hook(module, args, kwargs, out):
            seen["x"], seen["y"] = (args[0] if args else kwargs["hidden_states"]), out

        def attn_hook(module, args, kwargs, out):
            seen["a"] = out[0]

        def mlp_hook(module, args, out):
            seen["mlp_in"], seen["m"] = args[0], out

        hooks = [layer.register_forward_hook(block_hook, with_kwargs=True),
                 layer.self_attn.register_forward_hook(attn_hook, with_kwargs=True),
                 layer.mlp.register_forward_hook(mlp_hook)]  # fmt: skip
        try:
            run(model, ids)
        finally:
            for h in hooks:
                h.remove()
        x, a, m, y = seen["x"], seen["a"], seen["m"], seen["y"]
        torch.testing.assert_close(y, x + a + m, **TOL, msg=lambda s, i=i: f"{family} block {i}: {s}")
        with torch.no_grad():
            torch.testing.assert_close(seen["mlp_in"], ln(x + a, layer.layer_norm2), **TOL)


@pytest.mark.parametrize("family", list(TOWERS))
def test_transformer_variant_is_the_unmodified_model(models, ids, family):
    """Every hidden state transformers returns is the recorded stream (the final LayerNorm acts on
    ``last_hidden_state`` only, never on the stream)."""
    model = models[family]
    with variant(model, family, "transformer"):
        stream = residual_stream(model, family, ids)
    out = run(model, ids)
    assert len(out.hidden_states) == len(stream)
    for got, want in zip(stream, out.hidden_states, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(ln(stream[-1], model.final_layer_norm), out.last_hidden_state, **TOL)


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("family", list(TOWERS))
def test_clip_text_is_causal_and_siglip_text_is_not(models, ids, family, name):
    """Changing the last token leaves every earlier position of CLIP's text tower unchanged in every variant, and
    changes SigLIP's (bidirectional) at every layer after the embeddings."""
    model = models[family]
    changed = ids.clone()
    changed[:, -1] = 95 - ids[:, -1]
    with variant(model, family, name):
        a, b = residual_stream(model, family, ids), residual_stream(model, family, changed)
    for layer, (x, y) in enumerate(zip(a, b, strict=True)):
        assert (x[:, -1] - y[:, -1]).abs().max() > 0
        earlier = (x[:, :-1] - y[:, :-1]).abs().max()
        if TOWERS[family]["causal"]:
            assert earlier == 0, (layer, earlier)
        elif layer > 0:
            assert earlier > 1e-6, layer


@pytest.mark.parametrize(("family", "positions"), [("clip_text", 77), ("siglip_text", 64)])
def test_text_seq_len_beyond_the_towers_positions_is_refused(family, positions):
    """The towers' learned positions (CLIPTextConfig's 77, SiglipTextConfig's 64 by default) bound ``text.seq_len``;
    the message names the key."""
    arch = {k: v for k, v in ARCH.items() if k != "vocab_size"}
    config = {"models": {"tower": {"family": family, "init": {"seed": 0, "config": arch}}}}
    check_models({**config, "text": {"seq_len": positions}})
    with pytest.raises(ConfigError, match=rf"'text.seq_len': {positions + 1} tokens exceed the {positions} usable"):
        check_models({**config, "text": {"seq_len": positions + 1}})
    wider = {"models": {"tower": {"family": family, "init": {"seed": 0, "config": {
        **arch, "max_position_embeddings": 128}}}}, "text": {"seq_len": 128}}  # fmt: skip
    check_models(wider)


def test_an_init_clip_text_tower_runs_on_the_bundled_tokenizer(tmp_path):
    """An init CLIP text tower gets the bundled tokenizer: its default end-of-text id (49,407) lies outside that
    vocabulary and becomes the tokenizer's own end token, which its forward pools; SigLIP's is cleared."""
    import json

    from san.models.acquire import load_model, materialise_init
    from san.models.folders import load_tokenizer

    arch = {k: v for k, v in ARCH.items() if k != "vocab_size"}
    manifest = materialise_init("clip_text", arch, 0, tmp_path / "clip")
    tokenizer = load_tokenizer(tmp_path / "clip")
    config = json.loads((tmp_path / "clip" / "config.json").read_text())
    assert manifest["cleared_token_ids"]["eos_token_id"] == 49407
    assert config["eos_token_id"] == tokenizer.sep_token_id is not None
    ids = torch.as_tensor([tokenizer("a photo of a cat")["input_ids"]])
    model = load_model(tmp_path / "clip", "clip_text", torch.float32)
    out = model(input_ids=ids)
    torch.testing.assert_close(out.pooler_output[0], out.last_hidden_state[0, -1])  # [SEP] ends the sequence
    materialise_init("siglip_text", arch, 0, tmp_path / "siglip")
    assert json.loads((tmp_path / "siglip" / "config.json").read_text())["eos_token_id"] is None


DUAL = {
    "tiny-org/clip-dual": ("clip_text", "CLIPConfig", "CLIPModel"),
    "tiny-org/siglip-dual": ("siglip_text", "SiglipConfig", "SiglipModel"),
}


def _dual_repo(repo_id, hub, tmp_path):
    """A tiny dual checkpoint served under ``repo_id`` with the bundled tokenizer (tests/hub_repos.py), and the
    whole dual model transformers built."""
    from hub_repos import checkpoint_repo, dual_checkpoint

    _, config_class, model_class = DUAL[repo_id]
    vision = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32,
              "image_size": 224, "patch_size": 112}  # fmt: skip
    text = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32}
    dual = dual_checkpoint(config_class, model_class, vision, text, tmp_path / "built")
    hub.add(checkpoint_repo(repo_id, tmp_path / "built"))
    return dual


@pytest.mark.parametrize("repo_id", list(DUAL))
def test_a_dual_checkpoint_is_analysed_through_its_text_tower(repo_id, hub, tmp_path):
    """``tower: text``: the text tower of a CLIPModel / SiglipModel checkpoint, extracted at acquisition, is
    recognised as its text family and gives, on token ids of its own tokenizer, the hidden states of the dual
    model's own text tower (transformers, the whole checkpoint loaded)."""
    from san.core.text import pydoc_documents, tokenize_documents
    from san.models.acquire import load_model, materialise, read_manifest
    from san.models.folders import load_tokenizer

    family, _, model_class = DUAL[repo_id]
    dual = _dual_repo(repo_id, hub, tmp_path)
    out = tmp_path / "pretrained"
    materialise("m", None, "pretrained", {"source": "hub", "repo_id": repo_id, "tower": "text"}, out)
    manifest = read_manifest(out)
    assert manifest["family"] == family
    assert manifest["text_tower_of"]["architecture"] == [model_class]
    assert manifest["text_tower_of"]["left_out"] > 0
    ids = torch.as_tensor(tokenize_documents(load_tokenizer(out), pydoc_documents()[:4], 16, 2, 0))
    model = load_model(out, family, torch.float32)
    with variant(model, family, "transformer"):
        states = residual_stream(model, family, ids)
    with torch.no_grad():
        want = dual.text_model(input_ids=ids, output_hidden_states=True).hidden_states
    assert len(states) == len(want) == 3
    for s, w in zip(states, want, strict=True):  # eager attention here, transformers' default (SDPA) there
        torch.testing.assert_close(s, w, rtol=1e-5, atol=1e-5)


def test_a_dual_checkpoint_without_a_tower_is_refused(hub, tmp_path):
    from san.models.folders import AcquisitionError

    _dual_repo("tiny-org/clip-dual", hub, tmp_path)
    with pytest.raises(AcquisitionError, match="dual text-image checkpoint.*'tower: vision' or 'tower: text'"):
        materialise_hub("tiny-org/clip-dual", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def materialise_hub(repo_id, out):
    from san.models.acquire import materialise

    return materialise("m", None, "pretrained", {"source": "hub", "repo_id": repo_id}, out)
