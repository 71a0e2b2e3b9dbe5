"""The text towers of the dual text-image checkpoints (CLIP, SigLIP) as text families, on tiny random float64 models
built from their config classes with every parameter perturbed (tests/family_blocks.py): the residual identity of
every block, every variant recomputed from the weights in plain torch (the reference forward of
tests/family_blocks.py: token and position embeddings, layer norm, multi-head attention with CLIP's causal mask, the
MLP with each tower's activation written out), the unmodified variant equal to transformers' hidden states, CLIP's
tower causal and SigLIP's bidirectional in every variant, the position limit of the config check, and an init tower
on the bundled tokenizer (a dual checkpoint analysed through its text tower from a hub id:
tests/integration/test_text_towers_by_hub_id.py)."""

import pytest
import torch
from family_blocks import (
    TEXT_TOWERS,
    TOL,
    TOWER_ARCH,
    VARIANT_NAMES,
    branch_states,
    ln,
    perturbed_model,
    tower_reference,
)

from san.core.config import ConfigError
from san.models.ablations import variant
from san.models.entries import check_models
from san.rank_collapse.experiment import residual_stream

BATCH, N_TOKENS = 2, 7


@pytest.fixture(scope="module")
def models():
    return {family: perturbed_model(family, dict(TOWER_ARCH)) for family in TEXT_TOWERS}


@pytest.fixture(scope="module")
def ids():
    return torch.randint(5, 90, (BATCH, N_TOKENS), generator=torch.Generator().manual_seed(1))


def run(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, output_hidden_states=True)


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("family", list(TEXT_TOWERS))
def test_variant_matches_reference(models, ids, family, name):
    model = models[family]
    with variant(model, family, name):
        stream = residual_stream(model, family, ids)
    with torch.no_grad():
        want = tower_reference(model, family, ids, name)
    assert len(stream) == len(want) == TOWER_ARCH["num_hidden_layers"] + 1
    for layer, (g, w) in enumerate(zip(stream, want, strict=True)):
        torch.testing.assert_close(g, w, **TOL, msg=lambda m, layer=layer: f"{family} {name} layer {layer}: {m}")


@pytest.mark.parametrize("family", list(TEXT_TOWERS))
def test_references_distinguish_the_variants(models, ids, family):
    with torch.no_grad():
        last = {name: tower_reference(models[family], family, ids, name)[-1] for name in VARIANT_NAMES}
    for i, a in enumerate(VARIANT_NAMES):
        for b in VARIANT_NAMES[i + 1 :]:
            assert (last[a] - last[b]).abs().max() > 1e-3, (a, b)


@pytest.mark.parametrize("family", list(TEXT_TOWERS))
def test_residual_identity_in_every_block(models, ids, family):
    """Unmodified model, every block: output = input + attention branch (``self_attn``'s output) + MLP branch
    (``mlp``'s output), and the MLP reads ``layer_norm2`` of the input plus the attention branch."""
    model = models[family]
    for i, layer in enumerate(model.encoder.layers):
        seen = branch_states(lambda: run(model, ids), layer, layer.self_attn, layer.mlp)
        x, a, m, y = seen["x"], seen["a"], seen["m"], seen["y"]
        torch.testing.assert_close(y, x + a + m, **TOL, msg=lambda s, i=i: f"{family} block {i}: {s}")
        with torch.no_grad():
            torch.testing.assert_close(seen["mlp_in"], ln(x + a, layer.layer_norm2), **TOL)


@pytest.mark.parametrize("family", list(TEXT_TOWERS))
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
@pytest.mark.parametrize("family", list(TEXT_TOWERS))
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
        if TEXT_TOWERS[family]["causal"]:
            assert earlier == 0, (layer, earlier)
        elif layer > 0:
            assert earlier > 1e-6, layer


@pytest.mark.parametrize(("family", "positions"), [("clip_text", 77), ("siglip_text", 64)])
def test_text_seq_len_beyond_the_towers_positions_is_refused(family, positions):
    """The towers' learned positions (CLIPTextConfig's 77, SiglipTextConfig's 64 by default) bound ``text.seq_len``;
    the message names the key."""
    arch = {k: v for k, v in TOWER_ARCH.items() if k != "vocab_size"}
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

    from san.models.folders import load_tokenizer
    from san.models.load import load_model
    from san.models.store import materialise_init

    arch = {k: v for k, v in TOWER_ARCH.items() if k != "vocab_size"}
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
