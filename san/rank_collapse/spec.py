"""Names and constants of the rank-collapse experiment (the paper's Sec. 4, Fig. 2, and its appendix), free of torch.

The one place that names the architecture variants (the paper's ablations), the model families with the config
keys of their depth and width, and the weight sets; the schema, the ablations, the figures and the report read
them from here (a test keeps the schema's enums in step). Importable without torch: the workflow reads it while it
parses the rules.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
from pathlib import Path
from typing import Any

from san.core.config import ConfigError

#: the paper's four variants (Fig. 2): pure attention, attention + MLP, attention + skip, the unmodified model
VARIANTS = ("SAN", "SAN+MLP", "SAN+skip", "transformer")
#: the variants without skip connections (the theorem's setting) and those with them
PURE_ATTENTION = ("SAN", "SAN+MLP")
WITH_SKIP = ("SAN+skip", "transformer")
#: weight sets of a model: random initialisation from its architecture config, and pretrained weights
WEIGHTS = ("init", "pretrained")
#: model families and the keys of their layers and heads in a transformers architecture config
ARCHITECTURE_KEYS = {
    "bert": ("num_hidden_layers", "num_attention_heads"),
    "albert": ("num_hidden_layers", "num_attention_heads"),
    "xlnet": ("n_layer", "n_head"),
}
FAMILIES = tuple(ARCHITECTURE_KEYS)
#: each family's width key, and the transformers module and config class that define its architecture keys
WIDTH_KEYS = {"bert": "hidden_size", "albert": "hidden_size", "xlnet": "d_model"}
CONFIG_CLASSES = {
    "bert": ("models/bert/configuration_bert.py", "BertConfig"),
    "albert": ("models/albert/configuration_albert.py", "AlbertConfig"),
    "xlnet": ("models/xlnet/configuration_xlnet.py", "XLNetConfig"),
}
#: architecture keys that count things (layers, heads, widths, positions): positive integers
POSITIVE_KEYS = frozenset(
    {
        "num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size", "max_position_embeddings",
        "type_vocab_size", "embedding_size", "num_hidden_groups", "inner_group_num",
        "n_layer", "n_head", "d_model", "d_inner",
    }
)  # fmt: skip
#: keys of a saved transformers config that are not fields of its class
_SAVED_KEYS = {"_name_or_path": "str", "model_type": "str", "output_attentions": "bool"}


def _class_fields(source: Path, class_name: str) -> dict[str, tuple[str, Any]]:
    """The annotated fields of a class in a Python source file, ``{name: (annotation, default)}``, read from its
    syntax tree (the module is not executed: transformers' config modules import torch)."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            fields = {}
            for stmt in node.body:
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                annotation = ast.unparse(stmt.annotation)
                if "ClassVar" in annotation:
                    continue
                try:
                    default = ast.literal_eval(stmt.value) if stmt.value is not None else None
                except ValueError:
                    default = None
                fields[stmt.target.id] = (annotation, default)
            return fields
    raise LookupError(f"class {class_name} not found in {source}")


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
    module, class_name = CONFIG_CLASSES[family]
    try:
        base = _class_fields(root / "configuration_utils.py", "PreTrainedConfig")
        own = _class_fields(root / module, class_name)
    except (OSError, SyntaxError, LookupError):
        return None
    return {**{k: (t, None) for k, t in _SAVED_KEYS.items()}, **base, **own}


def _arch_value(family: str, arch: dict[str, Any], key: str) -> Any:
    """A key of an architecture config: its configured value, else the config class's default (None if unknown)."""
    if key in arch:
        return arch[key]
    fields = architecture_fields(family)
    return fields[key][1] if fields and key in fields else None


def depth_and_heads(family: str, arch: dict[str, Any]) -> tuple[int, int]:
    """Layers and heads per layer of a configured transformers architecture (``models.<name>.init.config``; a key
    left out takes the config class's default)."""
    if family not in ARCHITECTURE_KEYS:
        raise ValueError(f"unknown model family {family!r}; expected one of {list(FAMILIES)}")
    layers, heads = ARCHITECTURE_KEYS[family]
    return int(_arch_value(family, arch, layers)), int(_arch_value(family, arch, heads))


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
    """``models.<name>.init.config``: every key is a field of the family's transformers config class, of its type,
    counts are positive and the width divides into the heads; raises :class:`ConfigError` naming the key."""
    where = f"models.{name}.init.config"
    fields = architecture_fields(family)
    if fields is not None:
        unknown = sorted(set(arch) - set(fields))
        if unknown:
            close = {k: difflib.get_close_matches(k, list(fields), n=1) for k in unknown}
            hints = "; ".join(f"{k!r}: did you mean {m[0]!r}?" for k, m in close.items() if m)
            raise ConfigError(
                f"config key '{where}': unknown architecture key(s) {unknown} for family {family!r} (not fields of "
                f"transformers' {CONFIG_CLASSES[family][1]})" + (f"; {hints}" if hints else "")
            )
        for key, value in arch.items():
            problem = _type_problem(fields[key][0], value)
            if problem:
                raise ConfigError(f"config key '{where}.{key}': {problem}")
    for key, value in arch.items():
        if key in POSITIVE_KEYS and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise ConfigError(f"config key '{where}.{key}': {value!r} is not a positive integer")
    width_key, heads_key = WIDTH_KEYS[family], ARCHITECTURE_KEYS[family][1]
    width, heads = _arch_value(family, arch, width_key), _arch_value(family, arch, heads_key)
    if isinstance(width, int) and isinstance(heads, int) and heads > 0 and width % heads:
        raise ConfigError(f"config key '{where}': {width_key} {width} is not divisible by {heads_key} {heads}")


def check_config(config: dict[str, Any]) -> None:
    """Cross-checks of the ``models``, ``text``, ``rank_collapse`` and ``path_products`` sections that the schema
    cannot express: every model the experiment names is defined, every architecture is valid for its family
    (:func:`check_architecture`) and has position embeddings for ``text.seq_len`` tokens, and the path products draw
    from no more sequences than the input has; raises :class:`ConfigError` naming the key."""
    models = config.get("models", {})
    for i, name in enumerate(config.get("rank_collapse", {}).get("models", [])):
        if name not in models:
            raise ConfigError(
                f"config key 'rank_collapse.models.{i}': unknown model {name!r}; "
                f"define it under 'models' (defined: {sorted(models)})"
            )
    text = config.get("text", {})
    for name, spec in models.items():
        arch = spec.get("init", {}).get("config", {})
        check_architecture(name, spec["family"], arch)
        positions = _arch_value(spec["family"], arch, "max_position_embeddings")
        seq_len = text.get("seq_len")
        if isinstance(positions, int) and isinstance(seq_len, int) and seq_len > positions:
            raise ConfigError(
                f"config key 'text.seq_len': {seq_len} tokens exceed the {positions} position embeddings of model "
                f"{name!r} (models.{name}.init.config.max_position_embeddings)"
            )
    wanted, available = config.get("path_products", {}).get("n_sequences"), text.get("n_sequences")
    if isinstance(wanted, int) and isinstance(available, int) and wanted > available:
        raise ConfigError(
            f"config key 'path_products.n_sequences': {wanted} sequences requested, but the input has only "
            f"text.n_sequences = {available}"
        )
