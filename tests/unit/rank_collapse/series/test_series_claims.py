"""The offline series' summary: what each seed learned against the unigram baseline (once holding, once failing),
the measures at the first and last checkpoint recomputed by hand, and the README table rendered from it."""

import numpy as np
import pytest
import xarray as xr

from san.core.markdown import MissingKey, fmt
from san.rank_collapse.series.claims import series_claims
from san.rank_collapse.series.tables import training_series_table

from helpers import default_config

REPORT = default_config()["report"]
KW = {
    "max_loss_ratio": REPORT["training_series"]["max_loss_ratio"],
    "share_threshold": REPORT["first_token_sink"]["share_threshold"],
}


def _series() -> xr.Dataset:
    """Two seeds, revisions step0, step4, step1 (unsorted), three variants, 3 blocks, 2 sequences, 2 heads, with
    the pretrained-phenomena measures per layer and sequence."""
    rng = np.random.default_rng(0)
    dims = ("seed", "revision", "variant", "layer", "sample")
    ratio = rng.uniform(0.01, 1, size=(2, 3, 3, 4, 2))
    alpha = rng.uniform(0, 1, size=(2, 3, 3, 4, 2))
    alpha[:, :, :, 0] = np.nan
    return xr.Dataset(
        {
            "residual_ratio": (dims, ratio),
            "first_token_attention": (("seed", "revision", "variant", "layer", "head"), alpha),
            "massive_ratio": (dims, rng.uniform(1, 3000, size=ratio.shape)),
            "first_token_norm_ratio": (dims, rng.uniform(0.5, 50, size=ratio.shape)),
            "matrix_entropy": (dims, rng.uniform(0, 1, size=ratio.shape)),
        },
        coords={
            "seed": [0, 1],
            "revision": ["step0", "step4", "step1"],
            "step": ("revision", [0.0, 4.0, 1.0]),
            "variant": ["SAN", "SAN+skip", "transformer"],
            "layer": [0, 1, 2, 3],
        },
    )


def _losses(*ratios):
    return {seed: {"seed": seed, "final_loss": 5.0 * r, "unigram_loss": 5.0} for seed, r in enumerate(ratios)}


def test_the_series_learns_only_below_the_baseline_ratio():
    ds = _series()
    out = series_claims(ds, _losses(0.6, 0.7), **KW)
    assert out["learns"] is True and out["first"] == "step0" and out["last"] == "step4"
    row = next(r for r in out["verdicts"] if r["key"] == "learns")
    assert row["verdict"] == "holds" and row["margin"] == pytest.approx(KW["max_loss_ratio"] - 0.7)
    out = series_claims(ds, _losses(0.6, 0.95), **KW)
    assert out["learns"] is False
    assert next(r for r in out["verdicts"] if r["key"] == "learns")["verdict"] == "fails"


def test_the_first_and_last_checkpoint_are_recomputed():
    ds = _series()
    out = series_claims(ds, _losses(0.5, 0.5), **KW)
    assert out["layers"] == [1, 2, 3]
    ratio = ds["residual_ratio"].values  # (seed, revision, variant, layer, sample)
    assert out["at"]["step4"]["residual_ratio"]["SAN+skip"]["2"] == pytest.approx(ratio[:, 1, 1, 2].mean())
    alpha = ds["first_token_attention"].values[:, 0, 2]  # seeds x layers x heads of step0, transformer
    share = np.mean([[np.mean(alpha[s, la] > KW["share_threshold"]) for la in (1, 2, 3)] for s in (0, 1)])
    assert out["at"]["step0"]["sink_share"]["transformer"] == pytest.approx(share)
    table = training_series_table({"training_series": out}, {})
    assert "| variant | layer | step0 | step4 |" in table and "| 1 | 2.5 | 5 | 0.5 |" in table
    for rev, i in (("step0", 0), ("step4", 1)):
        massive = ds["massive_ratio"].values[:, i, 2].mean(axis=-1).max(axis=-1).mean()  # seeds x layers x sequences
        entropy = ds["matrix_entropy"].values[:, i, 2].mean()
        assert out["at"][rev]["largest_massive_ratio"] == {"transformer": pytest.approx(massive)}
        assert out["at"][rev]["mean_matrix_entropy"] == {"transformer": pytest.approx(entropy)}
    at = out["at"]
    for key, label in (
        ("largest_massive_ratio", "largest massive ratio"),
        ("mean_matrix_entropy", "mean matrix entropy"),
    ):
        first, last = fmt(at["step0"][key]["transformer"]), fmt(at["step4"][key]["transformer"])
        assert f"| transformer | {label} | {first} | {last} |" in table
    assert training_series_table({"training_series": None}, {}) == "No training series in this run.\n"


def test_without_the_transformer_no_phenomena_rows_and_a_summary_without_them_is_named():
    out = series_claims(_series().sel(variant=["SAN", "SAN+skip"]), _losses(0.5, 0.5), **KW)
    assert out["at"]["step4"]["largest_massive_ratio"] == {} and out["at"]["step4"]["mean_matrix_entropy"] == {}
    assert "massive" not in training_series_table({"training_series": out}, {})
    del out["at"]["step0"]["mean_matrix_entropy"]
    with pytest.raises(MissingKey, match="training_series.at.step0.mean_matrix_entropy"):
        training_series_table({"training_series": out}, {})
