"""Wall time, CPU time and peak memory of every job of a run, from Snakemake's benchmark files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def runtimes_table(folder: str | Path) -> pd.DataFrame:
    """Wall time, CPU time and peak memory of every job from Snakemake's ``benchmark:`` files, slowest first.

    The rule is the first folder below ``folder`` (or the file name for single-job rules); the job is the rest.
    """
    folder = Path(folder)
    rows = []
    for tsv in sorted(folder.rglob("*.tsv")):
        rel = tsv.relative_to(folder).with_suffix("")
        df = pd.read_csv(tsv, sep="\t")
        rows.append(
            {
                "rule": rel.parts[0],
                "job": "/".join(rel.parts[1:]) or rel.parts[0],
                "wall_s": float(df["s"].iloc[-1]),
                "cpu_s": float(df["cpu_time"].iloc[-1]) if "cpu_time" in df else float("nan"),
                "max_rss_mb": float(df["max_rss"].iloc[-1]),
            }
        )
    columns = ["rule", "job", "wall_s", "cpu_s", "max_rss_mb"]
    return pd.DataFrame(rows, columns=columns).sort_values("wall_s", ascending=False, ignore_index=True)
