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
#: model families and the keys of their layers and heads in a transformers architecture config: the paper's three
#: post-norm encoders, two more encoders (RoBERTa; MPNet with its relative position bias), and three pre-norm causal
#: decoders (GPT-2 with learned positions and LayerNorm; Llama and Gemma-3 with rotary positions, RMSNorm and grouped
#: key/value heads; Gemma-3 also normalises each block's output and alternates sliding-window and global layers)
ARCHITECTURE_KEYS = {
    "bert": ("num_hidden_layers", "num_attention_heads"),
    "albert": ("num_hidden_layers", "num_attention_heads"),
    "xlnet": ("n_layer", "n_head"),
    "roberta": ("num_hidden_layers", "num_attention_heads"),
    "mpnet": ("num_hidden_layers", "num_attention_heads"),
    "gpt2": ("n_layer", "n_head"),
    "llama": ("num_hidden_layers", "num_attention_heads"),
    "gemma3": ("num_hidden_layers", "num_attention_heads"),
}
FAMILIES = tuple(ARCHITECTURE_KEYS)
#: families whose attention is causal (a decoder's SAN stays a causal SAN: the mask is never removed)
CAUSAL = frozenset({"gpt2", "llama", "gemma3"})
#: each family's width key, and the transformers module and config class that define its architecture keys
WIDTH_KEYS = {
    "bert": "hidden_size", "albert": "hidden_size", "xlnet": "d_model", "roberta": "hidden_size",
    "mpnet": "hidden_size", "gpt2": "n_embd", "llama": "hidden_size", "gemma3": "hidden_size",
}  # fmt: skip
#: each family's key of the longest input it embeds (None: relative positions only, no limit)
POSITION_KEYS = {
    "bert": "max_position_embeddings", "albert": "max_position_embeddings", "xlnet": None,
    "roberta": "max_position_embeddings", "mpnet": "max_position_embeddings", "gpt2": "n_positions",
    "llama": "max_position_embeddings", "gemma3": "max_position_embeddings",
}  # fmt: skip
#: position ids that are never a token's (RoBERTa and MPNet count positions from padding_idx + 1 = 2)
POSITION_OFFSETS = {"roberta": 2, "mpnet": 2}
CONFIG_CLASSES = {
    "bert": ("models/bert/configuration_bert.py", "BertConfig"),
    "albert": ("models/albert/configuration_albert.py", "AlbertConfig"),
    "xlnet": ("models/xlnet/configuration_xlnet.py", "XLNetConfig"),
    "roberta": ("models/roberta/configuration_roberta.py", "RobertaConfig"),
    "mpnet": ("models/mpnet/configuration_mpnet.py", "MPNetConfig"),
    "gpt2": ("models/gpt2/configuration_gpt2.py", "GPT2Config"),
    "llama": ("models/llama/configuration_llama.py", "LlamaConfig"),
    "gemma3": ("models/gemma3/configuration_gemma3.py", "Gemma3TextConfig"),
}
#: floating point type of each variant's forward passes by default: the variants without skips fall doubly
#: exponentially, and only float64 resolves them below ~1e-7 (down to ~1e-16); the variants with skips stay above
#: ~1e-2, where float32 agrees with float64 to ~1e-7 relative and runs twice as fast (``rank_collapse.dtype``)
VARIANT_DTYPES = {"SAN": "float64", "SAN+MLP": "float64", "SAN+skip": "float32", "transformer": "float32"}


def variant_dtypes(dtype: str | dict[str, str], variants: list[str] | tuple[str, ...]) -> dict[str, str]:
    """The dtype name of each of ``variants`` from a ``rank_collapse.dtype`` setting: one name for all of them, or
    a mapping by variant (a variant it leaves out runs in float64)."""
    if isinstance(dtype, str):
        return {v: dtype for v in variants}
    return {v: dtype.get(v, "float64") for v in variants}


def variants_by_dtype(dtypes: dict[str, str]) -> dict[str, list[str]]:
    """The variants of each dtype of :func:`variant_dtypes`' result, dtypes in the order of their first variant: a
    weight set is loaded once per dtype and runs that dtype's variants."""
    groups: dict[str, list[str]] = {}
    for name, dtype in dtypes.items():
        groups.setdefault(dtype, []).append(name)
    return groups


#: relative work of each variant's forward pass (attention alone is about a third of a block's products)
VARIANT_WORK = {"SAN": 1 / 3, "SAN+MLP": 1.0, "SAN+skip": 1 / 3, "transformer": 1.0}


def model_cost(family: str, arch: dict[str, Any], weight_sets: int, dtypes: dict[str, str]) -> float:
    """Estimated relative cost of one model's rank-collapse job, from its config alone: per weight set, layers x
    width^2 (a block's products on a fixed number of tokens) times the variants' work, float64 counting twice."""
    layers, _ = depth_and_heads(family, arch)
    width = _arch_value(family, arch, WIDTH_KEYS[family]) or 1
    work = sum(VARIANT_WORK.get(v, 1.0) * (2 if d == "float64" else 1) for v, d in dtypes.items())
    return float(weight_sets * layers * width**2 * work)


def model_priorities(config: dict[str, Any]) -> dict[str, float]:
    """Scheduling priority of each analysed model's jobs, in (0, 1): below the path-effectiveness chains (priority
    >= 1), above every other job (0). Models rank by :func:`model_cost`, the costliest first, so the longest
    rank-collapse jobs do not end alone; acquiring pretrained weights (a GGUF dequantisation takes minutes) ranks
    above every analysis, in (0.5, 1)."""
    settings = config.get("rank_collapse", {})
    names = list(settings.get("models", []))
    variants = settings.get("variants", list(VARIANTS))

    def cost(name: str) -> float:
        spec = config["models"][name]
        dtypes = variant_dtypes(spec.get("dtype", settings.get("dtype", VARIANT_DTYPES)), variants)
        sets = 1 + bool(spec.get("pretrained"))
        return model_cost(spec["family"], spec.get("init", {}).get("config", {}), sets, dtypes)

    order = sorted(names, key=cost)
    return {name: (rank + 1) / (2 * (len(order) + 1)) for rank, name in enumerate(order)}


#: the three measures of token uniformity stored per layer (variables of results/rank_collapse/{model}.nc): the
#: paper's ratio ``||res(X)||_{1,inf} / ||X||_{1,inf}`` (primary), the same without the first token (pretrained
#: decoders put very large activations on it, "attention sinks", which then dominate both norms), and the
#: Frobenius-norm ratio ``||res(X)||_F / ||X||_F`` (every token weighs by its energy, not the largest row or column)
METRICS = {
    "residual_ratio": "relative residual ||res(X_l)||_{1,inf} / ||X_l||_{1,inf}",
    "residual_ratio_no_first": "relative residual ||res(X_l)||_{1,inf} / ||X_l||_{1,inf} without the first token",
    "residual_ratio_frobenius": "relative residual ||res(X_l)||_F / ||X_l||_F",
}
#: sanity checks of genuine pretrained weights, run when a model is acquired (``pretrained.check``): a causal LM's
#: greedy continuation of a prompt must contain the expected word; a sentence encoder's mean-pooled embeddings must
#: put a paraphrase closer to the anchor than an unrelated sentence
CONTINUATION_CHECK = {"prompt": "The capital of France is", "expect": "Paris", "new_tokens": 8}
PARAPHRASE_CHECK = {
    "anchor": "A man is playing a guitar on the stage.",
    "paraphrase": "On stage, a man plays the guitar.",
    "unrelated": "The stock market fell sharply on Monday.",
}
#: architecture keys that count things (layers, heads, widths, positions): positive integers
POSITIVE_KEYS = frozenset(
    {
        "num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size", "max_position_embeddings",
        "type_vocab_size", "embedding_size", "num_hidden_groups", "inner_group_num",
        "n_layer", "n_head", "d_model", "d_inner", "n_embd", "n_positions", "n_inner", "num_key_value_heads",
        "head_dim", "relative_attention_num_buckets", "sliding_window",
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
        position_key = POSITION_KEYS[spec["family"]]
        positions = _arch_value(spec["family"], arch, position_key) if position_key else None
        seq_len = text.get("seq_len")
        offset = POSITION_OFFSETS.get(spec["family"], 0)
        if isinstance(positions, int) and isinstance(seq_len, int) and seq_len + offset > positions:
            raise ConfigError(
                f"config key 'text.seq_len': {seq_len} tokens exceed the {positions - offset} usable position "
                f"embeddings of model {name!r} (models.{name}.init.config.{position_key})"
            )
        pretrained = spec.get("pretrained") or {}
        check = (pretrained.get("check") or {}).get("kind")
        decoder_only = check == "continuation" or pretrained.get("format") == "gguf"
        if decoder_only and spec["family"] not in CAUSAL:
            what = "check kind 'continuation'" if check == "continuation" else "GGUF weights"
            raise ConfigError(
                f"config key 'models.{name}.pretrained': {what} need a causal decoder family "
                f"({sorted(CAUSAL)}), but the family is {spec['family']!r}"
            )
    analysed = config.get("rank_collapse", {}).get("models", [])
    for i, name in enumerate(config.get("path_products", {}).get("models") or []):
        if name not in analysed:
            raise ConfigError(
                f"config key 'path_products.models.{i}': model {name!r} is not in rank_collapse.models {analysed}"
            )
    wanted, available = config.get("path_products", {}).get("n_sequences"), text.get("n_sequences")
    if isinstance(wanted, int) and isinstance(available, int) and wanted > available:
        raise ConfigError(
            f"config key 'path_products.n_sequences': {wanted} sequences requested, but the input has only "
            f"text.n_sequences = {available}"
        )
