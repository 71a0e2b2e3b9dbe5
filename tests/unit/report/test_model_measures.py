"""The model report's per-layer measures table: one row per measure, weight set, variant and layer, the sink share's
from the attention per head (the per-sequence attention, a variable of its own, adds no row)."""

import numpy as np
import xarray as xr

from san.report.model_report import measures_table


def test_one_row_per_measure_and_layer_with_the_per_sequence_attention_left_to_the_sink_share():
    w, v, layers, samples, heads = ["init"], ["SAN", "transformer"], 3, 4, 2
    rng = np.random.default_rng(0)
    ds = xr.Dataset(
        {"residual_ratio": (("weights", "variant", "layer", "sample"), rng.uniform(size=(1, 2, layers, samples))),
         "first_token_attention_by_sample": (("weights", "variant", "layer", "sample", "head"),
                                             rng.uniform(size=(1, 2, layers, samples, heads)))},
        coords={"weights": w, "variant": v, "layer": np.arange(layers)},
    )  # fmt: skip
    ds["first_token_attention"] = ds["first_token_attention_by_sample"].mean("sample")
    table = measures_table(ds, "m")
    assert sorted(set(table.measure)) == ["residual_ratio", "sink_share"]
    assert len(table) == 2 * len(v) * layers
    one = table[(table.measure == "residual_ratio") & (table.variant == "SAN") & (table.layer == 1)].iloc[0]
    assert one["mean"] == ds["residual_ratio"].sel(weights="init", variant="SAN", layer=1).mean().item()
    assert one["n"] == samples
