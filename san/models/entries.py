"""The model entries of the config (``models.<name>``): their weight sets, their explicit architecture and the
checks of both against the family table (:mod:`san.models.spec`), free of torch (the workflow reads them while it
parses the rules).

An architecture config (``models.<name>.init.config``) is checked against the fields of the family's transformers
config class, read from its source without importing transformers (:func:`architecture_fields`): every key a field,
of its type, counts positive, the width divisible into the heads. The ``models`` section is checked against the
table and ``text`` (:func:`check_models`): a family of the table, weights to analyse, enough position embeddings,
decoder-only weights of a causal family.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
import operator
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.core.config import ConfigError
from san.models.local import check_local, folder_text_config
from san.models.spec import CAUSAL, FAMILIES, FAMILY_TABLE, row

#: architecture keys that count things (layers, heads, widths, positions): positive integers
POSITIVE_KEYS = frozenset(
    {
        "num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size", "max_position_embeddings",
        "type_vocab_size", "embedding_size", "num_hidden_groups", "inner_group_num",
        "n_layer", "n_head", "d_model", "d_inner", "n_embd", "n_positions", "n_inner", "num_key_value_heads",
        "head_dim", "relative_attention_num_buckets", "sliding_window", "num_layers", "num_heads", "d_kv", "d_ff",
        "encoder_layers", "encoder_attention_heads", "encoder_ffn_dim",
    }
)  # fmt: skip
#: keys of a saved transformers config that are not fields of its class
_SAVED_KEYS = {"_name_or_path": "str", "model_type": "str", "output_attentions": "bool"}
#: private fields of a backbone config class and the names its config.json saves them under
_BACKBONE_KEYS = {"_out_features": "out_features", "_out_indices": "out_indices"}


_ARITHMETIC = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Pow: operator.pow,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv,
}  # fmt: skip


def _constant(node: ast.expr) -> Any:
    """The value of a literal default, or of arithmetic on numeric literals (Mistral's ``4096 * 32``); None for
    anything else (a call, a name)."""
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _constant(node.left), _constant(node.right)
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (left, right))
        return _ARITHMETIC[type(node.op)](left, right) if numbers else None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _class_fields(source: Path, class_name: str, derived: bool = False) -> dict[str, tuple[str, Any]]:
    """The annotated fields of a class in a Python source file, ``{name: (annotation, default)}``, read from its
    syntax tree (the module is not executed: transformers' config modules import torch). A field that the class's
    ``attribute_map`` renames is saved under its target name (Qwen3-MoE's ``num_experts`` as
    ``num_local_experts``): both names are fields. ``derived``: also the attributes ``__post_init__`` sets (type and
    default unknown; DeepSeek-V3's ``qk_head_dim``), which a saved config holds."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            fields, renames = {}, {}
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and [ast.unparse(t) for t in stmt.targets] == ["attribute_map"]:
                    renames = _constant(stmt.value) or {}
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                annotation = ast.unparse(stmt.annotation)
                if "ClassVar" in annotation:
                    continue
                default = _constant(stmt.value) if stmt.value is not None else None
                fields[stmt.target.id] = (annotation, default)
            fields |= {target: fields[alias] for alias, target in renames.items() if alias in fields}
            if derived:
                fields = {**dict.fromkeys(_post_init_attributes(node), ("", None)), **fields}
            return fields
    raise LookupError(f"class {class_name} not found in {source}")


def _post_init_attributes(cls: ast.ClassDef) -> list[str]:
    """The names ``self.<name> = ...`` assigns at the top level of a class's ``__post_init__``."""
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__post_init__":
            return [
                target.attr
                for assign in stmt.body
                if isinstance(assign, ast.Assign)
                for target in assign.targets
                if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "self"
            ]
    return []


@functools.cache
def architecture_fields(family: str) -> dict[str, tuple[str, Any]] | None:
    """The keys a ``family`` architecture config accepts, ``{key: (type annotation, default)}``: the fields of the
    installed transformers config class (e.g. ``BertConfig``) and of its base ``PreTrainedConfig``, read from their
    source without importing transformers (which imports torch). None when transformers is not installed or its
    source is laid out differently; the acquisition job then checks the keys against the class itself."""
    try:
        spec = importlib.util.find_spec("transformers")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    module, class_name = FAMILY_TABLE[family].config_module, FAMILY_TABLE[family].config_class
    try:
        base = _class_fields(root / "configuration_utils.py", "PreTrainedConfig")
        own = _class_fields(root / module, class_name, derived=True)
    except (OSError, SyntaxError, LookupError):
        return None
    if any(key in own for key in _BACKBONE_KEYS):  # a backbone config (DINOv2) saves these under public names
        own = {_BACKBONE_KEYS.get(k, k): v for k, v in own.items()} | {"stage_names": ("list[str] | None", None)}
    return {**{k: (t, None) for k, t in _SAVED_KEYS.items()}, **base, **own}


def arch_value(family: str, arch: dict[str, Any], key: str) -> Any:
    """A key of an architecture config: its configured value, else the config class's default (None if unknown)."""
    if key in arch:
        return arch[key]
    fields = architecture_fields(family)
    return fields[key][1] if fields and key in fields else None


def depth_and_heads(family: str, arch: dict[str, Any]) -> tuple[int, int]:
    """Layers and heads per layer of a configured transformers architecture (``models.<name>.init.config``; a key
    left out takes the config class's default)."""
    entry = row(family)
    layers, heads = entry.layers_key, entry.heads_key
    return int(arch_value(family, arch, layers)), int(arch_value(family, arch, heads))


def _type_problem(annotation: str, value: Any) -> str | None:
    """Why ``value`` does not fit a simple field annotation (``int``, ``float | int``, ``bool``, ``str``, each
    optionally ``| None``); None when it fits or the annotation is not a simple one."""
    kinds = {part.strip() for part in annotation.split("|")}
    if value is None:
        return None if "None" in kinds else "null is not allowed"
    kinds.discard("None")
    is_bool, is_int = isinstance(value, bool), isinstance(value, int) and not isinstance(value, bool)
    is_number = is_int or (isinstance(value, float) and not is_bool)
    checks = {"int": is_int, "float": is_number, "bool": is_bool, "str": isinstance(value, str)}
    if not kinds or not kinds <= set(checks):
        return None  # lists, dicts, literals: left to the config class
    if any(checks[k] for k in kinds):
        return None
    return f"{value!r} is not of type {' or '.join(sorted(kinds))}"


def check_architecture(name: str, family: str, arch: dict[str, Any]) -> None:
    """``models.<name>.init.config``: one stack of self-attention blocks (no encoder-decoder, no cross-attention, no
    ``is_decoder`` in a bidirectional family); every key is a field of the family's transformers config class, of
    its type, counts are positive and the width divides into the heads (unless the row's ``head_width_key`` gives
    each head's width); raises :class:`ConfigError` naming the key."""
    where = f"models.{name}.init.config"
    for key in ("is_encoder_decoder", "add_cross_attention"):
        if arch.get(key):
            raise ConfigError(
                f"config key '{where}.{key}': the variants are defined for one stack of self-attention blocks, not "
                "for an encoder-decoder model or the decoder of one"
            )
    if arch.get("is_decoder") and not FAMILY_TABLE[family].causal:
        raise ConfigError(
            f"config key '{where}.is_decoder': family {family!r} runs bidirectional attention; a causal decoder "
            "of its blocks would be analysed as bidirectional"
        )
    fields = architecture_fields(family)
    if fields is not None:
        unknown = sorted(set(arch) - set(fields))
        if unknown:
            close = {k: difflib.get_close_matches(k, list(fields), n=1) for k in unknown}
            hints = "; ".join(f"{k!r}: did you mean {m[0]!r}?" for k, m in close.items() if m)
            raise ConfigError(
                f"config key '{where}': unknown architecture key(s) {unknown} for family {family!r} (not fields of "
                f"transformers' {FAMILY_TABLE[family].config_class})" + (f"; {hints}" if hints else "")
            )
        for key, value in arch.items():
            problem = _type_problem(fields[key][0], value)
            if problem:
                raise ConfigError(f"config key '{where}.{key}': {problem}")
    for key, value in arch.items():
        if key in POSITIVE_KEYS and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise ConfigError(f"config key '{where}.{key}': {value!r} is not a positive integer")
    width_key, heads_key = FAMILY_TABLE[family].width_key, FAMILY_TABLE[family].heads_key
    width, heads = arch_value(family, arch, width_key), arch_value(family, arch, heads_key)
    if FAMILY_TABLE[family].head_width_key is not None:
        return  # each head's width is a key of its own: the width need not divide into the heads
    if isinstance(width, int) and isinstance(heads, int) and heads > 0 and width % heads:
        raise ConfigError(f"config key '{where}': {width_key} {width} is not divisible by {heads_key} {heads}")


def init_entry(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``init`` weights' entry of model entry ``spec``: as configured; ``{"seed": 0}`` (a random
    initialisation of the pretrained weights' config.json architecture) when the entry has no ``init``; None for
    ``init: null`` (no init weights)."""
    if "init" not in spec:
        return {"seed": 0}
    return None if spec["init"] is None else dict(spec["init"])


def weight_sets(spec: Mapping[str, Any]) -> list[str]:
    """The weight sets of model entry ``spec``, in :data:`WEIGHT_ORDER`: ``init`` unless ``init: null``,
    ``pretrained`` when a source is given."""
    return (["init"] if init_entry(spec) is not None else []) + (["pretrained"] if spec.get("pretrained") else [])


#: the weight sets, in the order every result lists them
WEIGHT_ORDER = ("init", "pretrained")


def explicit_architecture(spec: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """``(family, init.config)`` of an entry whose architecture the config states (known while the workflow parses
    its rules); None for an entry whose architecture is its pretrained weights' config.json (known only after
    acquisition)."""
    init = init_entry(spec)
    if spec.get("family") is None or init is None or "config" not in init:
        return None
    return spec["family"], init["config"]


def check_models(config: dict[str, Any]) -> None:
    """Cross-checks of the ``models`` section against ``text``: a given family is a row of the table; an entry has
    weights to analyse; an explicit
    architecture names its family, is valid for it (:func:`check_architecture`) and has position embeddings for
    ``text.seq_len`` tokens; an init without architecture has pretrained weights to take it from; only causal
    decoder families take decoder-only pretrained weights; a local folder is recognised, pinned and long enough
    (:func:`san.models.local.check_local`); raises :class:`ConfigError` naming the key. (Another entry without
    ``family`` is recognised from its config.json by its acquisition job, the first job of the model.)"""
    text = config.get("text", {})
    for name, spec in config.get("models", {}).items():
        if spec.get("family") is not None and spec["family"] not in FAMILY_TABLE:
            close = difflib.get_close_matches(str(spec["family"]), FAMILIES, n=1)
            raise ConfigError(
                f"config key 'models.{name}.family': {spec['family']!r} is no family of the table "
                f"(san/models/spec.py); expected one of {list(FAMILIES)}"
                + (f"; did you mean {close[0]!r}?" if close else "")
            )
        init = init_entry(spec)
        if init is None and not spec.get("pretrained"):
            raise ConfigError(f"config key 'models.{name}': init is null and there is no pretrained source: no weights")
        if init is not None and "config" in init and spec.get("family") is None:
            raise ConfigError(
                f"config key 'models.{name}.init.config': an explicit architecture needs 'models.{name}.family' "
                f"(the transformers config class its keys belong to; one of {list(FAMILIES)})"
            )
        if init is not None and "config" not in init and not spec.get("pretrained"):
            raise ConfigError(
                f"config key 'models.{name}.init': without 'config', the init weights are a random initialisation of "
                f"the pretrained weights' architecture, but 'models.{name}.pretrained' gives no source; give "
                f"'models.{name}.init.config' and 'models.{name}.family'"
            )
        explicit = explicit_architecture(spec)
        if explicit is not None:
            check_architecture(name, *explicit)
            _check_positions(name, *explicit, text.get("seq_len"))
        _check_decoder_only(name, spec)
        _check_onnx(name, spec)
        recognition = check_local(name, spec)
        if recognition is not None:
            _check_folder_positions(name, spec, recognition.family, text.get("seq_len"))


def _check_positions(name: str, family: str, arch: dict[str, Any], seq_len: Any) -> None:
    """Model ``name`` embeds ``text.seq_len`` tokens: its usable position embeddings (if limited) suffice."""
    position_key = FAMILY_TABLE[family].position_key
    positions = arch_value(family, arch, position_key) if position_key else None
    offset = FAMILY_TABLE[family].position_offset
    if isinstance(positions, int) and isinstance(seq_len, int) and seq_len + offset > positions:
        raise ConfigError(
            f"config key 'text.seq_len': {seq_len} tokens exceed the {positions - offset} usable position "
            f"embeddings of model {name!r} (models.{name}.init.config.{position_key})"
        )


def _check_folder_positions(name: str, spec: Mapping[str, Any], family: str, seq_len: Any) -> None:
    """Local model ``name`` (of ``family``, recognised from its folder) embeds ``text.seq_len`` tokens: the position
    embeddings its ``config.json`` sets (the family row's ``position_key``; the config class's default when the file
    leaves it out) suffice."""
    position_key, offset = FAMILY_TABLE[family].position_key, FAMILY_TABLE[family].position_offset
    if position_key is None:
        return
    positions = arch_value(family, folder_text_config(spec), position_key)
    if isinstance(positions, int) and isinstance(seq_len, int) and seq_len + offset > positions:
        path = Path(spec["pretrained"]["path"]).expanduser() / "config.json"
        raise ConfigError(
            f"config key 'text.seq_len': {seq_len} tokens exceed the {positions - offset} usable position "
            f"embeddings of model {name!r} ({position_key}: {positions} in {path}); lower text.seq_len to "
            f"{positions - offset} or less"
        )


#: the family of the model folder that an ``onnx`` source writes (a ``Dinov2Model``: san.models.sources.onnx)
ONNX_FAMILY = "dinov2"


def _check_onnx(name: str, spec: dict[str, Any]) -> None:
    """An ``onnx`` source writes a DINOv2 model (its family, when given, is that) and pins its file by the file's
    name."""
    pretrained = spec.get("pretrained") or {}
    if pretrained.get("source") != "onnx":
        return
    if spec.get("family") not in (None, ONNX_FAMILY):
        raise ConfigError(
            f"config key 'models.{name}.family': an onnx source writes a {ONNX_FAMILY!r} model (a transformers "
            f"Dinov2Model), but the family is {spec['family']!r}"
        )
    file_name = Path(pretrained["file"]).name
    if file_name not in pretrained["sha256"]:
        raise ConfigError(
            f"config key 'models.{name}.pretrained.sha256': no pin for the ONNX file {file_name!r} "
            f"(pinned: {sorted(pretrained['sha256'])})"
        )


def _check_decoder_only(name: str, spec: dict[str, Any]) -> None:
    """A continuation check or GGUF weights (decoder-only) need a causal family; GGUF weights a given family (the
    dequantisation loads the file as that family's causal LM before any config.json exists)."""
    pretrained = spec.get("pretrained") or {}
    check = (pretrained.get("check") or {}).get("kind")
    gguf = pretrained.get("format") == "gguf"
    if gguf and spec.get("family") is None:
        raise ConfigError(f"config key 'models.{name}.family': GGUF weights need the family given (a causal decoder)")
    decoder_only = check == "continuation" or gguf
    if decoder_only and spec.get("family") is not None and spec["family"] not in CAUSAL:
        what = "check kind 'continuation'" if check == "continuation" else "GGUF weights"
        raise ConfigError(
            f"config key 'models.{name}.pretrained': {what} need a causal decoder family "
            f"({sorted(CAUSAL)}), but the family is {spec['family']!r}"
        )
