"""The names and cross-checks of the vision section (rank collapse in image encoders), free of torch: the workflow
reads them while it parses its rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from san.core.config import ConfigError
from san.models.spec import FAMILY_TABLE, IMAGE_FAMILIES


def check_config(config: dict[str, Any], schemas: Path) -> None:
    """``vision.models`` name entries of ``models`` whose family, when given, is an image encoder (else it is
    recognised from the model's config.json and checked by the job), and
    ``rank_collapse.models`` (text input) names none; raises :class:`ConfigError` naming the key."""
    models = config.get("models", {})
    for i, name in enumerate(config.get("vision", {}).get("models", [])):
        where = f"config key 'vision.models.{i}'"
        if name not in models:
            raise ConfigError(f"{where}: model {name!r} is not defined under 'models' (known: {sorted(models)})")
        family = models[name].get("family")
        if family is not None and family not in IMAGE_FAMILIES:  # None: recognised from its config.json
            raise ConfigError(
                f"{where}: model {name!r} is of family {family!r}, not an image encoder ({list(IMAGE_FAMILIES)})"
            )
    for i, name in enumerate(config.get("rank_collapse", {}).get("models", [])):
        family = models.get(name, {}).get("family")
        if family is not None and FAMILY_TABLE.get(family) is not None and family in IMAGE_FAMILIES:
            raise ConfigError(
                f"config key 'rank_collapse.models.{i}': {name!r} is an image encoder (family {family!r}), which "
                f"reads images, not text; list it under 'vision.models'"
            )
