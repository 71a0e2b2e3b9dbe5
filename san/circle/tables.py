"""The circle's table of README.md and docs/ (Fig. 3 as numbers), from a run's summary.json."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.core.markdown import lookup, markdown


def circle_table(summary: Mapping[str, Any], data: Mapping[str, Path]) -> str:
    """Fig. 3: runs per variant whose two tokens collapsed."""
    per_variant = lookup(summary, "circle.per_variant", "circle")
    rows = []
    for variant in per_variant:
        collapsed = lookup(summary, f"circle.per_variant.{variant}.collapsed", "circle")
        rows.append([variant, f"{collapsed} / {lookup(summary, f'circle.per_variant.{variant}.runs', 'circle')}"])
    return markdown(["variant", "collapsed runs"], rows)


#: the wing's tables, by block name
TABLES = {"circle": circle_table}
