"""Every image-encoder family acquired from a hub id alone through the local hub (tests/hub_server.py): a tiny
random checkpoint of its config class, served with its image processor as the hub holds it, is recognised from its
config.json, prepares the pinned images with its own processor, runs its unmodified variant equal to transformers'
hidden states and every variant equal to its recomputation from the weights, with the token roles right; a dual
text-image checkpoint (CLIP, SigLIP) is analysed through its vision tower."""

import pytest
import torch
from family_blocks import vision_reference

from san.measures.phenomena import PHENOMENA
from san.models.ablations import variant
from san.models.folders import read_manifest
from san.models.load import load_model
from san.models.spec import VARIANTS
from san.models.store import materialise, materialise_init
from san.rank_collapse.experiment import residual_stream
from san.rank_collapse.vision.experiment import pixel_inputs, run, token_roles

from hub_repos import checkpoint_repo
from reference import assert_phenomena

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
#: the class of each reference checkpoint (ViT's and DeiT's classification models hold no pooler)
CHECKPOINT_CLASSES = {
    "vit": "ViTForImageClassification",
    "deit": "DeiTForImageClassificationWithTeacher",
    "dinov2": "Dinov2Model",
    "dinov2_with_registers": "Dinov2WithRegistersModel",
    "siglip": "SiglipVisionModel",
    "clip": "CLIPVisionModel",
}
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
    import transformers

    from san.models.images import write_image_processor
    from san.models.spec import FAMILY_TABLE

    family, arch = REPOS[repo_id]
    built = tmp_path / "built"
    torch.manual_seed(0)
    config = getattr(transformers, FAMILY_TABLE[family].config_class)(**arch)
    getattr(transformers, CHECKPOINT_CLASSES[family])(config).save_pretrained(built)
    write_image_processor(family, built)
    hub.add(checkpoint_repo(repo_id, built))
    out = tmp_path / "pretrained"
    materialise("m", None, "pretrained", {"source": "hub", "repo_id": repo_id}, out)
    manifest = read_manifest(out)
    assert manifest["family"] == family and manifest["repo_id"] == repo_id
    assert (out / "preprocessor_config.json").is_file()
    inputs = pixel_inputs(out, {"images": ["coffee"], "noise_images": 1, "noise_size": 16, "seed": 0})
    pixels = torch.as_tensor(inputs["pixel_values"].values).double()
    model = load_model(out, family, torch.float64)
    with variant(model, family, "transformer"):
        states = residual_stream(model, family, pixels)
    hidden = model(pixel_values=pixels, output_hidden_states=True).hidden_states
    assert all(torch.equal(s, h) for s, h in zip(states, hidden, strict=True))
    assert token_roles(family, model.config, states[0].shape[1]) == PREFIX[family] + ["patch"] * 4
    for name in VARIANTS:  # every variant of the acquired model, recomputed from its weights (tests/family_blocks.py)
        with variant(model, family, name):
            got = residual_stream(model, family, pixels)
        with torch.no_grad():
            want = vision_reference(family, model, got[0], name)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9)
    # the vision job on the acquired folder: the per-layer measures and each patch's similarity to its neighbours
    settings = {"variants": ["SAN", "transformer"], "dtype": "float64", "batch_size": 2, "high_frequency_cutoff": 0.25,
                "massive_token_factor": 10.0}  # fmt: skip
    ds = run(family, {"pretrained": out}, {"pretrained": inputs}, settings)
    for name in PHENOMENA:
        assert ds[name].dims == ("weights", "variant", "layer", "image") and ds[name].notnull().all(), name
    got = {name: ds[name].sel(weights="pretrained", variant="transformer").values for name in PHENOMENA}
    assert_phenomena(got, [h.detach().numpy() for h in hidden], settings["massive_token_factor"])
    similarity = ds["patch_neighbour_similarity"].sel(weights="pretrained")
    patches = [i for i, role in enumerate(PREFIX[family] + ["patch"] * 4) if role == "patch"]
    assert similarity.isel(token=patches).notnull().all() and similarity.count() == 2 * len(patches)


DUAL = {
    "tiny-org/clip-dual": ("clip", "CLIPConfig", "CLIPModel"),
    "tiny-org/siglip-dual": ("siglip", "SiglipConfig", "SiglipModel"),
}


@pytest.mark.parametrize("repo_id", list(DUAL))
def test_a_dual_checkpoint_is_analysed_through_its_vision_tower(repo_id, hub, tmp_path):
    """``tower: vision``: the vision tower of a CLIPModel / SiglipModel checkpoint, extracted at acquisition, gives
    the hidden states of the dual model's own vision tower (transformers, the whole checkpoint loaded)."""
    import transformers

    from san.models.images import write_image_processor

    family, config_class, model_class = DUAL[repo_id]
    vision = {**BASE, "intermediate_size": 64}
    text = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32,
            "vocab_size": 64, "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 1}  # fmt: skip
    config = getattr(transformers, config_class)(vision_config=vision, text_config=text)
    built = tmp_path / "built"
    torch.manual_seed(0)
    dual = getattr(transformers, model_class)(config).eval()
    dual.save_pretrained(built)
    write_image_processor(family, built)
    hub.add(checkpoint_repo(repo_id, built))
    out = tmp_path / "pretrained"
    materialise("m", None, "pretrained", {"source": "hub", "repo_id": repo_id, "tower": "vision"}, out)
    manifest = read_manifest(out)
    assert manifest["family"] == family
    assert manifest["vision_tower_of"]["architecture"] == [model_class]
    assert manifest["vision_tower_of"]["left_out"] > 0
    pixels = torch.as_tensor(
        pixel_inputs(out, {"images": ["rocket"], "noise_images": 1, "noise_size": 16, "seed": 0})["pixel_values"].values
    )
    model = load_model(out, family, torch.float32)
    with variant(model, family, "transformer"):
        states = residual_stream(model, family, pixels)
    with torch.no_grad():
        want = dual.vision_model(pixel_values=pixels, output_hidden_states=True).hidden_states
    assert len(states) == len(want)
    for s, w in zip(states, want, strict=True):  # eager attention here, transformers' default (SDPA) there
        torch.testing.assert_close(s, w, rtol=1e-5, atol=1e-5)


def test_a_vision_tower_of_a_single_tower_checkpoint_is_refused(hub, tmp_path):
    from san.models.folders import AcquisitionError

    built = tmp_path / "built"
    materialise_init("vit", {**BASE, "intermediate_size": 64}, 0, built)
    (built / "manifest.json").unlink()
    hub.add(checkpoint_repo("tiny-org/vit-single", built))
    with pytest.raises(AcquisitionError, match="vision tower is taken from a dual text-image checkpoint.*'vit'"):
        materialise("m", None, "pretrained", {"source": "hub", "repo_id": "tiny-org/vit-single", "tower": "vision"},
                    tmp_path / "out")  # fmt: skip
    assert not (tmp_path / "out").exists()
