"""The experiments of the workflow and the one config check that runs before any job, free of torch.

Each experiment ("wing") is a subpackage of ``san`` with a torch-free ``spec`` module; its config section is
checked here by its JSON schema (``workflow/schemas/``) and then by the cross-checks its ``spec`` provides (what a
schema cannot express: references between sections, divisibility, derived tasks). A new experiment adds its
cross-check to :data:`CHECKS`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from san.circle import spec as circle
from san.core.config import ordered_like, validate_config, with_defaults
from san.models.revisions import check_series
from san.paths import spec as paths
from san.propagation import spec as propagation
from san.rank_collapse import spec as rank_collapse
from san.rank_collapse import vision_spec as vision
from san.theory import spec as theory


def _paths(config: dict[str, Any], schemas: Path) -> dict[str, dict[str, Any]]:
    return paths.task_slices(config["paths"], schemas / "paths.schema.yaml")


def _report(config: dict[str, Any], schemas: Path) -> None:
    from san.report.claims import check_config as report_check  # the wings' claims modules (numpy, xarray)

    report_check(config["report"])


#: the cross-checks of each experiment's section, run in this order after the schema; each returns what the rules
#: need from it (or None)
CHECKS: dict[str, Callable[[dict[str, Any], Path], Any]] = {
    "rank_collapse": lambda config, schemas: rank_collapse.check_config(config),
    "series": lambda config, schemas: check_series(config),
    "circle": lambda config, schemas: circle.check_config(config["circle"]),
    "paths": _paths,
    "theory": lambda config, schemas: theory.check_config(config),
    "propagation": lambda config, schemas: propagation.check_config(config),
    "vision": lambda config, schemas: vision.check_config(config),
    "report": _report,
}


def check_config(
    config: dict[str, Any], schemas: str | Path, reference: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Validate ``config`` in place (schema ``schemas/config.schema.yaml``, defaults filled in), put its keys in the
    order of ``reference`` (the workflow's own config file, defaults filled in too; see
    :func:`san.core.config.ordered_like`), then run every experiment's cross-checks; raises
    :class:`san.core.config.ConfigError` naming the key. Returns what each check derived, by experiment (e.g.
    ``"paths"``: the config slice of every task)."""
    schemas = Path(schemas)
    validate_config(config, schemas / "config.schema.yaml")
    if reference is not None:
        ordered = ordered_like(config, with_defaults(reference, schemas / "config.schema.yaml"))
        config.clear()
        config.update(ordered)
    return {name: check(config, schemas) for name, check in CHECKS.items()}
