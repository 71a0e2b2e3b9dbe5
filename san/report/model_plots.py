"""The figure of one model's page (:mod:`san.report.model_report`): per layer, the relative residual of the four
variants (Dong et al. 2021 Fig. 2, log scale) and the unmodified model's massive ratio, first-token norm ratio,
matrix entropy and sink share (:mod:`san.measures.phenomena`), one row per weight set; the verdicts that apply to the
model printed below."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from san.claims.verdicts import NOT_JUDGED  # noqa: E402
from san.core.plotting import DOUBLE_IN  # noqa: E402
from san.report.model_report import PAGE_MEASURES, UNMODIFIED  # noqa: E402

#: measures drawn on a log scale where they span more than a decade (ratios)
LOG_MEASURES = ("residual_ratio", "massive_ratio", "first_token_norm_ratio")
#: the panels' titles
SHORT = {
    "residual_ratio": "relative residual",
    "massive_ratio": "massive ratio",
    "first_token_norm_ratio": "first-token norm ratio",
    "matrix_entropy": "matrix entropy",
    "sink_share": "sink share",
}


def model_figure(measures: pd.DataFrame, model: str, verdicts: Mapping[str, Any]) -> plt.Figure:
    """One row per weight set, one panel per measure of :data:`PAGE_MEASURES` (mean +- std over the input sequences
    per layer); the relative residual for every variant, the other measures for the unmodified model; the verdicts'
    printed states as the caption."""
    weights = list(dict.fromkeys(measures["weights"]))
    names = list(PAGE_MEASURES)
    fig, axes = plt.subplots(
        len(weights), len(names), figsize=(DOUBLE_IN * 1.4, 2.2 * len(weights) + 0.8), squeeze=False
    )
    for i, w in enumerate(weights):
        part = measures[measures["weights"] == w]
        for j, name in enumerate(names):
            ax = axes[i][j]
            variants = list(dict.fromkeys(part["variant"])) if name == "residual_ratio" else [UNMODIFIED]
            for v in variants:
                line = part[(part["variant"] == v) & (part["measure"] == name)].sort_values("layer")
                if line.empty or line["mean"].isna().all():
                    continue
                ax.plot(line["layer"], line["mean"], marker="o", markersize=2.5, label=v)
                ax.fill_between(line["layer"], line["mean"] - line["std"], line["mean"] + line["std"], alpha=0.2)
            values = part.loc[part["measure"] == name, "mean"]
            values = values[values > 0]
            if name in LOG_MEASURES and len(values) and values.max() > 10 * values.min():
                ax.set_yscale("log")
            ax.set_title(SHORT[name], fontsize="small")
            ax.set_xlabel("layer")
            if j == 0:
                ax.set_ylabel(f"{w} weights")
        axes[i][0].legend(fontsize="small")
    rows = [r for kind in verdicts["verdicts"].values() for r in kind if r["verdict"] != NOT_JUDGED]
    caption = "; ".join(f"{r['claim']}: {r['verdict']}" for r in rows) or "no claim judged on this model alone"
    fig.suptitle(f"{model}: the four variants' relative residual; the other panels the unmodified model")
    fig.text(0.01, -0.02, caption, wrap=True, fontsize="small", va="top")
    fig.tight_layout()
    return fig
