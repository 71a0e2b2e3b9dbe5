"""The path-effectiveness wing's tables of README.md and docs/ (Fig. 4 and the exact decomposition as numbers), from
a run's summary.json and the paths summary (``results/paths/summary.csv``, written by :mod:`san.paths.table`)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.core.markdown import MissingKey, fmt, lookup, markdown

#: the run's data these tables read besides summary.json, by snapshot name: its path in the results folder (it
#: exists only where the run has a path-effectiveness task)
DATA = {"paths_summary.csv": Path("paths/summary.csv")}


def paths_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """Fig. 4: per task and number of sampled paths, the mean token accuracy by path length k (mean over seeds),
    next to the full model, the input-blind predictor, and the seeds with the largest range over seeds of an
    accuracy by path length (the paths summary)."""
    paths_csv = data.get("paths_summary.csv")
    if paths_csv is None:
        return "No path-effectiveness task in this run.\n"
    import pandas as pd

    table = pd.read_csv(paths_csv)
    missing = {"task", "full_model", "chance"} - set(table.columns)
    if missing:
        raise MissingKey(f"{paths_csv} lacks the column(s) {sorted(missing)} that the README table 'paths' needs")
    cells = [(c, *map(int, m.groups())) for c in table.columns if (m := re.fullmatch(r"acc_n(\d+)_k(\d+)", c))]
    ns, ks = sorted({n for _, n, _ in cells}), sorted({k for _, _, k in cells})
    rows = []
    for _, row in table.iterrows():
        for i, n in enumerate(ns):
            spread = f"{int(row.get('n_seeds', 1))} / {row.get('seed_range_max', math.nan):.3f}"
            first = [row["task"], f"{row['full_model']:.3f}", f"{row['chance']:.3f}", spread] if i == 0 else [""] * 4
            rows.append([*first, n, *(f"{row.get(f'acc_n{n}_k{k}', math.nan):.3f}" for k in ks)])
    header = ["task", "full model", "input-blind", "seeds / largest seed range", "paths", *(f"k={k}" for k in ks)]
    return markdown(header, rows)


def path_decomposition_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """The exact decomposition: accuracy truncated at each path length K, and the share of the gain over the
    input-blind level carried by the paths of length <= ``short``; the norm share of those paths, trained / init."""
    name = "path_decomposition"
    section = lookup(summary, "path_decomposition", name)
    if section is None:
        return "No path-effectiveness task in this run.\n"
    short = lookup(summary, "path_decomposition.short", name)
    rows = []
    for task in lookup(summary, "path_decomposition.per_task", name):
        key = f"path_decomposition.per_task.{task}"
        truncated = lookup(summary, f"{key}.truncated", name)
        shares = lookup(summary, f"{key}.norm_share_short", name)
        rows.append([
            task, f"{lookup(summary, f'{key}.full', name):.3f}", f"{lookup(summary, f'{key}.chance', name):.3f}",
            " ".join(f"{truncated[k]:.3f}" for k in sorted(truncated, key=int)),
            fmt(lookup(summary, f"{key}.short_share_of_gain", name)),
            f"{fmt(shares.get('trained'))} / {fmt(shares.get('init'))}",
        ])  # fmt: skip
    header = ["task", "full", "input-blind", "truncated at K = 0, 1, ...", f"gain share, K <= {short}",
              f"norm share of lengths <= {short}, trained / init"]  # fmt: skip
    return markdown(header, rows)


#: the wing's tables, by block name
TABLES = {"paths": paths_table, "path_decomposition": path_decomposition_table}
