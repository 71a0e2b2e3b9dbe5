"""The run a report speaks of: commit, config hash, date and machine, recorded once in summary.json and named by
every generated table (:mod:`san.report.readme`), so that a reader knows which run a number comes from."""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from san.core.provenance import git_commit

KEYS = ("commit", "config_hash", "date", "machine")
"""The fields of a run record, in the order the tables name them."""
BENCHMARK_KEYS = ("command", "commit", "date", "machine")
"""The fields of a benchmark's record (:func:`benchmark_record`), in the order its tables name them."""


def config_hash(config: Mapping[str, Any]) -> str:
    """The first 12 hex digits of the sha256 of ``config`` as sorted JSON: two runs of one config share it."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]


def machine() -> str:
    """This machine in words: host name, architecture and CPU count."""
    return f"{platform.node() or 'unknown host'} ({platform.machine() or 'unknown'}, {os.cpu_count()} CPUs)"


def results_config_hash(files: Iterable[str | Path]) -> str:
    """:func:`config_hash` of the config slices the run's result files were computed from: the ``config`` attribute
    of every netCDF file among ``files`` (other files are skipped), each parsed and keyed by its path relative to the
    folder the files share. Two runs whose results were computed from the same settings share it, wherever their
    results lie and in whatever order the files are listed, whatever else of their configs (figure styles,
    thresholds) differs; the commit, date and machine are recorded apart (:func:`run_record`)."""
    import netCDF4

    paths = sorted({Path(os.path.abspath(f)) for f in files if str(f).endswith(".nc")})
    if not paths:
        return config_hash({})
    base = Path(os.path.commonpath([p.parent for p in paths]))
    slices = {}
    for path in paths:
        with netCDF4.Dataset(path) as ds:
            raw = ds.getncattr("config") if "config" in ds.ncattrs() else None
        slices[path.relative_to(base).as_posix()] = None if raw is None else _parsed(raw)
    return config_hash(slices)


def _parsed(raw: str) -> Any:
    """A ``config`` attribute as data (its JSON parsed, so the key order and spacing it was written with do not
    count); a string that is not JSON as it is."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def benchmark_record(command: str, now: datetime | None = None) -> dict[str, str]:
    """The record of a benchmark writing now: the ``command`` that produced its table (as a reader reruns it), the
    checkout's commit (``+dirty`` for local edits), the UTC date and :func:`machine`."""
    now = now or datetime.now(UTC)
    return {
        "command": command,
        "commit": git_commit(),
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
    }


def run_record(config_digest: str, now: datetime | None = None) -> dict[str, str]:
    """The record of the run writing now: the checkout's commit (``+dirty`` for local edits), ``config_digest``
    (:func:`results_config_hash` of the run's results), the UTC date and :func:`machine`."""
    now = now or datetime.now(UTC)
    return {
        "commit": git_commit(),
        "config_hash": config_digest,
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
    }


def _short_commit(record: Mapping[str, Any], keys: Sequence[str], what: str) -> str:
    """The commit of a ``what`` record (a run's or a benchmark's) as a source line prints it: its first 12 characters,
    marked ``+dirty`` where the tree had uncommitted changes; a record lacking one of ``keys`` is an error naming
    it."""
    missing = [k for k in keys if not record.get(k)]
    if missing:
        raise KeyError(f"the {what} record lacks {missing} (expected {list(keys)})")
    commit = str(record["commit"])
    return commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")


def source_line(record: Mapping[str, Any], what: str = "Source run") -> str:
    """The line a generated table ends with: ``what``: commit, config hash, date, machine; a record lacking a field
    is an error naming it."""
    short = _short_commit(record, KEYS, "run")
    return f"<sub>{what}: commit {short}, config {record['config_hash']}, {record['date']}, {record['machine']}.</sub>"


def benchmark_line(record: Mapping[str, Any]) -> str:
    """The line a benchmark table ends with: the command that wrote it, commit, date, machine; a record lacking a
    field is an error naming it."""
    short = _short_commit(record, BENCHMARK_KEYS, "benchmark")
    return f"<sub>Source benchmark: `{record['command']}`, commit {short}, {record['date']}, {record['machine']}.</sub>"
