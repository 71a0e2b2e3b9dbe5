"""Compare the netCDF results of two runs variable by variable: are they numerically identical?

    python -m san.core.compare RUN_A/results RUN_B/results [--rtol 0]

For every ``.nc`` file present under both folders (same relative path) it compares the data variables and
coordinates that both files hold (values and dims; attributes, which carry provenance and timings, are ignored) and
lists the variables that only one side holds. Exit status 0 when every shared variable is identical (or, with
``--rtol``, within that relative tolerance), 1 otherwise. Used to check that a refactoring changed no number.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np
import xarray as xr

from san.core.cli import add_verbose, quiet_libraries

#: what a workflow run needs from a checkout (no results, no virtual environment): the Snakefile is in workflow/; a
#: root Snakefile is copied where a checkout has one (a commit that benchmarks/same_numbers.py compares)
WORKFLOW_ITEMS = ("Snakefile", "config.yaml", "workflow", "scripts", "san", "envs", "profiles", "config")


def copy_workflow(source: Path, dest: Path) -> Path:
    """Copy the workflow of the checkout ``source`` (:data:`WORKFLOW_ITEMS`) into ``dest``, so that a run there
    starts from scratch and may edit its copy freely (the tests, the benchmarks and the two-run comparison)."""
    dest.mkdir(parents=True, exist_ok=True)
    for item in WORKFLOW_ITEMS:
        src = source / item
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, dest / item)
    return dest


def compare_files(a: Path, b: Path, rtol: float = 0.0) -> list[str]:
    """Differences between two result files: one line per differing or one-sided variable (empty: identical)."""
    problems = []
    with xr.open_dataset(a) as da, xr.open_dataset(b) as db:
        names_a, names_b = set(da.variables), set(db.variables)
        for name in sorted(names_a ^ names_b):
            problems.append(f"{name}: only in {'A' if name in names_a else 'B'}")
        for name in sorted(names_a & names_b):
            va, vb = da[name], db[name]
            if va.dims != vb.dims or va.shape != vb.shape:
                problems.append(f"{name}: dims {va.dims}{va.shape} vs {vb.dims}{vb.shape}")
                continue
            x, y = va.values, vb.values
            if x.dtype.kind in "fc":
                same = (
                    np.allclose(x, y, rtol=rtol, atol=0.0, equal_nan=True)
                    if rtol
                    else np.array_equal(x, y, equal_nan=True)
                )
            else:
                same = np.array_equal(x, y)
            if not same:
                diff = np.nanmax(np.abs(x - y)) if x.dtype.kind in "fc" else "values differ"
                problems.append(f"{name}: max |A - B| = {diff}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--rtol", type=float, default=0.0, help="relative tolerance (default 0: bit-identical)")
    add_verbose(parser)
    args = parser.parse_args(argv)
    quiet_libraries(args.verbose)
    files_a = {p.relative_to(args.a) for p in args.a.rglob("*.nc")}
    files_b = {p.relative_to(args.b) for p in args.b.rglob("*.nc")}
    failed = 0
    for rel in sorted(files_a | files_b):
        if rel not in files_a or rel not in files_b:
            print(f"{rel}: only in {'A' if rel in files_a else 'B'}")
            continue
        problems = compare_files(args.a / rel, args.b / rel, args.rtol)
        failed += bool([p for p in problems if "only in" not in p])
        print(f"{rel}: {'identical' if not problems else '; '.join(problems)}")
    print(f"{len(files_a & files_b)} files compared, {failed} with differing values")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
