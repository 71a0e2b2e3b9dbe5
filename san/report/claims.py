"""The wings whose claims make up summary.json, registered once, and the one loop over them (torch-free).

Every wing's claims module answers one contract: ``check_config(report)`` (cross-checks of config ``report`` that
its schema cannot express, before any compute) and ``claims(inputs, params) -> {section: {...} | None}``, each
section listing its verdict rows (:func:`san.core.verdicts.row`) under ``verdicts``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from san.circle import claims as circle
from san.core import verdicts as V
from san.paths import claims as paths
from san.propagation import claims as propagation
from san.rank_collapse import claims as rank_collapse
from san.rank_collapse import vision_claims as vision
from san.theory import claims as theory

#: the wings of the report, in the order of summary.json's sections
WINGS: dict[str, ModuleType] = {
    "rank_collapse": rank_collapse,
    "circle": circle,
    "paths": paths,
    "theory": theory,
    "propagation": propagation,
    "vision": vision,
}


def check_config(report: Mapping[str, Any]) -> None:
    """Every wing's cross-checks of config ``report``; raises :class:`san.core.config.ConfigError` naming the key."""
    for wing in WINGS.values():
        wing.check_config(report)


def summary(inputs: Mapping[str, list[str]], params: Mapping[str, Any]) -> dict[str, Any]:
    """Every wing's sections (``claims(inputs, params)``) and the verdict table (``verdicts``: the rows split by
    kind, :func:`san.core.verdicts.collect`), after :func:`check_config` on ``params['report']``."""
    check_config(params["report"])
    sections: dict[str, Any] = {}
    for wing in WINGS.values():
        sections.update(wing.claims(inputs, params))
    sections["verdicts"] = V.collect(sections)
    return sections
