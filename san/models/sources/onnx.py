"""Pretrained weights from an ONNX graph inside an installed distribution: a DINOv2 backbone as transformers'
``Dinov2Model``.

PyTorch's ONNX export of a network holding a transformers ``Dinov2Model`` as a submodule ``prefix`` (a saliency
network's ``backbone``, say) keeps the module paths in its names: the norms, biases, LayerScale factors, class token
and patch projection are initialisers named ``<prefix>.<parameter>``, and every node is named
``/<prefix>/<module path>/<op>``. Two kinds of tensors lose their names and are found through the node that reads
them. Each linear layer's weight is an anonymous ``onnx::MatMul_*`` initialiser, the right operand of the node
``/<prefix>/<linear>/MatMul``, stored as ``(in, out)`` (the graph computes ``x @ W``) and transposed here to
``nn.Linear``'s ``(out, in)``. The position embeddings are split by the traced interpolation into the class token's
row (read by a Concat of the embeddings) and the patch rows (read by their Reshape), and joined again here.

The architecture (a ``Dinov2Config``) is read from the graph, never assumed: width, channels and patch from the patch
projection, depth from the layer names, heads from the query's reshape, the MLP's width from its first linear,
LayerNorm's epsilon from the constant added under each norm's square root, the activation from the MLP's ops (``Erf``:
the exact GELU), the image size the positions were stored for from their count, no mask token (an inference graph
holds none) and no register tokens. LayerScale's initial value does not matter: its factors are loaded. Tensors
outside the prefix (the network's head, e.g. a convolutional decoder) are left out and counted. The folder written
holds ``config.json``, ``model.safetensors`` (loaded by ``Dinov2Model`` with no missing or unexpected key) and the
image processor of the graph's input: the DINOv2 family's reference processor (ImageNet mean and std, bicubic resize
of the shortest edge, centre crop; :data:`san.models.images.IMAGE_PROCESSORS`) at the graph's fixed input side.

The file is located through the distribution's metadata (its RECORD:
:func:`san.models.sources.package.distribution_file`), never by importing the package, and checked against its
sha256 pin before it is parsed; a graph whose tensors lie outside the pinned file (ONNX external data) is refused.
What the manifest records (:func:`convert`): the distribution, its version and declared licence, the file and its
sha256, the exporter, the architecture read, the tensors mapped and left out, and the weights' lineage as the source
states it. As a source of :mod:`san.models.store` (``source: onnx``, :func:`onnx_source`), the file's sha256 goes
through the store's one pin check and :func:`convert` is the step that derives the folder from it.
"""

from __future__ import annotations

import importlib.metadata
import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from san.models.entries import ONNX_FAMILY
from san.models.folders import AcquisitionError, sha256_file, verify_hashes
from san.models.images import IMAGE_PROCESSORS, PREPROCESSOR_FILE
from san.models.sources.fetched import Fetched
from san.models.sources.package import distribution_file

#: the submodule of the exported network that is the ``Dinov2Model``, unless the source names another
DEFAULT_PREFIX = "backbone"
#: the family whose reference image processor the folder gets (at the graph's input side)
FAMILY = ONNX_FAMILY


@dataclass(frozen=True)
class Graph:
    """An ONNX graph indexed for reading a backbone out of it: ``constants`` holds the initialisers and the outputs
    of Constant nodes by tensor name, ``consumers`` the (node, input index) pairs that read each tensor,
    ``producers`` the node that writes each tensor; ``prefix`` is the backbone's submodule, ``where`` names the file
    in errors."""

    nodes: dict[str, onnx.NodeProto]
    initialisers: dict[str, np.ndarray]
    constants: dict[str, np.ndarray]
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]]
    producers: dict[str, onnx.NodeProto]
    input_shape: tuple[int | str, ...]
    prefix: str
    where: str

    def node(self, path: str) -> onnx.NodeProto:
        """The node ``/<prefix>/<path>``; AcquisitionError naming it when the graph has none."""
        name = f"/{self.prefix}/{path}"
        if name not in self.nodes:
            raise AcquisitionError(f"{self.where}: the graph has no node {name!r} (not a transformers DINOv2 export)")
        return self.nodes[name]


def locate(source: Mapping[str, Any], verified: str | None = None) -> tuple[Path, dict[str, Any]]:
    """The ONNX file ``source['file']`` of distribution ``source['distribution']``, checked against its pin
    ``source['sha256'][<file name>]`` (required) before anything reads it, and what the manifest records of its
    origin: distribution, version, declared licence (its metadata's licence fields and files), file, sha256, size.
    ``verified``: the file's sha256 as the store's pin check already verified it (the file is then not hashed
    again)."""
    path = distribution_file(source["distribution"], source["file"])
    dist = importlib.metadata.distribution(source["distribution"])
    name = Path(source["file"]).name
    digest = verified or sha256_file(path)
    verify_hashes({name: digest}, source.get("sha256"), f"distribution {source['distribution']!r}", True)
    meta = dist.metadata
    licence = {
        "license": meta.get("License-Expression") or meta.get("License"),
        "classifiers": [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")],
        "license_files": meta.get_all("License-File") or [],
    }
    return path, {
        "distribution": meta["Name"],
        "distribution_version": dist.version,
        "distribution_license": licence,
        "file": source["file"],
        "file_sha256": digest,
        "file_bytes": path.stat().st_size,
    }


def read_onnx(path: Path, where: str) -> onnx.ModelProto:
    """The ONNX model in ``path`` (a protocol-buffer message: parsing it runs no code), every tensor inside the file
    itself; AcquisitionError naming ``where`` for a file that is no ONNX model or keeps tensors outside it."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - any parse failure of a foreign file
        raise AcquisitionError(f"{where}: not a readable ONNX model ({exc})") from exc
    external = [t.name for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if external:
        raise AcquisitionError(f"{where}: tensors {external[:3]} lie outside the pinned file (ONNX external data)")
    return model


def _constant_value(node: onnx.NodeProto) -> np.ndarray:
    """The value of a Constant node (a tensor attribute or a scalar or list attribute)."""
    (attr,) = node.attribute
    value = onnx.helper.get_attribute_value(attr)
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def index_graph(model: onnx.ModelProto, prefix: str, where: str) -> Graph:
    """Index ``model``'s graph (:class:`Graph`): its initialisers as arrays, its constants, who reads and writes
    each tensor, and the shape of its first input."""
    graph = model.graph
    initialisers = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    constants = dict(initialisers)
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    producers = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, index))
        for name in node.output:
            producers[name] = node
        if node.op_type == "Constant":
            constants[node.output[0]] = _constant_value(node)
    dims = graph.input[0].type.tensor_type.shape.dim if graph.input else []
    shape = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param for d in dims)
    nodes = {node.name: node for node in graph.node}
    return Graph(nodes, initialisers, constants, consumers, producers, shape, prefix, where)


def _anonymous(g: Graph, name: str, array: np.ndarray) -> tuple[str, str | None]:
    """What an initialiser without a module name is, from the node that reads it: ``linear`` (the right operand of
    ``/<prefix>/<linear>/MatMul``: the linear's weight, as ``(in, out)``), ``cls_position`` or ``patch_positions``
    (the two parts of the position embeddings), ``constant`` (an integer shape or axis operand) or ``head`` (read
    only outside the backbone); AcquisitionError for a float tensor of the backbone of no known role."""
    if not np.issubdtype(array.dtype, np.floating):
        return "constant", None
    uses = g.consumers.get(name, [])
    inside = [(node, index) for node, index in uses if node.name.startswith(f"/{g.prefix}/")]
    if uses and not inside:
        return "head", None
    if len(inside) == 1:
        node, index = inside[0]
        linear = re.fullmatch(rf"/{re.escape(g.prefix)}/(.+)/MatMul", node.name)
        if node.op_type == "MatMul" and index == 1 and linear and array.ndim == 2:
            return "linear", linear.group(1).replace("/", ".") + ".weight"
        if node.name.startswith(f"/{g.prefix}/embeddings/") and array.ndim == 3 and array.shape[0] == 1:
            if node.op_type == "Concat" and array.shape[1] == 1:
                return "cls_position", None
            if node.op_type == "Reshape" and index == 0:
                return "patch_positions", None
    readers = sorted({node.name for node, _ in uses})
    raise AcquisitionError(
        f"{g.where}: initialiser {name!r} {tuple(array.shape)} read by {readers} is no tensor of a DINOv2 backbone "
        "this reader knows (a linear's weight, the position embeddings)"
    )


def backbone_tensors(g: Graph) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The ``Dinov2Model`` state dict held by the graph: ``<prefix>.<name>`` initialisers under ``<name>``, the
    anonymous linear weights transposed under their linear's name, the position embeddings joined from their class
    and patch parts; what was mapped and left out (the initialisers outside the prefix, by top-level module)."""
    state: dict[str, np.ndarray] = {}
    parts: dict[str, list[np.ndarray]] = {"cls_position": [], "patch_positions": []}
    counts: Counter[str] = Counter()
    left_out: Counter[str] = Counter()
    for name, array in g.initialisers.items():
        if name.startswith(f"{g.prefix}."):
            state[name[len(g.prefix) + 1 :]] = array
            counts["named"] += 1
            continue
        if "::" not in name:  # a named tensor of another module: the network's head
            left_out[name.split(".")[0]] += 1
            continue
        kind, key = _anonymous(g, name, array)
        counts[kind] += 1
        if kind == "linear":
            if key in state:
                raise AcquisitionError(f"{g.where}: two initialisers are read by the node of {key!r}")
            state[key] = np.ascontiguousarray(array.T)
        elif kind in parts:
            parts[kind].append(array)
        elif kind == "head":
            left_out["anonymous"] += 1
    if [len(v) for v in parts.values()] != [1, 1]:
        found = {k: len(v) for k, v in parts.items()}
        raise AcquisitionError(f"{g.where}: expected one class and one patch part of the positions, found {found}")
    state["embeddings.position_embeddings"] = np.concatenate([parts["cls_position"][0], parts["patch_positions"][0]], 1)
    record = {
        "named": counts["named"],
        "linear_transposed": counts["linear"],
        "position_embeddings": "joined from the class token's row and the patch rows",
        "left_out": dict(sorted(left_out.items())),
    }
    return state, record


def _static_values(g: Graph, name: str) -> list[int | None]:
    """The values of an integer shape operand, None where a value is computed at run time (a Concat of constants
    and unsqueezed run-time sizes, as PyTorch exports a ``view``)."""
    if name in g.constants:
        return [int(v) for v in g.constants[name].ravel()]
    node = g.producers.get(name)
    if node is not None and node.op_type == "Concat":
        return [v for part in node.input for v in _static_values(g, part)]
    return [None]


def head_count(g: Graph, layers: int, hidden: int) -> int:
    """The number of attention heads: the last two sizes of the reshape of every layer's query into heads
    (``(..., heads, head size)``), the same in every layer, whose product is the width."""
    found = set()
    for i in range(layers):
        query = g.node(f"encoder/layer.{i}/attention/attention/query/Add").output[0]
        reshapes = [node for node, _ in g.consumers.get(query, []) if node.op_type == "Reshape"]
        if len(reshapes) != 1:
            raise AcquisitionError(f"{g.where}: layer {i}'s query is not reshaped into heads once")
        found.add(tuple(_static_values(g, reshapes[0].input[1])[-2:]))
    if len(found) != 1 or None in next(iter(found)) or math.prod(next(iter(found))) != hidden:
        raise AcquisitionError(f"{g.where}: the queries' head shapes {sorted(found, key=str)} do not split {hidden}")
    return int(next(iter(found))[0])


def _norm_eps(g: Graph, scope: str) -> float:
    """LayerNorm's epsilon under ``scope``: the one constant added to the variance under its square root, as the
    shortest decimal that rounds to the graph's float32 value."""
    add = g.producers.get(g.node(f"{scope}/Sqrt").input[0])
    operands = add.input if add is not None and add.op_type == "Add" else ()
    values = [g.constants[i] for i in operands if i in g.constants and g.constants[i].size == 1]
    if len(values) != 1:
        raise AcquisitionError(f"{g.where}: /{g.prefix}/{scope} does not add one constant under its square root")
    return float(np.format_float_scientific(values[0].reshape(-1)[0], unique=True))


def layer_norm_eps(g: Graph, layers: int) -> float:
    """The epsilon of every LayerNorm of the backbone (both of each layer's, the final one), which must agree."""
    scopes = [f"encoder/layer.{i}/{norm}" for i in range(layers) for norm in ("norm1", "norm2")] + ["layernorm"]
    found = {scope: _norm_eps(g, scope) for scope in scopes}
    if len(set(found.values())) != 1:
        raise AcquisitionError(f"{g.where}: the LayerNorms differ in epsilon: {sorted(set(found.values()))}")
    return found["layernorm"]


def activation(g: Graph, layers: int) -> str:
    """The MLP's activation in transformers' name: the exact GELU ``x / 2 * (1 + erf(x / sqrt(2)))`` in every layer
    (its ops and the divisor sqrt(2)), or AcquisitionError naming what was found."""
    for i in range(layers):
        scope = f"/{g.prefix}/encoder/layer.{i}/mlp/activation/"
        nodes = [node for name, node in g.nodes.items() if name.startswith(scope) and node.op_type != "Constant"]
        ops = sorted({node.op_type for node in nodes})
        divisors = [g.constants[x] for n in nodes if n.op_type == "Div" for x in n.input if x in g.constants]
        if ops != ["Add", "Div", "Erf", "Mul"] or [float(d) for d in divisors] != [float(np.float32(math.sqrt(2)))]:
            raise AcquisitionError(
                f"{g.where}: layer {i}'s MLP activation has ops {ops} and divisors {divisors}, not the exact GELU's"
            )
    return "gelu"


def layer_count(g: Graph) -> int:
    """The number of layers: the indices ``<prefix>.encoder.layer.<i>.`` of the named initialisers, 0 to L - 1."""
    pattern = re.compile(rf"{re.escape(g.prefix)}\.encoder\.layer\.(\d+)\.")
    found = {int(m.group(1)) for name in g.initialisers if (m := pattern.match(name))}
    if not found or found != set(range(len(found))):
        raise AcquisitionError(f"{g.where}: the layers named in the graph are {sorted(found)}, not 0 to L - 1")
    return len(found)


def patch_embedding(g: Graph) -> tuple[int, int, int]:
    """Width, channels and patch side of the patch projection: a square convolution whose stride is its kernel."""
    conv = g.node("embeddings/patch_embeddings/projection/Conv")
    attrs = {
        a.name: list(onnx.helper.get_attribute_value(a))
        for a in conv.attribute
        if a.name in ("kernel_shape", "strides")
    }
    kernel = attrs.get("kernel_shape", [])
    if len(set(kernel)) != 1 or attrs.get("strides") != kernel:
        raise AcquisitionError(
            f"{g.where}: the patch projection's kernel {kernel} and strides differ or are not square"
        )
    hidden, channels = g.constants[conv.input[1]].shape[:2]
    return int(hidden), int(channels), int(kernel[0])


def infer_config(g: Graph, state: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The ``Dinov2Config`` settings of the backbone, read from the graph and its tensors (module docstring); a
    graph with register tokens (``Dinov2WithRegistersModel``'s) is refused."""
    if "embeddings.register_tokens" in state:
        raise AcquisitionError(f"{g.where}: the backbone has register tokens; this reader makes a Dinov2Model")
    hidden, channels, patch = patch_embedding(g)
    layers = layer_count(g)
    positions = state["embeddings.position_embeddings"].shape[1] - 1
    side = math.isqrt(positions)
    if side * side != positions:
        raise AcquisitionError(f"{g.where}: {positions} patch positions are no square grid")
    mlp = state["encoder.layer.0.mlp.fc1.weight"].shape[0] if "encoder.layer.0.mlp.fc1.weight" in state else None
    if mlp is None:
        raise AcquisitionError(f"{g.where}: the backbone has no MLP fc1 (a SwiGLU MLP is not read)")
    ratio = mlp / hidden
    return {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": head_count(g, layers, hidden),
        "mlp_ratio": int(ratio) if ratio.is_integer() else ratio,
        "hidden_act": activation(g, layers),
        "layer_norm_eps": layer_norm_eps(g, layers),
        "image_size": side * patch,
        "patch_size": patch,
        "num_channels": channels,
        "qkv_bias": "encoder.layer.0.attention.attention.query.bias" in state,
        "use_swiglu_ffn": False,
        "use_mask_token": False,
    }


def input_side(g: Graph) -> int:
    """The side in pixels of the graph's square image input ``(batch, channels, side, side)``."""
    shape = g.input_shape
    if len(shape) != 4 or not isinstance(shape[2], int) or shape[2] != shape[3] or shape[2] <= 0:
        raise AcquisitionError(f"{g.where}: the graph's input {shape} is no fixed square image batch")
    return int(shape[2])


def write_folder(config: Mapping[str, Any], state: Mapping[str, np.ndarray], folder: Path) -> None:
    """Write ``config.json`` and ``model.safetensors`` (``state`` under its names, the layout of transformers'
    DINOv2 checkpoints) into ``folder``, then load them with ``Dinov2Model.from_pretrained``: the tensors must fill
    exactly the model's parameters (AcquisitionError naming the missing, unexpected and misshapen keys otherwise)."""
    import torch
    from safetensors.torch import save_file
    from transformers import Dinov2Config, Dinov2Model

    Dinov2Config(**config, architectures=[Dinov2Model.__name__]).save_pretrained(folder)
    tensors = {name: torch.from_numpy(np.array(array)) for name, array in sorted(state.items())}
    save_file(tensors, Path(folder) / "model.safetensors", metadata={"format": "pt"})
    _, info = Dinov2Model.from_pretrained(folder, use_safetensors=True, output_loading_info=True)
    problems = {kind: [str(k) for k in keys][:5] for kind, keys in info.items() if keys}
    if problems:
        raise AcquisitionError(f"the backbone's tensors do not fill a Dinov2Model of the graph's config: {problems}")


def write_processor(folder: Path, side: int) -> str:
    """Write the DINOv2 family's reference image processor, resizing the shortest edge to ``side`` and cropping the
    centre ``side`` x ``side``, into ``folder`` (``AutoImageProcessor`` reads it); what the manifest records."""
    import transformers

    class_name, settings = IMAGE_PROCESSORS[FAMILY]
    square = {"height": side, "width": side}
    settings = {**settings, "size": {"shortest_edge": side}, "crop_size": square}
    getattr(transformers, class_name)(**settings).save_pretrained(folder)
    mean, std, resample = settings["image_mean"], settings["image_std"], settings["resample"]
    return (
        f"{PREPROCESSOR_FILE}: {class_name} of the DINOv2 family's reference checkpoint (mean {mean}, std {std}, "
        f"resample {resample}), its shortest edge resized to the graph's {side}-pixel input and the centre {side} x "
        f"{side} cropped"
    )


def convert(source: Mapping[str, Any], folder: str | Path, verified: str | None = None) -> dict[str, Any]:
    """Write the model folder of the DINOv2 backbone in the ONNX file of ``source`` into ``folder``: ``config.json``,
    ``model.safetensors`` and ``preprocessor_config.json``. ``source``: ``distribution`` and ``file`` (the file in
    its RECORD), ``sha256`` (``{<file name>: <sha256>}``, checked before the file is read), ``lineage`` (what the
    weights are, recorded as stated) and optionally ``prefix`` (the backbone's submodule, :data:`DEFAULT_PREFIX`).
    ``verified``: the file's sha256 already checked against that pin by the store (not computed again). Returns what
    the manifest records (module docstring)."""
    where = f"{source.get('file')!r} of distribution {source.get('distribution')!r}"
    if not source.get("lineage"):
        raise AcquisitionError(f"{where}: the source states no lineage (what the weights are and where they come from)")
    path, origin = locate(source, verified)
    model = read_onnx(path, where)
    g = index_graph(model, source.get("prefix", DEFAULT_PREFIX), where)
    state, tensors = backbone_tensors(g)
    config = infer_config(g, state)
    side = input_side(g)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_folder(config, state, folder)
    return {
        **origin,
        "lineage": source["lineage"],
        "onnx": {
            "producer": f"{model.producer_name} {model.producer_version}".strip(),
            "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
            "prefix": g.prefix,
        },
        "architecture": config,
        "tensors": tensors,
        "image_processor": write_processor(folder, side),
        "converted": (
            f"config.json and model.safetensors were written from the graph's {g.prefix!r} backbone by the "
            "acquisition job (float32 as stored): named initialisers renamed, the linear weights (anonymous MatMul "
            "initialisers) mapped through the node that reads them and transposed, the position embeddings joined "
            "from their class and patch parts, the configuration read from the graph; no mask token (none is in "
            "the graph)"
        ),
    }


def onnx_source(source: Mapping[str, Any], family: str | None, out: Path, key: str) -> Fetched:
    """The ``onnx`` source of :func:`san.models.store.fetch_source`: the ONNX file ``source['file']`` of the installed
    distribution ``source['distribution']``, its sha256 handed to the store's one pin check (``source['sha256']``:
    the file's pin, required), and :func:`convert` as the step that derives the model folder from it (the manifest
    records what :func:`convert` returns: origin, lineage, architecture, tensors, image processor). ``family``:
    the configured family (the folder holds a ``Dinov2Model``; None: recognised from its config.json). The file is
    hashed once: the store checks that sha256 against the pin, and :func:`convert` takes it as verified."""
    path = distribution_file(source["distribution"], source["file"])
    digest = sha256_file(path)
    return Fetched(
        "onnx",
        f"{source['file']!r} of distribution {source['distribution']!r}",
        {},
        family,
        digests={Path(source["file"]).name: digest},
        pins=source["sha256"],
        require_all=True,
        derive=lambda folder: (convert(source, folder, digest), None),
    )
