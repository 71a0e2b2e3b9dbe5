"""The encoder stacks of encoder-decoder models (T5, mT5, UMT5, BART), each on a tiny random float64 encoder whose
every parameter is perturbed (the cases and reference forwards of tests/family_blocks.py):

- every variant equals the residual stream recomputed from the weights in plain torch (the relative position
  buckets, RMSNorm, unscaled attention with the position bias and the MLPs written out there; SAN is the attention
  branch with its bias only, SAN+MLP attention then the MLP, no skips; SAN+skip attention with its residual;
  transformer the unmodified encoder; BART's post-norm block keeps both LayerNorms, as BERT's does);
- the residual identity holds in every block of the pre-norm stacks: input + attention branch + MLP branch is the
  block output, and the MLP reads the norm of the input plus the attention branch;
- the ``transformer`` variant is the encoder's hidden states; leaving a variant restores the model;
- a whole encoder-decoder config is refused, naming its decoder (its acquisition by hub id:
  tests/integration/test_encoder_stacks_by_hub_id.py).
"""

import pytest
import torch
from family_blocks import (
    STACK_CASES,
    STACK_REFERENCES,
    STACKS,
    TOL,
    VARIANT_NAMES,
    assert_variants_restore,
    bart_reference,
    branch_states,
    encoder_reference,
    perturbed_model,
    rms,
)

from san.models.ablations import variant
from san.models.families import FAMILIES
from san.models.recognise import UnsupportedModel, recognise
from san.rank_collapse.experiment import residual_stream

torch.set_num_threads(1)
N_TOKENS, BATCH = 9, 2


@pytest.fixture(scope="module")
def ids():
    return torch.randint(5, 90, (BATCH, N_TOKENS), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def models():
    return {case: perturbed_model(family, config) for case, (family, config) in STACKS.items()}


def run(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)


def depth(model):
    return model.config.num_hidden_layers


# ------------------------------------------------------------------------------------------------ tests
def test_the_encoder_stack_families_are_rows_of_the_table():
    from san.models.spec import FAMILY_TABLE

    assert {family for family, _ in STACKS.values()} == {n for n, row in FAMILY_TABLE.items() if row.stack_of}


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("case", list(STACKS))
def test_variant_matches_reference(models, ids, case, name):
    model, family = models[case], STACKS[case][0]
    with variant(model, family, name):
        stream = residual_stream(model, family, ids)
    with torch.no_grad():
        expected = STACK_REFERENCES[family](model, ids, name, family)
    assert len(stream) == len(expected) == depth(model) + 1
    for layer, (got, want) in enumerate(zip(stream, expected, strict=True)):
        torch.testing.assert_close(got, want, **TOL, msg=lambda m, layer=layer: f"{case} {name} layer {layer}: {m}")


@pytest.mark.parametrize("case", list(STACK_CASES))
def test_references_distinguish_the_variants_and_the_bias(models, ids, case):
    """The comparison above tells the variants apart, and the position bias matters: zeroing it changes the
    reference (so a variant that dropped it would fail)."""
    model, family = models[case], STACK_CASES[case][0]
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


@pytest.mark.parametrize("case", list(STACK_CASES))
def test_residual_identity_in_every_block(models, ids, case):
    """Unmodified encoder, every block: output = input + attention branch (the self-attention's output) + MLP
    branch (the MLP's output), and the MLP reads the RMSNorm of input plus attention branch."""
    model = models[case]
    for i, blk in enumerate(model.encoder.block):
        seen = branch_states(lambda: run(model, ids), blk, blk.layer[0].SelfAttention, blk.layer[1].DenseReluDense)
        x, a, m, y = seen["x"], seen["a"], seen["m"], seen["y"]
        torch.testing.assert_close(y, x + a + m, **TOL, msg=lambda s, i=i: f"{case} block {i}: {s}")
        with torch.no_grad():
            want = rms(x + a, blk.layer[1].layer_norm)
        torch.testing.assert_close(seen["mlp_in"], want, **TOL, msg=lambda s, i=i: f"{case} block {i} MLP input: {s}")


@pytest.mark.parametrize("case", list(STACK_CASES))
def test_transformer_variant_is_the_unmodified_encoder(models, ids, case):
    """Every hidden state of transformers but the last is the recorded stream; the last is the final RMSNorm of the
    stream's last, which the stream never applies."""
    model, family = models[case], STACK_CASES[case][0]
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


@pytest.mark.parametrize("case", list(STACKS))
def test_leaving_a_variant_restores_the_model(models, ids, case):
    model, family = models[case], STACKS[case][0]
    assert_variants_restore(model, family, ids, run)


# ------------------------------------------------------------------------------------------------ recognition
@pytest.mark.parametrize("family", [family for family, _ in STACKS.values()])
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


@pytest.mark.slow
@pytest.mark.parametrize("family", [family for family, _ in STACKS.values()])
def test_an_init_of_an_encoder_stack_is_recognised_and_loads(family, tmp_path):
    """A random initialisation of an explicit architecture is saved as the encoder-only class (its config still says
    ``is_encoder_decoder``, as transformers writes it) and recognised as its family; it loads, and its attention
    matrices have one per block and head; the memory estimate reads the encoder's shape."""
    from san.core.memory import model_size
    from san.models.load import load_model
    from san.models.store import materialise_init
    from san.rank_collapse.experiment import attention_matrices

    arch = {k: v for k, v in STACKS[family][1].items() if k != "vocab_size"}
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
    from san.models.entries import check_architecture

    arch = {**STACK_CASES["t5"][1], "num_heads": 3}
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
