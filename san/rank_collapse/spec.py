"""Names and constants of the rank-collapse experiment (the paper's Sec. 4, Fig. 2, and its appendix), free of torch.

The one place that names the architecture variants (the paper's ablations), the model families with the config
keys of their depth and width, and the weight sets; the schema, the ablations, the figures and the report read
them from here (a test keeps the schema's enums in step). Importable without torch: the workflow reads it while it
parses the rules.
"""

from __future__ import annotations

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


def depth_and_heads(family: str, arch: dict[str, Any]) -> tuple[int, int]:
    """Layers and heads per layer of a configured transformers architecture (``models.<name>.init.config``)."""
    if family not in ARCHITECTURE_KEYS:
        raise ValueError(f"unknown model family {family!r}; expected one of {list(FAMILIES)}")
    layers, heads = ARCHITECTURE_KEYS[family]
    return int(arch[layers]), int(arch[heads])




def check_config(config: dict[str, Any]) -> None:
    """Cross-checks of the ``models`` and ``rank_collapse`` sections that the schema cannot express: every model the
    experiment names is defined, and every architecture's width divides into its heads; raises :class:`ConfigError`
    naming the key."""
    models = config.get("models", {})
    for i, name in enumerate(config.get("rank_collapse", {}).get("models", [])):
        if name not in models:
            raise ConfigError(
                f"config key 'rank_collapse.models.{i}': unknown model {name!r}; "
                f"define it under 'models' (defined: {sorted(models)})"
            )
    for name, spec in models.items():
        arch = spec.get("init", {}).get("config", {})
        heads, width = arch.get("num_attention_heads"), arch.get("hidden_size")
        if heads and width and width % heads:
            raise ConfigError(
                f"config key 'models.{name}.init.config': hidden_size {arch['hidden_size']} is not divisible by "
                f"num_attention_heads {arch['num_attention_heads']}"
            )
