"""Every image-encoder family acquired from a hub id alone through the local hub (tests/hub_server.py): a tiny
random checkpoint of its config class, served with its image processor as the hub holds it, is recognised from its
config.json, prepares the pinned images with its own processor and runs its unmodified variant equal to
transformers' hidden states."""

import pytest
import torch

from san.models.ablations import variant
from san.models.acquire import load_model, materialise, materialise_init, read_manifest
from san.rank_collapse.experiment import residual_stream
from san.rank_collapse.vision import pixel_inputs, token_roles

from hub_repos import checkpoint_repo

BASE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 224, "patch_size": 112}
#: tiny checkpoints under the names of the families' reference checkpoints (docs/models.md)
REPOS = {
    "google/vit-base-patch16-224": ("vit", {**BASE, "intermediate_size": 64}),
    "facebook/deit-base-distilled-patch16-224": ("deit", {**BASE, "intermediate_size": 64}),
    "facebook/dinov2-small": ("dinov2", {**BASE, "mlp_ratio": 2}),
    "facebook/dinov2-with-registers-small": (
        "dinov2_with_registers", {**BASE, "mlp_ratio": 2, "num_register_tokens": 4}
    ),
    "google/siglip-base-patch16-224": ("siglip", {**BASE, "intermediate_size": 64}),
    "openai/clip-vit-base-patch16": ("clip", {**BASE, "intermediate_size": 64}),
}  # fmt: skip
#: the special tokens before the 2 x 2 patches, per family
PREFIX = {
    "vit": ["class"],
    "deit": ["class", "distillation"],
    "dinov2": ["class"],
    "dinov2_with_registers": ["class"] + ["register"] * 4,
    "siglip": [],
    "clip": ["class"],
}


@pytest.mark.parametrize("repo_id", list(REPOS))
def test_vision_family_from_a_hub_id_alone(repo_id, hub, tmp_path):
    family, arch = REPOS[repo_id]
    built = tmp_path / "built"
    materialise_init(family, arch, 0, built)
    (built / "manifest.json").unlink()
    hub.add(checkpoint_repo(repo_id, built))
    out = tmp_path / "pretrained"
    materialise("m", None, "pretrained", {"source": "hub", "repo_id": repo_id}, out)
    manifest = read_manifest(out)
    assert manifest["family"] == family and manifest["repo_id"] == repo_id
    assert (out / "preprocessor_config.json").is_file()
    pixels = torch.as_tensor(
        pixel_inputs(out, {"images": ["coffee"], "noise_images": 1, "noise_size": 16, "seed": 0})["pixel_values"].values
    ).double()
    model = load_model(out, family, torch.float64)
    with variant(model, family, "transformer"):
        states = residual_stream(model, family, pixels)
    hidden = model(pixel_values=pixels, output_hidden_states=True).hidden_states
    assert all(torch.equal(s, h) for s, h in zip(states, hidden, strict=True))
    assert token_roles(family, model.config, states[0].shape[1]) == PREFIX[family] + ["patch"] * 4
