"""The names and cross-checks of the series section (rank collapse along training), free of torch: the workflow
reads them while it parses its rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from san.core.config import ConfigError
from san.models.revisions import log_then_every, revision_name

#: the name under which the workflow tokenises the offline series' inputs (its checkpoints' tokenizer): the
#: ``{model}`` of ``results/inputs/{model}/{weights}.nc``, so no model of the config may take it
MODEL = "series"

#: the variant whose pretrained-phenomena measures (massive activations, the first token's norm, the matrix entropy)
#: the series reports per checkpoint: the unmodified model
UNMODIFIED = "transformer"


def schedule(settings: dict[str, Any]) -> list[int]:
    """The checkpoint steps of the ``series`` slice ``settings`` (``steps``, ``every``, ``log_until``):
    :func:`san.models.revisions.log_then_every`."""
    return log_then_every(settings["steps"], settings["every"], settings.get("log_until"))


def revisions(settings: dict[str, Any]) -> list[str]:
    """The checkpoints of the ``series`` slice ``settings`` by revision name (``step<n>``; ``step0`` the
    initialisation)."""
    return [revision_name(s) for s in schedule(settings)]


def check_config(config: dict[str, Any], schemas: Path) -> None:
    """Cross-checks of the ``series`` section: every ``series.hub_models`` entry is a defined model whose
    ``pretrained`` entry is a hub source naming ``revisions`` (and, with ``repos``, one repository per listed
    revision); the offline model's context holds ``text.seq_len`` tokens (the analysis reads them); no model takes
    the series' name (:data:`MODEL`); raises :class:`ConfigError` naming the key."""
    series = config.get("series", {})
    if MODEL in config.get("models", {}):
        raise ConfigError(
            f"config key 'models.{MODEL}': the name is the offline training series' (its tokenised inputs are "
            f"results/inputs/{MODEL}/); name the model otherwise"
        )
    for name in series.get("hub_models", []):
        pretrained = (config.get("models", {}).get(name) or {}).get("pretrained") or {}
        if pretrained.get("source") != "hub" or "revisions" not in pretrained:
            raise ConfigError(
                f"series.hub_models names {name!r}, which needs models.{name}.pretrained with source: hub and "
                "revisions (a list, {schedule: ...} or all)"
            )
        _check_repos(name, pretrained)
    seq_len = config.get("text", {}).get("seq_len")
    context = series.get("model", {}).get("context")
    if series.get("seeds") and seq_len is not None and context is not None and context < seq_len:
        raise ConfigError(
            f"series.model.context = {context} is below text.seq_len = {seq_len}, which the analysis reads"
        )


def _check_repos(name: str, pretrained: dict[str, Any]) -> None:
    """``models.<name>.pretrained.repos`` (revision -> its own repository) names exactly the listed revisions."""
    repos, revisions = pretrained.get("repos"), pretrained.get("revisions")
    if repos is None:
        return
    if not isinstance(revisions, list) or set(repos) != set(revisions):
        listed = revisions if isinstance(revisions, list) else f"{revisions!r} (not a list)"
        raise ConfigError(
            f"config key 'models.{name}.pretrained.repos': names the repositories of revisions {sorted(repos)}, but "
            f"revisions lists {listed}; each listed revision needs exactly one repository"
        )
