"""The encoder stack of an encoder-decoder checkpoint named by its hub id (the local hub, tests/hub_server.py): a
tiny whole checkpoint of each stack family is refused, naming its decoder, unless its source says ``stack: encoder``;
then the acquired encoder gives the hidden states of the whole checkpoint's own encoder and every variant its
reference forward (tests/family_blocks.py)."""

import pytest
import torch
from family_blocks import STACK_CASES, STACK_REFERENCES, STACKS, TOL, VARIANT_NAMES

from san.models.ablations import variant
from san.models.families import FAMILIES
from san.models.recognise import UnsupportedModel
from san.rank_collapse.experiment import residual_stream

from hub_repos import checkpoint_repo, tiny_checkpoint

N_TOKENS, BATCH = 9, 2


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
    config = FAMILIES[family].config_cls(**STACKS[family][1])
    whole = getattr(transformers, row.stack_of[0])
    return tiny_checkpoint(config, folder, seed=0, model_class=whole), whole


@pytest.mark.parametrize("repo_id", list(REPOS))
def test_the_encoder_stack_of_a_whole_checkpoint_from_a_hub_id(repo_id, hub, tmp_path):
    """``stack: encoder``: the encoder of a ``<...>ForConditionalGeneration`` checkpoint, taken out at acquisition,
    is recognised as its family; its unmodified variant gives the whole checkpoint's own encoder's hidden states
    (transformers, the whole checkpoint loaded) and every variant its recomputation from the weights."""
    from san.models.folders import read_manifest
    from san.models.load import load_model
    from san.models.store import materialise

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
    assert len(states) == len(want) == model.config.num_hidden_layers + 1
    for s, w in zip(states[:-1], want[:-1], strict=True):
        torch.testing.assert_close(s, w, rtol=1e-12, atol=1e-12)
    for name in VARIANT_NAMES:
        with variant(model, family, name):
            got = residual_stream(model, family, ids)
        with torch.no_grad():
            expected = STACK_REFERENCES[family](model, ids, name, family)
        for g, w in zip(got, expected, strict=True):
            torch.testing.assert_close(g, w, **TOL)


def test_a_whole_checkpoint_without_stack_is_refused_and_leaves_nothing(hub, tmp_path):
    from san.models.store import materialise

    built, _ = _whole_checkpoint("t5", tmp_path / "built")
    hub.add(checkpoint_repo("tiny-org/t5-whole", built))
    with pytest.raises(UnsupportedModel, match="decoder.*'stack: encoder'"):
        materialise("m", None, "pretrained", {"source": "hub", "repo_id": "tiny-org/t5-whole"}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_encoder_stack_of_a_single_stack_checkpoint_is_refused(hub, tmp_path):
    from san.models.folders import AcquisitionError
    from san.models.store import materialise, materialise_init

    built = tmp_path / "built"
    materialise_init("roberta", {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                                 "intermediate_size": 32}, 0, built)  # fmt: skip
    (built / "manifest.json").unlink()
    hub.add(checkpoint_repo("tiny-org/roberta-single", built))
    source = {"source": "hub", "repo_id": "tiny-org/roberta-single", "stack": "encoder"}
    with pytest.raises(AcquisitionError, match="encoder stack is taken from an encoder-decoder checkpoint"):
        materialise("m", None, "pretrained", source, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_encoder_only_checkpoint_is_recognised_with_or_without_stack(hub, tmp_path):
    """A checkpoint saved as the encoder-only class (``T5EncoderModel``, as image-generation pipelines ship their
    text encoder) is its encoder stack already: recognised as it is, and ``stack: encoder`` keeps every tensor."""
    import transformers

    from san.models.folders import read_manifest
    from san.models.store import materialise

    config = FAMILIES["t5"].config_cls(**STACK_CASES["t5"][1])
    built = tiny_checkpoint(config, tmp_path / "built", model_class=transformers.T5EncoderModel)
    hub.add(checkpoint_repo("tiny-org/t5-encoder", built))
    plain, stacked = tmp_path / "plain", tmp_path / "stacked"
    materialise("m", None, "pretrained", {"source": "hub", "repo_id": "tiny-org/t5-encoder"}, plain)
    source = {"source": "hub", "repo_id": "tiny-org/t5-encoder", "stack": "encoder"}
    materialise("m", None, "pretrained", source, stacked)
    assert read_manifest(plain)["family"] == read_manifest(stacked)["family"] == "t5"
    assert "encoder_stack_of" not in read_manifest(plain)
    assert read_manifest(stacked)["encoder_stack_of"]["left_out"] == 0
