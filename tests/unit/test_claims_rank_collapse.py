"""Rank-collapse, attention-product and circle claims: each verdict once passing, once failing, with the config's
thresholds (and one edited threshold flipping a verdict)."""

import numpy as np
import pandas as pd
import xarray as xr
from test_summary import _pretrained, _rank_collapse

from san.circle.claims import circle_claims
from san.rank_collapse.claims import (
    attention_product_claims,
    pretrained_collapse_claims,
    pretrained_slower_claims,
    rank_collapse_claims,
)

from helpers import default_config

REPORT = default_config()["report"]


def test_causal_models_stay_out_of_the_rank_collapse_verdict():
    results = {"enc": _rank_collapse(2e-7, 0.3), "dec": _rank_collapse(5e-2, 0.3)}
    assert not rank_collapse_claims(results, **REPORT["rank_collapse"])["pure_collapses"]
    out = rank_collapse_claims(results, **REPORT["rank_collapse"], causal=("dec",))
    assert out["pure_collapses"] and out["judged"] == ["enc"] and out["causal"] == ["dec"]


def test_pretrained_collapse_must_be_fast():
    cfg = REPORT["pretrained_collapse"]
    fast = {"m": _pretrained([0.9, 0.1, 1e-4, 1e-9, 1e-9, 1e-9])}
    slow = {"m": _pretrained([0.9, 0.5, 0.1, 0.05, 2e-3, 5e-4])}  # below 1e-3 only at layer 5 of 5
    kw = {"threshold": cfg["threshold"], "max_layer_fraction": cfg["max_layer_fraction"]}
    assert pretrained_collapse_claims(fast, **kw)["pure_collapses_in_every_model"]
    assert not pretrained_collapse_claims(slow, **kw)["pure_collapses_in_every_model"]
    assert pretrained_collapse_claims(slow, **{**kw, "max_layer_fraction": 1.0})["pure_collapses_in_every_model"]


def test_pretrained_collapse_is_slower_than_init_only_by_the_configured_factor():
    kw = {"layer": REPORT["rank_collapse"]["layer"], "min_factor": REPORT["pretrained_collapse"]["slower_factor"]}
    ds = _pretrained([0.9, 0.5, 0.3, 0.1])  # init: 0.6 everywhere
    ds["residual_ratio"].loc[{"weights": "init", "variant": "SAN"}] = 1e-3
    out = pretrained_slower_claims({"m": ds}, **kw)
    assert out["slower_in_every_model"] and np.isclose(out["smallest_factor"], 300)
    ds["residual_ratio"].loc[{"weights": "init", "variant": "SAN"}] = 0.1  # pretrained only 3x above: not slower
    assert not pretrained_slower_claims({"m": ds}, **kw)["slower_in_every_model"]
    assert not pretrained_slower_claims({"m": ds}, **kw, causal=("m",))["slower_in_every_model"], "nothing judged"


def _products(longest: float) -> xr.Dataset:
    rank1 = np.array([[0.5, 0.5], [1e-2, 1e-2], [longest, longest]])[None]
    return xr.Dataset(
        {"rank1_residual": (("weights", "depth", "path"), rank1)}, coords={"weights": ["init"], "depth": [1, 2, 3]}
    )


def test_attention_products_must_shrink_by_the_configured_ratio():
    assert attention_product_claims({"m": _products(1e-6)}, **REPORT["attention_products"])[
        "longer_paths_closer_to_rank1"
    ]
    # a decrease, but by less than max_ratio: fails
    assert not attention_product_claims({"m": _products(0.4)}, **REPORT["attention_products"])[
        "longer_paths_closer_to_rank1"
    ]
    assert attention_product_claims({"m": _products(0.4)}, max_ratio=0.9)["longer_paths_closer_to_rank1"]


def _circle(pure: int, skip: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"variant": ["SAN", "SAN+skip"], "hidden_dim": [8, 8], "n_seeds": [10, 10], "n_collapsed": [pure, skip]}
    )


def test_circle_claim_needs_pure_collapse_in_most_runs_and_few_with_skips():
    assert circle_claims(_circle(9, 1), **REPORT["circle"])["pure_collapses_more"]
    assert not circle_claims(_circle(3, 1), **REPORT["circle"])["pure_collapses_more"], "pure collapses too rarely"
    assert not circle_claims(_circle(9, 8), **REPORT["circle"])["pure_collapses_more"], "skips collapse too"
