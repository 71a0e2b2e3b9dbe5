"""``python -m san.check [OVERLAY ...]``: a run's config checked before Snakemake starts (torch-free).

Snakemake parses every ``--configfile`` overlay itself, before the workflow starts, and names neither the file nor the
line of a YAML error (a missing overlay is a traceback). This check reads ``config.yaml`` and the overlays as a run
lays them (nested mappings merged), names the file, line and column of a YAML error or the missing file, then runs
the workflow's own check (:func:`san.experiments.check_config`, after config ``model`` is resolved), in one line.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

from snakemake.utils import update_config

from san.core.config import ConfigError, load_config_file
from san.experiments import check_config
from san.report.model_report import resolve_model


def check_files(overlays: list[str | Path], base: str | Path = "config.yaml") -> dict[str, Any]:
    """The config of a run with ``--configfile`` ``overlays`` laid over ``base`` (each in turn, nested mappings
    merged as Snakemake merges them), checked as the workflow checks it before any job (:func:`check_config`, after
    config ``model`` is resolved); returns it. Snakemake parses an overlay before the workflow starts and names
    neither the file nor the line of a YAML error; this check names the file, line and column, or the missing file,
    and raises :class:`san.core.config.ConfigError`."""
    reference = load_config_file(base)
    config = copy.deepcopy(reference)
    for overlay in overlays:
        if not Path(overlay).is_file():
            raise ConfigError(f"config file {overlay}: not found (an overlay given with --configfile must exist)")
        update_config(config, load_config_file(overlay))
    resolve_model(config)
    check_config(config, Path(base).resolve().parent / "workflow" / "schemas", reference=reference)
    return config


def main(argv: list[str] | None = None) -> int:
    """``python -m san.check [OVERLAY ...]``: check the run's config (``config.yaml`` of the working
    directory, the overlays laid over it) as the workflow does before any job, and print one line: what is wrong,
    naming the file or key, or what the run holds."""
    parser = argparse.ArgumentParser(prog="python -m san.check", description=main.__doc__)
    parser.add_argument("overlays", nargs="*", help="config files given to snakemake with --configfile, in order")
    parser.add_argument("--base", default="config.yaml", help="the workflow's config file (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        config = check_files(args.overlays, args.base)
    except ConfigError as exc:
        print(f"config error: {exc}")
        return 2
    models = sorted(config.get("rank_collapse", {}).get("models", []))
    files = " + ".join(map(str, [args.base, *args.overlays]))
    print(f"config OK: {files} ({len(models)} rank-collapse models)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
