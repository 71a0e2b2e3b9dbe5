"""Config validation: JSON-Schema with defaults, clear messages naming the key, and cross-reference checks."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012


class ConfigError(ValueError):
    """A config value is missing, of the wrong type, or refers to something undefined."""


def load_yaml(path: Path) -> Any:
    """The parsed YAML file at ``path`` (a schema file; a config file goes through :func:`load_config_file`): parsed
    once per version of the file (its modification time and size), as every config check reads every schema, and
    returned as a fresh copy that the caller may change."""
    stat = Path(path).stat()
    return copy.deepcopy(_parsed_yaml(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size))


#: libyaml's safe loader where PyYAML was built with it (the same documents, some ten times faster: every Snakemake
#: start reads every schema), else PyYAML's own
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=64)
def _parsed_yaml(path: str, mtime_ns: int, size: int) -> Any:
    with open(path) as fh:
        return yaml.load(fh, Loader=SAFE_LOADER)


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML config file as a mapping; raises :class:`ConfigError` naming the file (and the line and column, where
    YAML knows them) when it is not valid YAML, is empty, or does not hold a mapping of config keys."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path}: cannot be read ({exc})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark, context_mark = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
        mark = mark or context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        context = getattr(exc, "context", None)
        if context and context_mark is not None and context_mark is not mark:
            context += f" (line {context_mark.line + 1}, column {context_mark.column + 1})"
        problem = ": ".join(str(p) for p in (context, getattr(exc, "problem", None)) if p)
        raise ConfigError(f"config file {path}{where}: invalid YAML: {problem or exc}") from exc
    if data is None:
        raise ConfigError(
            f"config file {path} is empty: it must hold a mapping of config keys "
            "(the shipped config.yaml documents every key)"
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {path}: the top level must be a mapping of config keys, not a {type(data).__name__}"
        )
    return data


def check_config_files(paths: list[str | Path]) -> None:
    """Read every config file in ``paths`` that exists (:func:`load_config_file`), so a YAML syntax error or an
    empty file is reported with its name and line before Snakemake's own loader reports it without them."""
    for path in paths:
        if Path(path).is_file():
            load_config_file(path)


def _key_path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "(top level)"


def describe_error(error: jsonschema.ValidationError, prefix: str = "") -> str:
    """One line that names the config key of a schema violation and what was expected (``prefix``: the dotted place
    in the config of a slice validated on its own, e.g. ``paths.derived_tasks.sorting_10k``)."""
    if error.validator in ("oneOf", "anyOf") and error.context:
        # report the alternative the value meant (its type and `source` match) instead of "not valid under any"
        branches: dict[Any, list[jsonschema.ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)

        def mismatch(errs: list[jsonschema.ValidationError]) -> tuple[bool, int]:
            wrong_kind = any(e.validator in ("type", "const") and len(e.relative_path) <= 1 for e in errs)
            return wrong_kind, len(errs)

        return "; ".join(describe_error(e, prefix) for e in min(branches.values(), key=mismatch))
    key = _key_path(error)
    if prefix:  # errors of a config slice validated on its own, named by the slice's place in the config
        key = prefix if key == "(top level)" else f"{prefix}.{key}"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        where = "the top level" if key == "(top level)" else f"'{key}'"
        return f"unknown config key(s) {extra} under {where}; allowed keys: {allowed}"
    if "propertyNames" in error.schema_path:
        return (
            f"config key '{key}': name {error.instance!r} is not allowed ({error.message}): names become file "
            "paths and wildcards, so they use letters, digits and the characters shown, starting with a letter or digit"
        )
    if error.validator == "required":
        return f"config key '{key}': {error.message}"
    expected = error.schema.get("description", "")
    msg = f"config key '{key}': {error.message}"
    return msg + (f" (expected: {expected})" if expected else "")


def _is_integer(checker: Any, instance: Any) -> bool:
    # JSON Schema counts 4.0 as an integer and Python counts True as one; a job given either crashes or miscounts
    return isinstance(instance, int) and not isinstance(instance, bool)


def default_filling(validator_class: type) -> type:
    """A validator that fills in each property's ``default`` (as Snakemake's ``validate`` does) and accepts only
    Python ints (not floats such as 4.0, not booleans) where the schema says ``integer``."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):  # type: ignore[no-untyped-def]
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(prop, sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(
        validator_class,
        {"properties": set_defaults},
        type_checker=validator_class.TYPE_CHECKER.redefine("integer", _is_integer),
    )


def _sub_schema(path: Path) -> Resource:
    """A schema file that another one ``$ref``s, read as a 2020-12 resource *without* its own ``$schema``.

    jsonschema validates a sub-schema that declares ``$schema`` with that dialect's plain validator class, which
    would silently skip the defaults of everything under the ``$ref``; dropping the key keeps the default-filling
    class. (The key stays in the file for Snakemake's own ``validate``, which needs it to detect the dialect.)
    """
    contents = dict(load_yaml(path))
    contents.pop("$schema", None)
    return Resource(contents=contents, specification=DRAFT202012)


def _validator(schema_path: str | Path) -> jsonschema.protocols.Validator:
    """The default-filling validator of the schema at ``schema_path``, its ``$ref``s to sibling files resolved."""
    schema_path = Path(schema_path)
    registry = Registry(retrieve=lambda uri: _sub_schema(schema_path.parent / uri))
    return default_filling(jsonschema.Draft202012Validator)(load_yaml(schema_path), registry=registry)


def validate_config(config: dict[str, Any], schema_path: str | Path) -> dict[str, Any]:
    """Validate ``config`` in place against the schema at ``schema_path`` and fill in defaults.

    Raises :class:`ConfigError` listing every violation, each naming the dotted key and what was expected.
    """
    errors = sorted(_validator(schema_path).iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        lines = "\n".join(f"  - {describe_error(e)}" for e in errors)
        raise ConfigError(f"invalid config ({len(errors)} problem(s)):\n{lines}")
    return config


def overlay_config(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overlay`` laid over it (neither is changed): mappings merged key by key, lists and values
    replaced, and the dotted keys that ``overlay`` lists under ``replace`` (e.g. ``circle.variants``) replaced whole.
    How a small config such as tests/config/tiny.yaml shrinks config.yaml."""
    overlay = copy.deepcopy(overlay)
    return _overlay(copy.deepcopy(base), overlay, set(overlay.pop("replace", [])))


def _overlay(base: dict, changes: dict, replace: set[str], prefix: str = "") -> dict:
    out = dict(base)
    for key, value in changes.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(base.get(key), dict) and dotted not in replace:
            out[key] = _overlay(base[key], value, replace, f"{dotted}.")
        else:
            out[key] = copy.deepcopy(value)
    return out


def with_defaults(config: dict[str, Any], schema_path: str | Path) -> dict[str, Any]:
    """A copy of ``config`` with the defaults of the schema at ``schema_path`` filled in, valid or not (what
    :func:`validate_config` fills in, without its verdict)."""
    config = copy.deepcopy(config)
    for _ in _validator(schema_path).iter_errors(config):
        pass
    return config


def ordered_like(value: Any, reference: Any) -> Any:
    """``value`` with the keys of every mapping in the order of the same mapping in ``reference`` (the items of a
    list matched by position), keys that ``reference`` lacks after those, in their own order.

    Snakemake compares a job's params by their ``repr``, and a mapping's ``repr`` follows its key order; a config
    laid over config.yaml (``--configfile``) puts its own keys first. Put in the order of config.yaml, the same
    values give the same params whatever order the files wrote them in, so a restated value reruns nothing, and the
    order that config.yaml gives (e.g. the dimensions of a propagation sweep's ``grid``) stays the one every job
    sees."""
    if isinstance(value, dict):
        ref = reference if isinstance(reference, dict) else {}
        keys = [k for k in ref if k in value] + [k for k in value if k not in ref]
        return {k: ordered_like(value[k], ref.get(k)) for k in keys}
    if isinstance(value, list):
        ref = reference if isinstance(reference, list) else []
        return [ordered_like(v, ref[i] if i < len(ref) else None) for i, v in enumerate(value)]
    return value
