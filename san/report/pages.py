"""The report's pages besides its front page: every verdict (the rendered ``verdicts.rst`` caption as a page of its
own) and the interactive models x claims x layers view, each a self-contained HTML file (styles and plotly's
JavaScript inlined, so the report works offline), linked from the front page (:mod:`san.report.front`).

The interactive view has two linked parts: the pretrained phenomena's models x claims grid (each cell the claim's
verdict on that model alone, its statistic and note on hover; ``summary.json``'s ``phenomena`` section), and the
relative residual :math:`\\|res(X_l)\\|_{1,\\infty} / \\|X_l\\|_{1,\\infty}` of Fig. 2 per model and layer (mean over
sequences, log10 colour scale), one panel per variant and weights, chosen from a menu.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.claims.drift import WITHIN_DRIFT
from san.core.plotting import OKABE_ITO

STATE_COLOURS = {
    "holds": OKABE_ITO["bluish green"],
    "fails": OKABE_ITO["vermillion"],
    "no power": OKABE_ITO["yellow"],
    WITHIN_DRIFT: OKABE_ITO["sky blue"],
    "not judged": "#BBBBBB",
    "n/a": "#FFFFFF",
}
"""A colour-blind-safe colour per cell state (Okabe & Ito; "n/a" white: the claim is not about that model)."""


def rst_page(rst: str, title: str) -> str:
    """A reStructuredText document as one standalone HTML page (docutils, its stylesheet embedded)."""
    from docutils.core import publish_string

    settings = {"embed_stylesheet": True, "report_level": 3, "halt_level": 5, "title": title}
    return publish_string(rst, writer="html5", settings_overrides=settings).decode()


def _phenomena_heatmap(section: Mapping[str, Any]) -> Any:
    """The models x claims grid of the phenomena section as a plotly heatmap (discrete colours per state)."""
    import plotly.graph_objects as go

    models, claims = list(section["table"]), list(section["claims"])
    labels = [section["claims"][c] for c in claims]
    states = list(STATE_COLOURS)
    cells = [[section["table"][m][c] for c in claims] for m in models]
    z = [[states.index(x["verdict"]) if x["verdict"] in states else states.index("not judged") for x in row]
         for row in cells]  # fmt: skip
    text = [
        [f"{m}<br>{lab}<br><b>{x['verdict']}</b><br>{x.get('note') or ''}" for x, lab in zip(row, labels, strict=True)]
        for m, row in zip(models, cells, strict=True)
    ]
    n = len(states)
    scale = [[edge, colour] for i, colour in enumerate(STATE_COLOURS.values()) for edge in (i / n, (i + 1) / n)]
    return go.Heatmap(
        z=z, x=labels, y=[f"{m} ({section['models'][m]})" for m in models], text=text, hoverinfo="text",
        colorscale=scale, zmin=-0.5, zmax=n - 0.5, xgap=2, ygap=2,
        colorbar={"tickvals": list(range(n)), "ticktext": states, "title": {"text": "verdict"}},
    )  # fmt: skip


def _residual_heatmaps(datasets: Mapping[str, xr.Dataset]) -> list[tuple[str, Any]]:
    """One heatmap per (weights, variant): models x layers, log10 of the mean relative residual over sequences."""
    import plotly.graph_objects as go

    combos = list(dict.fromkeys(
        (str(w), str(v)) for ds in datasets.values() for w in ds["weights"].values for v in ds["variant"].values
    ))  # fmt: skip
    depth = max((ds.sizes["layer"] for ds in datasets.values()), default=0)
    out = []
    for weights, variant in combos:
        rows, names = [], []
        for model, ds in datasets.items():
            if weights not in ds["weights"].values or variant not in ds["variant"].values:
                continue
            mean = ds["residual_ratio"].sel(weights=weights, variant=variant)
            mean = mean.mean([d for d in mean.dims if d != "layer"]).values.astype(float)
            row = np.full(depth, np.nan)
            row[: len(mean)] = np.log10(np.clip(mean, 1e-300, None))
            rows.append(row)
            names.append(model)
        heat = go.Heatmap(
            z=rows, x=list(range(depth)), y=names, colorscale="Viridis", zmin=-16, zmax=0,
            colorbar={"title": {"text": "log10 relative residual"}},
            hovertemplate="%{y}<br>layer %{x}<br>log10 ratio %{z:.2f}<extra></extra>",
        )  # fmt: skip
        out.append((f"{variant}, {weights} weights", heat))
    return out


def claims_view(summary: Mapping[str, Any], rank_collapse: Mapping[str, xr.Dataset]) -> str:
    """The interactive models x claims x layers page: the phenomena grid and the per-layer relative residual of every
    model (a menu picks the variant and weights), as one self-contained HTML page with plotly.js inlined."""
    import plotly.graph_objects as go

    parts = ["<h1>Models x claims x layers</h1>"]
    section = summary.get("phenomena") or {}
    if section.get("table"):
        fig = go.Figure(_phenomena_heatmap(section))
        fig.update_layout(
            title="Pretrained phenomena: each claim's verdict on each model (hover: the statistic)",
            height=180 + 34 * len(section["table"]), margin={"l": 220}, xaxis={"tickangle": -30},
        )  # fmt: skip
        parts.append(fig.to_html(full_html=False, include_plotlyjs=True))
    heatmaps = _residual_heatmaps(rank_collapse)
    if heatmaps:
        fig = go.Figure([h for _, h in heatmaps])
        for i, trace in enumerate(fig.data):
            trace.visible = i == 0
        buttons = [
            {"label": name, "method": "update",
             "args": [{"visible": [j == i for j in range(len(heatmaps))]}, {"title": f"Relative residual: {name}"}]}
            for i, (name, _) in enumerate(heatmaps)
        ]  # fmt: skip
        fig.update_layout(
            title=f"Relative residual: {heatmaps[0][0]}", xaxis_title="layer", yaxis_title="model",
            height=200 + 30 * len(rank_collapse), margin={"l": 220},
            updatemenus=[{"buttons": buttons, "x": 1.0, "xanchor": "right", "y": 1.18, "yanchor": "top"}],
        )  # fmt: skip
        parts.append(fig.to_html(full_html=False, include_plotlyjs=not section.get("table")))
    if len(parts) == 1:
        parts.append("<p>This run has neither pretrained phenomena nor rank-collapse results.</p>")
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Models x claims x layers</title>'
        "<style>body{font-family:sans-serif;margin:1.5em}</style></head>\n"
        f"<body>{body}</body></html>\n"
    )
