"""The training-dynamics figure from a synthetic series: the residual panels, the transformer's pretrained phenomena
per checkpoint (largest massive ratio and first-token norm ratio, lowest matrix entropy, recomputed by hand) and the
sink share, on the sorted step axis; without the transformer variant the phenomena row is left out."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

from san.rank_collapse.series.plots import training_dynamics_figure

STEPS = [0.0, 8.0, 1.0, 2.0]  # unsorted, as revisions may be listed


def _series(variants=("SAN", "SAN+skip", "transformer")) -> xr.Dataset:
    """Two seeds, four revisions, 3 blocks, 3 sequences, 2 heads; each measure drawn at random per cell."""
    rng = np.random.default_rng(1)
    dims = ("seed", "revision", "variant", "layer", "sample")
    shape = (2, len(STEPS), len(variants), 4, 3)
    alpha = rng.uniform(0, 1, size=(*shape[:4], 2))
    alpha[:, :, :, 0] = np.nan
    return xr.Dataset(
        {
            "residual_ratio": (dims, rng.uniform(1e-3, 1, size=shape)),
            "first_token_attention": (("seed", "revision", "variant", "layer", "head"), alpha),
            "massive_ratio": (dims, rng.uniform(1, 3000, size=shape)),
            "first_token_norm_ratio": (dims, rng.uniform(0.5, 50, size=shape)),
            "matrix_entropy": (dims, rng.uniform(0, 1, size=shape)),
        },
        coords={
            "seed": [0, 1],
            "revision": [f"step{int(s)}" for s in STEPS],
            "step": ("revision", STEPS),
            "variant": list(variants),
            "layer": [0, 1, 2, 3],
        },
    )


def _panel(fig: plt.Figure, title: str) -> plt.Axes:
    return next(ax for ax in fig.axes if ax.get_title() == title)


def test_the_phenomena_panels_draw_the_transformer_per_checkpoint():
    ds = _series()
    fig = training_dynamics_figure(ds, "offline series", 0.3)
    assert len(fig.axes) == 3 + 3 + 1 and all(ax.lines for ax in fig.axes)
    order = np.argsort(STEPS)
    per_layer = {name: ds[name].sel(variant="transformer").values.mean(axis=-1) for name in ds.data_vars}
    expected = {
        "massive activations": per_layer["massive_ratio"].max(axis=-1),
        "first token's norm": per_layer["first_token_norm_ratio"].max(axis=-1),
        "compression valley": per_layer["matrix_entropy"].min(axis=-1),
    }
    for title, by_seed in expected.items():
        ax = _panel(fig, title)
        x, y = ax.lines[0].get_data()
        np.testing.assert_allclose(x, np.sort(STEPS))
        np.testing.assert_allclose(y, by_seed.mean(axis=0)[order])
        assert ax.get_xscale() == "symlog"
    assert _panel(fig, "massive activations").get_yscale() == "log"
    assert _panel(fig, "compression valley").get_ylim() == pytest.approx((-0.02, 1.02))
    plt.close(fig)


def test_without_the_transformer_the_phenomena_row_is_left_out_and_a_missing_measure_is_named():
    fig = training_dynamics_figure(_series(("SAN", "SAN+skip")), "offline series", 0.3)
    assert len(fig.axes) == 3 + 1 and not any("massive" in ax.get_title() for ax in fig.axes)
    plt.close(fig)
    opened = plt.get_fignums()
    with pytest.raises(KeyError, match="massive_ratio"):
        training_dynamics_figure(_series().drop_vars("massive_ratio"), "offline series", 0.3)
    assert plt.get_fignums() == opened  # no figure begun
