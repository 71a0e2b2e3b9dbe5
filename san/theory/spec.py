"""Names and constants of the theorem check (the paper's Theorem 2.2 and its multi-head corollary), free of torch.

The sweep's dimension names and values that the schema, the experiment, the claims and the figure share. Importable
without torch: the workflow reads it while it parses the rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from san.core.config import ConfigError
from san.models.entries import init_entry
from san.models.spec import PROSE_EMBEDDING_FAMILY

#: input kinds: prose (the rank-collapse experiment's sequences through BERT's init embeddings) and Gaussian tokens
INPUT_KINDS = ("prose", "gaussian")
#: dimensions of the sweep, outermost first; ``layer`` 0 is the input
DIMS = ("input", "layernorm", "d_qk", "scale", "sample", "layer")
#: verdict codes of a (sample, layer) pair against the nominal bound
VERDICT = {"respects": 1, "undecided": 0, "violates": -1, "float_floor": 2}


def check_config(config: dict[str, Any], schemas: Path) -> None:
    """Cross-checks of the ``theory`` section that the schema cannot express: the embedding model is defined under
    ``models`` with family bert (its init embeddings embed the prose); raises :class:`ConfigError` naming the key."""
    name = config["theory"]["embedding_model"]
    models = config.get("models", {})
    if name not in models:
        raise ConfigError(
            f"config key 'theory.embedding_model': unknown model {name!r}; define it under 'models' "
            f"(defined: {sorted(models)})"
        )
    if models[name].get("family") != PROSE_EMBEDDING_FAMILY or init_entry(models[name]) is None:
        raise ConfigError(
            f"config key 'theory.embedding_model': model {name!r} has family {models[name].get('family')!r} and "
            f"init {init_entry(models[name])!r}; expected a model with family {PROSE_EMBEDDING_FAMILY!r} given in "
            "the config and init weights (its init embeddings embed the prose)"
        )
    text, theory = config.get("text", {}), config["theory"]
    for key, available in (("tokens", "seq_len"), ("n_sequences", "n_sequences")):
        if isinstance(text.get(available), int) and theory[key] > text[available]:
            raise ConfigError(
                f"config key 'theory.{key}': {theory[key]} exceeds text.{available} = {text[available]} (the prose "
                "input is the rank-collapse input; the Gaussian input would no longer match it)"
            )
