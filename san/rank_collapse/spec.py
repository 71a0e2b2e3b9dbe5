"""Names and constants of the rank-collapse experiment (the paper's Sec. 4, Fig. 2, and its appendix), free of torch.

The variants' precision and cost, the measures of token uniformity and the weight sets; the schema, the figures and
the report read them from here (a test keeps the schema's enums in step). The model families and the variants
themselves are :mod:`san.models.spec`'s. Importable without torch: the workflow reads it while it parses the rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from san.core.config import ConfigError
from san.models.entries import arch_value, check_models, depth_and_heads, explicit_architecture, weight_sets
from san.models.local import entry_family
from san.models.spec import FAMILY_TABLE, VARIANTS

#: floating point type of each variant's forward passes by default: the variants without skips fall doubly
#: exponentially, and only float64 resolves them below float32's resolution (~1e-7, down to ~1e-16); the variants
#: with skips stay far above it, where float32 agrees with float64 to its resolution and runs faster
#: (``rank_collapse.dtype``)
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
    width = arch_value(family, arch, FAMILY_TABLE[family].width_key) or 1
    work = sum(VARIANT_WORK.get(v, 1.0) * (2 if d == "float64" else 1) for v, d in dtypes.items())
    return float(weight_sets * layers * width**2 * work)


def model_priorities(config: dict[str, Any]) -> dict[str, float]:
    """Scheduling priority of each analysed model's jobs, in (0, 1): below the path-effectiveness chains (priority
    >= 1), above every other job (0). Models rank by :func:`model_cost`, the costliest first, so the longest
    rank-collapse jobs do not end alone (a model whose architecture is its downloaded config.json ranks first);
    acquiring pretrained weights (a GGUF dequantisation takes minutes) ranks
    above every analysis, in (0.5, 1)."""
    settings = config.get("rank_collapse", {})
    names = list(settings.get("models", []))
    variants = settings.get("variants", list(VARIANTS))

    def cost(name: str) -> float:
        spec = config["models"][name]
        explicit = explicit_architecture(spec)
        if explicit is None:  # the architecture of downloaded weights, known only after acquisition: first
            return float("inf")
        dtypes = variant_dtypes(spec.get("dtype", settings.get("dtype", VARIANT_DTYPES)), variants)
        sets = len(weight_sets(spec))
        return model_cost(*explicit, sets, dtypes)

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
#: the placebo of ``residual_ratio_no_first``, stored beside :data:`METRICS` (``results/rank_collapse/{model}.nc``)
#: but neither drawn nor tabled: the paper's ratio without one token drawn at random among the others (per sequence,
#: from ``rank_collapse.control_token_seed``), the control of the first-token sink claim (an exclusion that removes a
#: faster collapse only because any one token's removal does is no evidence about the first token)
PLACEBO = {
    "residual_ratio_no_random": "relative residual ||res(X_l)||_{1,inf} / ||X_l||_{1,inf} without one random token "
    "(not the first)",
}


def check_config(config: dict[str, Any], schemas: Path) -> None:
    """Cross-checks of the ``models``, ``text``, ``rank_collapse`` and ``attention_products`` sections that the schema
    cannot express: every model the experiment names is defined, every model is valid
    (:func:`san.models.entries.check_models`), the attention products' models are defined and draw from no more
    sequences than the input has; raises :class:`ConfigError` naming the key."""
    models = config.get("models", {})
    for i, name in enumerate(config.get("rank_collapse", {}).get("models", [])):
        if name not in models:
            raise ConfigError(
                f"config key 'rank_collapse.models.{i}': unknown model {name!r}; "
                f"define it under 'models' (defined: {sorted(models)})"
            )
    check_models(config)
    text = config.get("text", {})
    for i, name in enumerate(config.get("attention_products", {}).get("models") or []):
        if name not in models:
            raise ConfigError(
                f"config key 'attention_products.models.{i}': unknown model {name!r}; "
                f"define it under 'models' (defined: {sorted(models)})"
            )
    wanted, available = config.get("attention_products", {}).get("n_sequences"), text.get("n_sequences")
    if isinstance(wanted, int) and isinstance(available, int) and wanted > available:
        raise ConfigError(
            f"config key 'attention_products.n_sequences': {wanted} sequences requested, but the input has only "
            f"text.n_sequences = {available}"
        )
    check_context(config)


def attention_product_models(config: dict[str, Any]) -> list[str]:
    """The models whose attention products are sampled: those of ``attention_products.models`` that
    ``rank_collapse.models`` analyses (null: all of these), so that a run of fewer models needs no edit there."""
    analysed = list(config.get("rank_collapse", {}).get("models", []))
    named = config.get("attention_products", {}).get("models")
    return analysed if named is None else [name for name in named if name in analysed]


def context_models(config: dict[str, Any]) -> list[str]:
    """The models whose first-token sink is measured at several context lengths (``phenomena.context.models``; null:
    the causal decoders of ``rank_collapse.models`` with pretrained weights whose family is known before acquisition:
    named by the entry, or recognised from a local folder's config.json, :func:`san.models.local.entry_family`)."""
    context = config.get("phenomena", {}).get("context", {})
    if context.get("models") is not None:
        return list(context["models"])
    models = config.get("models", {})
    families = {name: entry_family(models[name], name) for name in config.get("rank_collapse", {}).get("models", [])}
    return [
        name
        for name, family in families.items()
        if models[name].get("pretrained") and family in FAMILY_TABLE and FAMILY_TABLE[family].causal
    ]


def check_context(config: dict[str, Any]) -> None:
    """Cross-checks of ``phenomena.context``: its models are analysed text models (``rank_collapse.models``) of a
    causal family where the entry names one, and no length exceeds ``text.seq_len`` (the inputs are cut, never
    padded); raises :class:`ConfigError` naming the key."""
    context = config.get("phenomena", {}).get("context", {})
    analysed, models = config.get("rank_collapse", {}).get("models", []), config.get("models", {})
    for i, name in enumerate(context.get("models") or []):
        family = entry_family(models[name], name) if name in models else None
        if name not in analysed:
            raise ConfigError(
                f"config key 'phenomena.context.models.{i}': model {name!r} is not in rank_collapse.models {analysed}"
            )
        if family in FAMILY_TABLE and not FAMILY_TABLE[family].causal:
            raise ConfigError(
                f"config key 'phenomena.context.models.{i}': model {name!r} is of family {family!r}, not a causal "
                "decoder: the first-token sink along the context is a decoder's"
            )
    tokens = config.get("text", {}).get("seq_len")
    for i, n in enumerate(context.get("seq_lens") or []):
        if isinstance(tokens, int) and n > tokens:
            raise ConfigError(
                f"config key 'phenomena.context.seq_lens.{i}': {n} tokens exceed text.seq_len = {tokens} (the input "
                "sequences are cut to each length, never padded)"
            )


#: the variants drawn and tabled along training (SAN+MLP behaves as SAN; see the Fig. 2 figures)
DRAWN = ("SAN", "SAN+skip", "transformer")


def drawn_layers(layers: int) -> list[int]:
    """The first, middle and last block's output of a model with ``layers`` blocks (layer indices 1..layers)."""
    return sorted({1, (layers + 1) // 2, layers})
