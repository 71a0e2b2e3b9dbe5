"""The ONNX source on a tiny graph built here with onnx.helper in the naming scheme of PyTorch's export of a network
holding a transformers ``Dinov2Model`` as its ``backbone`` (named parameters, anonymous ``onnx::MatMul_*`` linear
weights stored as ``(in, out)``, the position embeddings split in a class and a patch part, a head outside the
backbone): the state dict and the configuration read from it, the folder computing what the graph computes (onnx's
reference evaluator against ``Dinov2Model``), the pins checked before the file is read, and the refusals."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from san.models.folders import AcquisitionError, sha256_file
from san.models.sources import onnx as source

SIDE, PATCH, CHANNELS = 4, 2, 3


class Export:
    """A graph under construction, named as PyTorch's exporter names a module tree: node ``<scope>/<Op>[_k]``,
    output ``<node>_output_0``, named parameters ``backbone.<path>``, anonymous initialisers ``onnx::<Op>_<n>``.
    ``expected`` collects the ``Dinov2Model`` checkpoint the graph holds (linear weights as ``(out, in)``)."""

    def __init__(self, hidden: int, heads: int, layers: int, eps: float, seed: int = 0) -> None:
        self.hidden, self.heads, self.layers, self.eps = hidden, heads, layers, eps
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initialisers: list[onnx.TensorProto] = []
        self.expected: dict[str, np.ndarray] = {}
        self.counts: Counter[str] = Counter()
        self.anonymous = 1000

    def random(self, *shape: int, scale: float = 0.3) -> np.ndarray:
        return (scale * self.rng.standard_normal(shape)).astype(np.float32)

    def op(self, scope: str, op: str, inputs: list[str], **attrs) -> str:
        k = self.counts[(scope, op)]
        self.counts[(scope, op)] += 1
        name = f"{scope}/{op}" + (f"_{k}" if k else "")
        self.nodes.append(helper.make_node(op, inputs, [f"{name}_output_0"], name=name, **attrs))
        return f"{name}_output_0"

    def const(self, scope: str, value) -> str:
        return self.op(scope, "Constant", [], value=numpy_helper.from_array(np.asarray(value)))

    def named(self, path: str, array: np.ndarray) -> str:
        self.initialisers.append(numpy_helper.from_array(array, f"backbone.{path}"))
        self.expected[path] = array
        return f"backbone.{path}"

    def unnamed(self, op: str, array: np.ndarray) -> str:
        self.anonymous += 1
        self.initialisers.append(numpy_helper.from_array(array, f"onnx::{op}_{self.anonymous}"))
        return f"onnx::{op}_{self.anonymous}"

    def linear(self, scope: str, x: str, n_in: int, n_out: int) -> str:
        path = scope.removeprefix("/backbone/").replace("/", ".")
        weight = self.random(n_out, n_in)
        self.expected[f"{path}.weight"] = weight
        product = self.op(scope, "MatMul", [x, self.unnamed("MatMul", np.ascontiguousarray(weight.T))])
        return self.op(scope, "Add", [self.named(f"{path}.bias", self.random(n_out)), product])

    def layer_norm(self, scope: str, x: str) -> str:
        path = scope.removeprefix("/backbone/").replace("/", ".")
        centred = self.op(scope, "Sub", [x, self.op(scope, "ReduceMean", [x], axes=[-1])])
        squares = self.op(scope, "Pow", [centred, self.const(scope, np.float32(2))])
        variance = self.op(scope, "ReduceMean", [squares], axes=[-1])
        eps = self.const(scope, np.float32(self.eps))
        std = self.op(scope, "Sqrt", [self.op(scope, "Add", [variance, eps])])
        scaled = self.op(
            scope,
            "Mul",
            [self.op(scope, "Div", [centred, std]), self.named(f"{path}.weight", 1 + self.random(self.hidden))],
        )
        return self.op(scope, "Add", [scaled, self.named(f"{path}.bias", self.random(self.hidden))])

    def embeddings(self, x: str) -> str:
        scope, d, n = "/backbone/embeddings", self.hidden, (SIDE // PATCH) ** 2
        conv = self.op(
            f"{scope}/patch_embeddings/projection", "Conv",
            [x, self.named("embeddings.patch_embeddings.projection.weight", self.random(d, CHANNELS, PATCH, PATCH)),
             self.named("embeddings.patch_embeddings.projection.bias", self.random(d))],
            kernel_shape=[PATCH, PATCH], strides=[PATCH, PATCH],
        )  # fmt: skip
        flat = self.op(f"{scope}/patch_embeddings", "Reshape", [conv, self.const(scope, np.array([1, d, n]))])
        patches = self.op(f"{scope}/patch_embeddings", "Transpose", [flat], perm=[0, 2, 1])
        tokens = self.op(scope, "Concat", [self.named("embeddings.cls_token", self.random(1, 1, d)), patches], axis=1)
        cls_pos, patch_pos = self.random(1, 1, d), self.random(1, n, d)
        self.expected["embeddings.position_embeddings"] = np.concatenate([cls_pos, patch_pos], 1)
        grid = np.array([1, SIDE // PATCH, SIDE // PATCH, d])
        square = self.op(scope, "Reshape", [self.unnamed("Reshape", patch_pos), self.const(scope, grid)])
        back = self.op(
            scope, "Transpose", [self.op(scope, "Transpose", [square], perm=[0, 3, 1, 2])], perm=[0, 2, 3, 1]
        )
        rows = self.op(scope, "Reshape", [back, self.const(scope, np.array([1, n, d]))])
        positions = self.op(scope, "Concat", [self.unnamed("Concat", cls_pos), rows], axis=1)
        return self.op(scope, "Add", [tokens, positions])

    def heads_of(self, scope: str, x: str, perm: list[int]) -> str:
        size = self.hidden // self.heads
        shape = [self.const(scope, np.array([v])) for v in (1, 1 + (SIDE // PATCH) ** 2, self.heads, size)]
        return self.op(
            scope, "Transpose", [self.op(scope, "Reshape", [x, self.op(scope, "Concat", shape, axis=0)])], perm=perm
        )

    def attention(self, scope: str, x: str) -> str:
        inner, d, size = f"{scope}/attention/attention", self.hidden, self.hidden // self.heads
        key = self.heads_of(inner, self.linear(f"{inner}/key", x, d, d), [0, 2, 3, 1])
        value = self.heads_of(inner, self.linear(f"{inner}/value", x, d, d), [0, 2, 1, 3])
        query = self.heads_of(inner, self.linear(f"{inner}/query", x, d, d), [0, 2, 1, 3])
        scale = np.float32(size**-0.25)
        q, k = (self.op(inner, "Mul", [t, self.const(inner, scale)]) for t in (query, key))
        weights = self.op(inner, "Softmax", [self.op(inner, "MatMul", [q, k])], axis=-1)
        mixed = self.op(inner, "Transpose", [self.op(inner, "MatMul", [weights, value])], perm=[0, 2, 1, 3])
        tokens = 1 + (SIDE // PATCH) ** 2
        joined = self.op(inner, "Reshape", [mixed, self.const(inner, np.array([1, tokens, d]))])
        return self.linear(f"{scope}/attention/output/dense", joined, d, d)

    def mlp(self, scope: str, x: str) -> str:
        d, act = self.hidden, f"{scope}/mlp/activation"
        h = self.linear(f"{scope}/mlp/fc1", x, d, 4 * d)
        erf = self.op(act, "Erf", [self.op(act, "Div", [h, self.const(act, np.float32(math.sqrt(2)))])])
        gelu = self.op(
            act,
            "Mul",
            [
                self.op(act, "Mul", [h, self.op(act, "Add", [erf, self.const(act, np.float32(1))])]),
                self.const(act, np.float32(0.5)),
            ],
        )
        return self.linear(f"{scope}/mlp/fc2", gelu, 4 * d, d)

    def layer(self, i: int, x: str) -> str:
        scope, path = f"/backbone/encoder/layer.{i}", f"encoder.layer.{i}"
        attended = self.attention(scope, self.layer_norm(f"{scope}/norm1", x))
        scaled = self.op(
            f"{scope}/layer_scale1",
            "Mul",
            [attended, self.named(f"{path}.layer_scale1.lambda1", self.random(self.hidden))],
        )
        x = self.op(scope, "Add", [scaled, x])
        mixed = self.mlp(scope, self.layer_norm(f"{scope}/norm2", x))
        scaled = self.op(
            f"{scope}/layer_scale2",
            "Mul",
            [mixed, self.named(f"{path}.layer_scale2.lambda1", self.random(self.hidden))],
        )
        return self.op(scope, "Add", [scaled, x])

    def model(self) -> tuple[onnx.ModelProto, list[str]]:
        """The network: backbone (its hidden states and final norm are graph outputs too) and a head outside it."""
        states = [self.embeddings("input_image")]
        for i in range(self.layers):
            states.append(self.layer(i, states[-1]))
        states.append(self.layer_norm("/backbone/layernorm", states[-1]))
        head = np.ones((self.hidden, 1), np.float32)
        self.initialisers.append(numpy_helper.from_array(head, "decoder.proj.weight"))
        score = self.op("/decoder/proj", "MatMul", [states[-1], "decoder.proj.weight"])
        score = self.op("/decoder/head", "MatMul", [score, self.unnamed("MatMul", np.ones((1, 1), np.float32))])
        image = helper.make_tensor_value_info("input_image", TensorProto.FLOAT, [1, CHANNELS, SIDE, SIDE])
        outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in [score, *states]]
        graph = helper.make_graph(self.nodes, "saliency", [image], outputs, self.initialisers)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="pytorch"), states


def export(hidden: int = 8, heads: int = 2, layers: int = 2, eps: float = 1e-6) -> tuple[onnx.ModelProto, Export]:
    built = Export(hidden, heads, layers, eps)
    model, built.states = built.model()
    return model, built


def indexed(model: onnx.ModelProto) -> source.Graph:
    return source.index_graph(model, "backbone", "tiny graph")


def test_the_state_dict_is_the_graphs_tensors_named_and_linear_weights_transposed():
    model, built = export()
    state, record = source.backbone_tensors(indexed(model))
    assert sorted(state) == sorted(built.expected)
    for name, array in built.expected.items():
        np.testing.assert_array_equal(state[name], array, err_msg=name)
    assert record["linear_transposed"] == 2 * 6
    assert record["named"] == len(built.expected) - 2 * 6 - 1  # the position embeddings are joined from two parts
    assert record["left_out"] == {"anonymous": 1, "decoder": 1}


@pytest.mark.parametrize(("hidden", "heads", "layers", "eps"), [(8, 2, 2, 1e-6), (12, 3, 1, 1e-5)])
def test_the_config_is_read_from_the_graph(hidden, heads, layers, eps):
    model, _ = export(hidden, heads, layers, eps)
    g = indexed(model)
    config = source.infer_config(g, source.backbone_tensors(g)[0])
    assert config == {
        "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads, "mlp_ratio": 4,
        "hidden_act": "gelu", "layer_norm_eps": eps, "image_size": SIDE, "patch_size": PATCH,
        "num_channels": CHANNELS, "qkv_bias": True, "use_swiglu_ffn": False, "use_mask_token": False,
    }  # fmt: skip
    assert source.input_side(g) == SIDE


def installed_onnx(tmp_path: Path, monkeypatch, model: onnx.ModelProto) -> dict:
    """Install ``model`` as the file of a distribution (its metadata and RECORD on sys.path); its source entry."""
    site = tmp_path / "site"
    (site / "tiny_saliency" / "models").mkdir(parents=True)
    path = site / "tiny_saliency" / "models" / "tiny.onnx"
    onnx.save(model, path)
    info = site / "tiny_saliency-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tiny-saliency\nVersion: 0.1\nLicense: MIT\n"
        "Classifier: License :: OSI Approved :: MIT License\n"
    )
    (info / "RECORD").write_text("tiny_saliency/models/tiny.onnx,,\ntiny_saliency-0.1.dist-info/METADATA,,\n")
    monkeypatch.syspath_prepend(str(site))
    return {
        "distribution": "tiny-saliency",
        "file": "tiny_saliency/models/tiny.onnx",
        "sha256": {"tiny.onnx": sha256_file(path)},
        "lineage": "a tiny random backbone of this test",
    }


def test_the_folder_computes_what_the_graph_computes(tmp_path, monkeypatch):
    """Every hidden state of the written ``Dinov2Model`` (loaded strictly) equals the graph's on the same pixels,
    as onnx's reference evaluator computes them; the record names the file, its pin, version, licence, lineage."""
    from transformers import AutoImageProcessor, Dinov2Model

    model, built = export()
    entry = installed_onnx(tmp_path, monkeypatch, model)
    record = source.convert(entry, tmp_path / "folder")
    loaded, info = Dinov2Model.from_pretrained(tmp_path / "folder", output_loading_info=True)
    assert not any(info.values()), info
    pixels = np.random.default_rng(1).standard_normal((1, CHANNELS, SIDE, SIDE)).astype(np.float32)
    expected = ReferenceEvaluator(model).run(built.states, {"input_image": pixels})
    with torch.no_grad():
        out = loaded.eval()(torch.from_numpy(pixels), output_hidden_states=True)
    for want, got in zip(expected, [*out.hidden_states, out.last_hidden_state], strict=True):
        np.testing.assert_allclose(got.numpy(), want, atol=1e-5, rtol=1e-5)
    processor = AutoImageProcessor.from_pretrained(tmp_path / "folder")
    assert processor.crop_size == {"height": SIDE, "width": SIDE}
    assert list(processor.image_mean) == [0.485, 0.456, 0.406]
    assert record["file_sha256"] == entry["sha256"]["tiny.onnx"]
    assert (record["distribution"], record["distribution_version"]) == ("tiny-saliency", "0.1")
    assert record["distribution_license"]["license"] == "MIT"
    assert record["lineage"] == entry["lineage"]
    assert sorted(p.name for p in (tmp_path / "folder").iterdir()) == [
        "config.json", "model.safetensors", "preprocessor_config.json",
    ]  # fmt: skip


def test_a_file_off_its_pin_is_refused_before_it_is_read(tmp_path, monkeypatch):
    entry = installed_onnx(tmp_path, monkeypatch, export()[0])
    monkeypatch.setattr(source, "read_onnx", lambda *a: pytest.fail("the file was read before its pin was checked"))
    with pytest.raises(AcquisitionError, match="sha256 of tiny.onnx"):
        source.convert({**entry, "sha256": {"tiny.onnx": "0" * 64}}, tmp_path / "folder")
    with pytest.raises(AcquisitionError, match="no sha256 pin"):
        source.convert({**entry, "sha256": {}}, tmp_path / "folder")
    assert not (tmp_path / "folder").exists()


def test_a_source_without_lineage_or_distribution_is_refused(tmp_path, monkeypatch):
    entry = installed_onnx(tmp_path, monkeypatch, export()[0])
    with pytest.raises(AcquisitionError, match="no lineage"):
        source.convert({**entry, "lineage": ""}, tmp_path / "folder")
    with pytest.raises(AcquisitionError, match="'not-installed' is not installed"):
        source.convert({**entry, "distribution": "not-installed"}, tmp_path / "folder")
    with pytest.raises(AcquisitionError, match="has no file 'tiny_saliency/other.onnx' in its RECORD"):
        source.convert({**entry, "file": "tiny_saliency/other.onnx"}, tmp_path / "folder")


def test_a_backbone_tensor_of_no_known_role_is_refused():
    model, _ = export()
    stray = numpy_helper.from_array(np.ones(8, np.float32), "onnx::Add_77")
    model.graph.initializer.append(stray)
    model.graph.node.append(helper.make_node("Add", ["onnx::Add_77", "onnx::Add_77"], ["x"], name="/backbone/x/Add"))
    with pytest.raises(AcquisitionError, match=r"'onnx::Add_77' \(8,\) read by \['/backbone/x/Add'\]"):
        source.backbone_tensors(indexed(model))


def test_norms_of_different_epsilon_are_refused():
    model, _ = export()
    g = indexed(model)
    add = g.producers[g.node("layernorm/Sqrt").input[0]]
    eps = next(name for name in add.input if name in g.constants)
    g.constants[eps] = np.float32(1e-5)
    with pytest.raises(AcquisitionError, match="differ in epsilon"):
        source.layer_norm_eps(g, 2)


def test_a_tanh_gelu_is_refused():
    model, _ = export()
    for node in model.graph.node:
        if node.name == "/backbone/encoder/layer.1/mlp/activation/Erf":
            node.op_type = "Tanh"
    with pytest.raises(AcquisitionError, match="layer 1's MLP activation has ops"):
        source.activation(indexed(model), 2)


def test_tensors_outside_the_file_are_refused(tmp_path):
    model, _ = export()
    onnx.save(model, tmp_path / "split.onnx", save_as_external_data=True, size_threshold=0)
    with pytest.raises(AcquisitionError, match="outside the pinned file"):
        source.read_onnx(tmp_path / "split.onnx", "split.onnx")


def test_the_store_acquires_the_graph_as_an_onnx_source(tmp_path, monkeypatch):
    """``source: onnx`` through :func:`san.models.store.materialise`: the file's pin in the store's one check, the
    folder derived by ``convert``, recognised as DINOv2, recorded (lineage, file, pin) and loaded by the library
    computing what the graph computes, the ONNX file hashed once (the pin check's hash serves the record); a file off
    its pin is refused before it is read, leaving no folder."""
    import san.models.folders as folders
    from san.models.load import load_model
    from san.models.store import materialise

    model, built = export()
    entry = {"source": "onnx", **installed_onnx(tmp_path, monkeypatch, model)}
    hashed, sha256_file = [], folders.sha256_file
    monkeypatch.setattr(source, "sha256_file", lambda path: hashed.append(Path(path).name) or sha256_file(path))
    manifest = materialise("m", "dinov2", "pretrained", entry, tmp_path / "pretrained")
    assert hashed == ["tiny.onnx"]
    assert (manifest["source"], manifest["family"], manifest["lineage"]) == ("onnx", "dinov2", entry["lineage"])
    assert manifest["file_sha256"] == entry["sha256"]["tiny.onnx"] and "check" not in manifest
    assert manifest["architecture"]["num_hidden_layers"] == 2
    loaded = load_model(tmp_path / "pretrained", "dinov2", torch.float32)
    pixels = np.random.default_rng(2).standard_normal((1, CHANNELS, SIDE, SIDE)).astype(np.float32)
    (want,) = ReferenceEvaluator(model).run([built.states[-2]], {"input_image": pixels})
    with torch.no_grad():
        got = loaded(pixel_values=torch.from_numpy(pixels), output_hidden_states=True).hidden_states[-1]
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5, rtol=1e-5)
    monkeypatch.setattr(source, "read_onnx", lambda *a: pytest.fail("the file was read before its pin was checked"))
    with pytest.raises(AcquisitionError, match="sha256 of tiny.onnx"):
        materialise("m", "dinov2", "pretrained", {**entry, "sha256": {"tiny.onnx": "0" * 64}}, tmp_path / "off")
    assert not (tmp_path / "off").exists()
