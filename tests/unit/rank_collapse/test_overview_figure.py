"""The rank-collapse overview (Fig. 2 as one figure): every panel carries data, pretrained weights get rows of their
own only where models have them, and the figure keeps a two-column page's width."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

from san.core.plotting import DOUBLE_IN
from san.rank_collapse.plots import overview_rows, rank_collapse_overview_figure
from san.rank_collapse.spec import VARIANTS


def _dataset(weights: list[str], layers: int = 4) -> xr.Dataset:
    rng = np.random.default_rng(0)
    data = rng.uniform(1e-12, 1.0, size=(len(weights), len(VARIANTS), layers, 3))
    ratio = xr.DataArray(
        data,
        dims=("weights", "variant", "layer", "sample"),
        coords={"weights": weights, "variant": list(VARIANTS), "layer": np.arange(layers)},
    )
    return xr.Dataset({"residual_ratio": ratio})


def _models(n_init: int, n_pretrained: int) -> dict[str, xr.Dataset]:
    out = {f"m{i}": _dataset(["init", "pretrained"]) for i in range(n_pretrained)}
    return out | {f"m{i}": _dataset(["init"]) for i in range(n_pretrained, n_init)}


def test_rows_hold_only_the_models_with_those_weights():
    rows, n_cols = overview_rows(_models(9, 4), max_cols=5)
    assert n_cols == 5
    assert [(w, len(models)) for w, models in rows] == [("init", 5), ("init", 4), ("pretrained", 4)]
    assert rows[2][1] == ["m0", "m1", "m2", "m3"]


def test_rows_spread_evenly_and_never_exceed_max_cols():
    assert overview_rows(_models(6, 0), max_cols=5)[1] == 3  # 3 + 3, not 5 + 1
    assert overview_rows(_models(2, 1), max_cols=5) == ([("init", ["m0", "m1"]), ("pretrained", ["m0"])], 2)


@pytest.mark.slow
@pytest.mark.parametrize(("n_init", "n_pretrained"), [(9, 4), (4, 1), (1, 0)])
def test_every_visible_panel_carries_data(n_init, n_pretrained):
    fig = rank_collapse_overview_figure(_models(n_init, n_pretrained))
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    assert len(panels) == n_init + n_pretrained
    assert all(ax.lines for ax in panels)
    assert not any("no " in t.get_text() for ax in fig.axes for t in ax.texts)  # no placeholder boxes
    if n_init > 2:
        assert fig.get_size_inches()[0] == pytest.approx(DOUBLE_IN)
    plt.close(fig)


@pytest.mark.slow
def test_the_legend_fills_a_free_slot_of_the_grid():
    fig = rank_collapse_overview_figure(_models(9, 4))
    legend_slots = [ax for ax in fig.axes if ax.get_visible() and not ax.axison and ax.get_legend()]
    assert len(legend_slots) == 1 and not fig.legends
    plt.close(fig)


def test_panels_name_a_decoder_and_a_gguf_type_and_the_pretrained_legend_the_type():
    import json

    from san.rank_collapse.plots import panel_title, pretrained_collapse_figure

    dec = _dataset(["init", "pretrained"])
    dec.attrs = {"config": json.dumps({"family": "llama"}),
                 "manifests": json.dumps({"pretrained": {"gguf_file": "smollm2-135m-instruct-q4_1.gguf"}})}  # fmt: skip
    enc = _dataset(["init"])
    enc.attrs = {"config": json.dumps({"family": "bert"})}
    assert panel_title("dec", dec, "pretrained") == "dec\n(pretrained, decoder, Q4_1)"
    assert panel_title("dec", dec, "init") == "dec\n(init, decoder)"
    assert panel_title("enc", enc, "init") == "enc\n(init)"
    fig = pretrained_collapse_figure({"dec": dec, "enc": enc})
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "dec (Q4_1)" in labels and "enc" not in labels, "only models with pretrained weights, typed"
    plt.close(fig)
