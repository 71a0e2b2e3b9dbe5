"""The wings of the workflow, registered once, and the one config check that runs before any job (torch-free).

A wing is one experiment: a subpackage of ``san`` that answers one contract, from config to README:

- ``spec.check_config(config, schemas) -> derived``: the cross-checks of its config sections that a JSON schema
  cannot express (references between sections, divisibility, derived tasks), run after the schema
  (``workflow/schemas/``; ``schemas`` is that folder, for a check that validates a derived slice); what it returns
  is what the rules need from it (or None);
- ``claims.check_config(report)`` (its cross-checks of config ``report``) and ``claims.claims(inputs, params)``
  (its sections of summary.json, each listing its verdict rows);
- ``tables.TABLES`` (its Markdown tables of README.md and docs/, by block name, each built from a run's summary and
  data) and, where a table reads more of the run than summary.json, ``tables.DATA`` (those files by snapshot name:
  their path in the results folder);
- its rules files ``workflow/rules/<rules>.smk``, included by the Snakefile in the order of :data:`WINGS`, each
  registering the files and values that claims read (``SUMMARY_INPUTS``, ``SUMMARY_PARAMS``, by name);
- the names its claims read: ``inputs`` (of ``SUMMARY_INPUTS``), ``params`` (of ``SUMMARY_PARAMS``) and ``report``
  (the sections of config ``report``). The rule ``wing_summary`` judges each wing's claims on those alone
  (``results/summary/<wing>.json``), so one wing's verdicts never wait for another wing's results and an edit of one
  wing's thresholds reruns that wing's summary only; ``summary`` gathers them into summary.json.

A new wing is one entry of :data:`WINGS` (its modules imported here) and its rules file. The order of :data:`WINGS`
is the order of summary.json's verdict lists and of the config checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from san.circle import claims as circle_claims
from san.circle import spec as circle_spec
from san.circle import tables as circle_tables
from san.core.config import ordered_like, validate_config, with_defaults
from san.paths import claims as paths_claims
from san.paths import spec as paths_spec
from san.paths import tables as paths_tables
from san.phenomena import claims as phenomena_claims
from san.phenomena import spec as phenomena_spec
from san.phenomena import tables as phenomena_tables
from san.propagation import claims as propagation_claims
from san.propagation import spec as propagation_spec
from san.propagation import tables as propagation_tables
from san.rank_collapse import claims as rank_collapse_claims
from san.rank_collapse import spec as rank_collapse_spec
from san.rank_collapse import tables as rank_collapse_tables
from san.rank_collapse.series import claims as series_claims
from san.rank_collapse.series import spec as series_spec
from san.rank_collapse.series import tables as series_tables
from san.rank_collapse.vision import claims as vision_claims
from san.rank_collapse.vision import spec as vision_spec
from san.rank_collapse.vision import tables as vision_tables
from san.theory import claims as theory_claims
from san.theory import spec as theory_spec
from san.theory import tables as theory_tables

Table = Callable[[Mapping[str, Any], Mapping[str, Path]], str]
"""A table builder: a run's summary and its data files by snapshot name -> the table's Markdown."""


@dataclass(frozen=True)
class Wing:
    """One wing's modules (see the module docstring for what each provides) and its rules files (their names under
    ``workflow/rules/``, without ``.smk``; by default the wing's name)."""

    name: str
    spec: ModuleType
    claims: ModuleType
    tables: ModuleType
    inputs: tuple[str, ...]
    params: tuple[str, ...]
    report: tuple[str, ...]
    rules: tuple[str, ...] = ()

    @property
    def rules_files(self) -> tuple[str, ...]:
        """The wing's rules files, ``rules/<name>.smk`` (relative to ``workflow/``, the Snakefile's folder)."""
        return tuple(f"rules/{r}.smk" for r in self.rules or (self.name,))


#: every wing, in the order of summary.json's verdict lists
WINGS: tuple[Wing, ...] = (
    Wing(
        "rank_collapse", rank_collapse_spec, rank_collapse_claims, rank_collapse_tables,
        inputs=("rank_collapse", "attention_products", "quantisation"),
        params=("models", "attention_product_models", "quantisation_models"),
        report=("rank_collapse", "pretrained_collapse", "first_token_sink", "attention_products"),
    ),
    Wing(
        "series", series_spec, series_claims, series_tables,
        inputs=("series", "series_checkpoints"), params=(), report=("training_series", "first_token_sink"),
    ),
    Wing(
        "circle", circle_spec, circle_claims, circle_tables,
        inputs=("circle", "circle_result"), params=("circle_collapse_threshold",), report=("circle",),
    ),
    Wing(
        "paths", paths_spec, paths_claims, paths_tables,
        inputs=("paths", "paths_exact"), params=("tasks",), report=("paths", "path_decomposition"),
        rules=("paths", "paths_decomposition"),
    ),
    Wing(
        "theory", theory_spec, theory_claims, theory_tables,
        inputs=("rank_collapse", "theorem"), params=("models", "theory"), report=("theorem",),
    ),
    Wing(
        "propagation", propagation_spec, propagation_claims, propagation_tables,
        inputs=("propagation",), params=("sweeps",), report=("propagation",),
    ),
    Wing(
        "vision", vision_spec, vision_claims, vision_tables,
        inputs=("vision", "quantisation"), params=("vision_models", "quantisation_models"), report=("vision",),
    ),
    Wing(
        "phenomena", phenomena_spec, phenomena_claims, phenomena_tables,
        inputs=("rank_collapse", "vision", "sink_context", "quantisation"),
        params=("models", "vision_models", "sink_context_models", "quantisation_models", "size_ladders"),
        report=("phenomena", "first_token_sink"),
    ),
)  # fmt: skip


def named(name: str) -> Wing:
    """The wing called ``name``; an unknown name is an error listing the wings."""
    for w in WINGS:
        if w.name == name:
            return w
    raise KeyError(f"no wing {name!r} (the wings: {[w.name for w in WINGS]})")


def report_slice(report: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The sections of config ``report`` that wing ``name``'s claims read (:attr:`Wing.report`)."""
    return {section: report[section] for section in named(name).report if section in report}


def wing_inputs(name: str, inputs: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[dict, dict]:
    """What wing ``name`` reads of the run's summary ``inputs`` and ``params`` (its :class:`Wing`
    names; ``report`` sliced to its sections, ``model_entries`` whole)."""
    wing = named(name)
    own = {k: inputs[k] for k in wing.inputs if k in inputs}
    values = {k: params[k] for k in wing.params if k in params}
    values["report"] = report_slice(params.get("report") or {}, name)
    if "model_entries" in params:
        values["model_entries"] = params["model_entries"]
    return own, values


def rules_files() -> list[str]:
    """Every wing's rules files, in the order of :data:`WINGS` (the Snakefile includes them)."""
    return [path for wing in WINGS for path in wing.rules_files]


def tables() -> dict[str, Table]:
    """Every wing's tables by block name, in the order of :data:`WINGS`; a name given twice is an error."""
    out: dict[str, Table] = {}
    for wing in WINGS:
        clash = set(out) & set(wing.tables.TABLES)
        if clash:
            raise ValueError(f"wing {wing.name!r} names the table(s) {sorted(clash)} of another wing")
        out.update(wing.tables.TABLES)
    return out


def table_data() -> dict[str, Path]:
    """The run's data files that the wings' tables read besides summary.json, by snapshot name: their path in the
    results folder."""
    return {name: path for wing in WINGS for name, path in getattr(wing.tables, "DATA", {}).items()}


def check_report(report: Mapping[str, Any]) -> None:
    """Every wing's cross-checks of config ``report`` (each on the sections it reads, :func:`report_slice`); raises
    :class:`san.core.config.ConfigError` naming the key."""
    for w in WINGS:
        w.claims.check_config(report_slice(report, w.name))


def check_config(
    config: dict[str, Any], schemas: str | Path, reference: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Validate ``config`` in place (schema ``schemas/config.schema.yaml``, defaults filled in), put its keys in the
    order of ``reference`` (the workflow's own config file, defaults filled in too; see
    :func:`san.core.config.ordered_like`), then run every wing's cross-checks of its sections and of ``report``;
    raises :class:`san.core.config.ConfigError` naming the key. Returns what each wing's check derived, by wing (e.g.
    ``"paths"``: the config slice of every task)."""
    schemas = Path(schemas)
    validate_config(config, schemas / "config.schema.yaml")
    if reference is not None:
        ordered = ordered_like(config, with_defaults(reference, schemas / "config.schema.yaml"))
        config.clear()
        config.update(ordered)
    derived = {wing.name: wing.spec.check_config(config, schemas) for wing in WINGS}
    check_report(config["report"])
    return derived
