"""summary.json: every wing's claims (:data:`san.experiments.WINGS`), in one loop, and the verdict table
(torch-free).

Every wing's claims module answers one contract: ``check_config(report)`` (cross-checks of config ``report`` that
its schema cannot express, before any compute) and ``claims(inputs, params) -> {section: {...} | None}``, each
section listing its verdict rows (:func:`san.core.verdicts.row`) under ``verdicts``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from san import experiments
from san.claims import caveats
from san.core import verdicts as V
from san.report.published import FORMAT


def summary(inputs: Mapping[str, list[str]], params: Mapping[str, Any]) -> dict[str, Any]:
    """Every wing's sections (``claims(inputs, params)``, in the order of the wings) and the verdict table
    (``verdicts``: the rows split by kind, :func:`san.core.verdicts.collect`), after the wings' cross-checks of
    ``params['report']``. Every row and models x claims cell carries its caveats (:func:`san.claims.caveats.annotate`:
    from the facts of ``params['model_entries']``, config ``models``, and the thresholds' history in config)."""
    experiments.check_report(params["report"])
    sections: dict[str, Any] = {}
    for wing in experiments.WINGS:
        sections.update(wing.claims.claims(inputs, params))
    caveats.annotate(sections, params.get("model_entries") or {}, params["report"])
    sections["format"] = FORMAT
    sections["verdicts"] = V.collect(sections)
    return sections
