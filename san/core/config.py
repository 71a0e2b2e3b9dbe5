"""Config validation: JSON-Schema with defaults, clear messages naming the key, and cross-reference checks."""

from __future__ import annotations

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
    return config
