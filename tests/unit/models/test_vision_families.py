"""The image-encoder families on tiny random checkpoints built from their config classes: the residual identity of
every block, every variant recomputed here from the weights with plain torch (layer norm, multi-head attention and
the MLP written out, DINOv2's LayerScale as the vector it is), the unmodified variant equal to transformers' own
hidden states, the token roles, and the image inputs (pinned photographs, noise, the model's image processor). The
reference forward is tests/family_blocks.py's :func:`vision_reference`."""

import numpy as np
import pytest
import torch
from family_blocks import vision_blocks, vision_branches, vision_reference

from san.core.images import IMAGES, noise_images, read_images
from san.models.ablations import variant
from san.models.load import load_model
from san.models.spec import IMAGE_FAMILIES, VARIANTS
from san.models.store import materialise_init
from san.rank_collapse.experiment import residual_stream
from san.rank_collapse.vision.experiment import pixel_inputs, token_roles

BASE = {"hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "image_size": 224, "patch_size": 56}
#: tiny architectures: 4 x 4 patches of a 224-pixel image
ARCHS = {
    "vit": {**BASE, "intermediate_size": 64},
    "deit": {**BASE, "intermediate_size": 64},
    "dinov2": {**BASE, "mlp_ratio": 2, "layerscale_value": 0.5},
    "dinov2_with_registers": {**BASE, "mlp_ratio": 2, "layerscale_value": 0.5, "num_register_tokens": 3},
    "siglip": {**BASE, "intermediate_size": 64},
    "clip": {**BASE, "intermediate_size": 64},
}
#: the special tokens before the 16 patches, written out per family (Dosovitskiy et al.; Touvron et al.; Oquab et
#: al.; Darcet et al.; Zhai et al.; Radford et al.)
EXPECTED_PREFIX = {
    "vit": ["class"],
    "deit": ["class", "distillation"],
    "dinov2": ["class"],
    "dinov2_with_registers": ["class", "register", "register", "register"],
    "siglip": [],
    "clip": ["class"],
}


def test_the_table_has_the_six_image_families():
    assert set(IMAGE_FAMILIES) >= set(ARCHS)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("vision")
    for family, arch in ARCHS.items():
        materialise_init(family, arch, 0, root / family)
    return {family: root / family for family in ARCHS}


@pytest.fixture(scope="module")
def pixels(folders):
    """Two images per family (a photograph and a noise image) through each model's own image processor."""
    settings = {"images": ["chelsea"], "noise_images": 1, "noise_size": 64, "seed": 0}
    return {family: torch.as_tensor(pixel_inputs(folder, settings)["pixel_values"].values).double()
            for family, folder in folders.items()}  # fmt: skip


@pytest.mark.parametrize("family", list(ARCHS))
def test_token_roles_count_the_special_tokens_and_the_patch_grid(family, folders, pixels):
    model = load_model(folders[family], family, torch.float64)
    states = residual_stream(model, family, pixels[family])
    roles = token_roles(family, model.config, states[0].shape[1])
    assert roles == EXPECTED_PREFIX[family] + ["patch"] * 16
    assert states[0].shape[1] == len(EXPECTED_PREFIX[family]) + (224 // 56) ** 2


def test_registers_sit_between_the_class_token_and_the_patches(folders, pixels):
    """DINOv2's registers carry no position: layer 0's register states equal the learned register tokens."""
    family = "dinov2_with_registers"
    model = load_model(folders[family], family, torch.float64)
    x0 = residual_stream(model, family, pixels[family])[0]
    registers = model.embeddings.register_tokens[0]
    assert torch.equal(x0[0, 1:4], registers) and torch.equal(x0[1, 1:4], registers)
    assert not torch.equal(x0[0, 0], registers[0])


@pytest.mark.parametrize("family", list(ARCHS))
def test_residual_identity_in_every_block(family, folders, pixels):
    """``y = x + a(x) + m(x + a(x))`` in every block of the unmodified model, with ``a`` and ``m`` from the
    weights."""
    model = load_model(folders[family], family, torch.float64)
    states = residual_stream(model, family, pixels[family])
    for i, layer in enumerate(vision_blocks(family, model)):
        a, m = vision_branches(family, layer, model.config)
        with torch.no_grad():
            h = states[i] + a(states[i])
            torch.testing.assert_close(states[i + 1], h + m(h), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("family", list(ARCHS))
@pytest.mark.parametrize("name", VARIANTS)
def test_every_variant_recomputed_from_the_weights(family, name, folders, pixels):
    model = load_model(folders[family], family, torch.float64)
    with variant(model, family, name):
        got = residual_stream(model, family, pixels[family])
    with torch.no_grad():
        want = vision_reference(family, model, got[0], name)
    assert len(got) == ARCHS[family]["num_hidden_layers"] + 1
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("family", list(ARCHS))
def test_transformer_variant_equals_the_models_hidden_states(family, folders, pixels):
    model = load_model(folders[family], family, torch.float64)
    with variant(model, family, "transformer"):
        got = residual_stream(model, family, pixels[family])
    with torch.no_grad():
        hidden = model(pixel_values=pixels[family], output_hidden_states=True).hidden_states
    assert len(hidden) == len(got)
    for g, h in zip(got, hidden, strict=True):
        assert torch.equal(g, h)


def test_pixel_inputs_record_the_processor_and_differ_by_family(folders):
    settings = {"images": ["astronaut", "coffee"], "noise_images": 2, "noise_size": 32, "seed": 1}
    vit = pixel_inputs(folders["vit"], settings)
    clip = pixel_inputs(folders["clip"], settings)
    assert list(vit["image"].values) == ["astronaut", "coffee", "noise0", "noise1"]
    assert vit["pixel_values"].shape == (4, 3, 224, 224)
    assert '"image_mean": [0.5, 0.5, 0.5]' in vit.attrs["image_processor"]
    assert "0.48145466" in clip.attrs["image_processor"]
    # ViT's processor: bilinear resize to 224 x 224, then (x / 255 - 0.5) / 0.5, recomputed with PIL and numpy
    from PIL import Image

    img = read_images(["astronaut"])[0].resize((224, 224), Image.Resampling.BILINEAR)
    want = (np.asarray(img, dtype=np.float64) / 255 - 0.5) / 0.5
    np.testing.assert_allclose(vit["pixel_values"].values[0].transpose(1, 2, 0), want, atol=1e-5)
    assert vit.attrs["input_sha256"] != clip.attrs["input_sha256"]


def test_noise_images_are_seeded_and_differ_by_seed():
    a, b, c = (np.asarray(noise_images(2, 8, s)[0]) for s in (3, 3, 4))
    assert a.shape == (8, 8, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_pinned_images_are_refused_when_changed(monkeypatch, tmp_path):
    import san.core.images as images

    (tmp_path / IMAGES["chelsea"].file).write_bytes(b"not the cat")
    monkeypatch.setattr(images, "_FOLDER", tmp_path)
    with pytest.raises(RuntimeError, match="chelsea.png has sha256 .* expected 596aa1e7"):
        images.read_images(["chelsea"])
    with pytest.raises(ValueError, match="unknown pinned image 'lena'"):
        images.read_images(["lena"])


def test_layer_scale_is_a_branch_multiplier_not_a_norm():
    """DINOv2's LayerScales sit in the branch-output slots of its parts but are no norms: the recorded norm placement
    is pre-norm, and the generated tables write them as the multipliers λ1, λ2."""
    from san.models.recognise import norm_placement
    from san.models.spec import FAMILY_TABLE
    from san.models.tables import variants

    for family in ("dinov2", "dinov2_with_registers"):
        assert norm_placement(family) == "pre"
        assert variants(FAMILY_TABLE[family])["SAN"] == "`λ1 Attn(N1(x))`"
    assert norm_placement("vit") == "pre" and variants(FAMILY_TABLE["vit"])["SAN"] == "`Attn(N1(x))`"
