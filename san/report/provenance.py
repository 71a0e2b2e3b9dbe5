"""The run a report speaks of: commit, config hash, date and machine, recorded once in summary.json and named by
every generated table (:mod:`san.report.readme`), so that a reader knows which run a number comes from."""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from san.core.provenance import git_commit

KEYS = ("commit", "config_hash", "date", "machine")
"""The fields of a run record, in the order the tables name them."""


def config_hash(config: Mapping[str, Any]) -> str:
    """The first 12 hex digits of the sha256 of ``config`` as sorted JSON: two runs of one config share it."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]


def machine() -> str:
    """This machine in words: host name, architecture and CPU count."""
    return f"{platform.node() or 'unknown host'} ({platform.machine() or 'unknown'}, {os.cpu_count()} CPUs)"


def results_config_hash(files: Iterable[str | Path]) -> str:
    """:func:`config_hash` of the config slices the run's result files were computed from: the ``config`` attribute
    of every netCDF file among ``files``, by file name (other files are skipped). Two runs whose results were
    computed from the same settings share it, whatever else of their configs (figure styles, thresholds) differs."""
    import netCDF4

    slices = {}
    for path in sorted({Path(f) for f in files if str(f).endswith(".nc")}):
        with netCDF4.Dataset(path) as ds:
            slices[path.as_posix()] = ds.getncattr("config") if "config" in ds.ncattrs() else None
    return config_hash(slices)


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


def source_line(record: Mapping[str, Any], what: str = "Source run") -> str:
    """The line a generated table ends with: ``what``: commit, config hash, date, machine; a record lacking a field
    is an error naming it."""
    missing = [k for k in KEYS if not record.get(k)]
    if missing:
        raise KeyError(f"the run record lacks {missing} (expected {list(KEYS)})")
    commit = str(record["commit"])
    short = commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")
    return f"<sub>{what}: commit {short}, config {record['config_hash']}, {record['date']}, {record['machine']}.</sub>"
