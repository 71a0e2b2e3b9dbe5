"""Config validation: JSON-Schema with defaults, clear messages naming the key, and cross-reference checks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012


class ConfigError(ValueError):
    """A config value is missing, of the wrong type, or refers to something undefined."""


def _load_yaml(path: Path) -> Any:
    with path.open() as fh:
        return yaml.safe_load(fh)


def _key_path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "(top level)"


def _describe(error: jsonschema.ValidationError, prefix: str = "") -> str:
    if error.validator in ("oneOf", "anyOf") and error.context:
        # report the alternative the value meant (its type and `source` match) instead of "not valid under any"
        branches: dict[Any, list[jsonschema.ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)

        def mismatch(errs: list[jsonschema.ValidationError]) -> tuple[bool, int]:
            wrong_kind = any(e.validator in ("type", "const") and len(e.relative_path) <= 1 for e in errs)
            return wrong_kind, len(errs)

        return "; ".join(_describe(e, prefix) for e in min(branches.values(), key=mismatch))
    key = _key_path(error)
    if prefix:  # errors of a config slice validated on its own, named by the slice's place in the config
        key = prefix if key == "(top level)" else f"{prefix}.{key}"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        where = "the top level" if key == "(top level)" else f"'{key}'"
        return f"unknown config key(s) {extra} under {where}; allowed keys: {allowed}"
    if error.validator == "required":
        return f"config key '{key}': {error.message}"
    expected = error.schema.get("description", "")
    msg = f"config key '{key}': {error.message}"
    return msg + (f" (expected: {expected})" if expected else "")


def _extend_with_default(validator_class: type) -> type:
    """A validator that fills in each property's ``default`` (as Snakemake's ``validate`` does)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):  # type: ignore[no-untyped-def]
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(prop, sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _sub_schema(path: Path) -> Resource:
    """A schema file that another one ``$ref``s, read as a 2020-12 resource *without* its own ``$schema``.

    jsonschema validates a sub-schema that declares ``$schema`` with that dialect's plain validator class, which
    would silently skip the defaults of everything under the ``$ref``; dropping the key keeps the default-filling
    class. (The key stays in the file for Snakemake's own ``validate``, which needs it to detect the dialect.)
    """
    contents = dict(_load_yaml(path))
    contents.pop("$schema", None)
    return Resource(contents=contents, specification=DRAFT202012)


def validate_config(config: dict[str, Any], schema_path: str | Path) -> dict[str, Any]:
    """Validate ``config`` in place against the schema at ``schema_path`` and fill in defaults.

    Raises :class:`ConfigError` listing every violation, each naming the dotted key and what was expected.
    """
    schema_path = Path(schema_path)
    schema = _load_yaml(schema_path)
    registry = Registry(retrieve=lambda uri: _sub_schema(schema_path.parent / uri))
    validator = _extend_with_default(jsonschema.Draft202012Validator)(schema, registry=registry)
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        lines = "\n".join(f"  - {_describe(e)}" for e in errors)
        raise ConfigError(f"invalid config ({len(errors)} problem(s)):\n{lines}")
    check_references(config)
    if isinstance(config.get("paths"), dict):
        path_task_slices(config["paths"], schema_path.parent / "paths.schema.yaml")
    return config


def check_references(config: dict[str, Any]) -> None:
    """Cross-checks a schema cannot express: every model an experiment names is defined under ``models``."""
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


#: the path-effectiveness tasks that :func:`san.tasks.make_task` builds (the paper's Fig. 4; ``san.tasks.TASKS``,
#: repeated here so that validating a config needs no torch)
PATH_TASK_KINDS = ("sorting", "convex_hull", "memorization")


def _merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with the keys of ``changes`` replaced, recursing into nested mappings (a shallow result: copy it
    before changing it)."""
    out = dict(base)
    for key, value in changes.items():
        out[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def _variant_slice(paths: dict[str, Any], name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The slice of variant ``name``: its task's section with the variant's keys replaced, checked against the
    task's part of the paths ``schema``; a :class:`ConfigError` names the offending ``paths.variants`` key."""
    spec = paths["variants"][name]
    kind = spec["task"]
    merged = copy.deepcopy(_merge(paths[kind], {k: v for k, v in spec.items() if k not in ("task", "title")}))
    validator = _extend_with_default(jsonschema.Draft202012Validator)(
        {**schema["properties"][kind], "$defs": schema.get("$defs", {})}
    )
    errors = sorted(validator.iter_errors(merged), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        lines = "\n".join(f"  - {_describe(e, f'paths.variants.{name}')}" for e in errors)
        raise ConfigError(f"invalid variant {name!r} of task {kind!r} ({len(errors)} problem(s)):\n{lines}")
    return {"task": kind, "name": name, **merged}


def path_task_slices(paths: dict[str, Any], schema_path: str | Path) -> dict[str, dict[str, Any]]:
    """The config slice of every task in ``paths.tasks`` (a schema-validated ``paths`` section), by name.

    A task named ``sorting``, ``convex_hull`` or ``memorization`` is its own section plus ``task: <name>``. A
    variant (``paths.variants.<name>``) is the section of its ``task`` with the variant's ``seed``, ``data``,
    ``model`` and ``train`` keys replaced, validated against that task's schema (``schema_path``: the paths schema
    file), plus ``task: <its task>`` and ``name: <name>`` (its ``title`` is the figures' concern, not the jobs'
    that train and evaluate it, so it is left out). Every defined variant is checked, listed or not. Raises
    :class:`ConfigError` naming the key for an undefined task name or a variant value the task's schema rejects.
    """
    schema = _load_yaml(Path(schema_path))
    variants = {name: _variant_slice(paths, name, schema) for name in paths.get("variants") or {}}
    slices: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(paths["tasks"]):
        if name in PATH_TASK_KINDS:
            slices[name] = {"task": name, **paths[name]}
        elif name in variants:
            slices[name] = variants[name]
        else:
            raise ConfigError(
                f"config key 'paths.tasks.{i}': unknown task {name!r}; expected one of {list(PATH_TASK_KINDS)} or a "
                f"variant defined under 'paths.variants' (defined: {sorted(variants)})"
            )
    return slices


def path_task_architectures(slices: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The SANs of the tasks (``slices`` from :func:`path_task_slices`) for the path-length distribution: one entry
    ``{name: "SAN (task, ...)", layers, heads}`` per distinct depth and width, naming every task that uses it."""
    shapes: dict[tuple[int, int], list[str]] = {}
    for name, task in slices.items():
        shapes.setdefault((task["model"]["n_layers"], task["model"]["n_heads"]), []).append(name)
    return [{"name": f"SAN ({', '.join(names)})", "layers": L, "heads": H} for (L, H), names in shapes.items()]
