"""A dual text-image checkpoint (CLIP, SigLIP) named by its hub id (the local hub, tests/hub_server.py) and analysed
through its text tower (``tower: text``), which gives the hidden states of the dual model's own text tower; without
a tower it is refused."""

import pytest
import torch

from san.models.ablations import variant
from san.rank_collapse.experiment import residual_stream

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
    from san.models.folders import load_tokenizer, read_manifest
    from san.models.load import load_model
    from san.models.store import materialise

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
    from san.models.store import materialise

    return materialise("m", None, "pretrained", {"source": "hub", "repo_id": repo_id}, out)
