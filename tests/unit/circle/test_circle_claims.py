"""The circle wing's Fig. 3 row on token distances built here: pure attention collapses more often than the skip
variants, with the control "the skip runs continue at their early exponential rate": holding with the control
failing (a numeric power), holding with the control holding too ("no power"), failing, and not judged; the
collapse table and the token distances must agree; every row re-derived from its own numbers."""

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from san.circle.claims import circle_claims, claims
from san.claims import verdicts as V
from san.core.config import ConfigError

from helpers import default_config

CIRCLE = default_config()["report"]["circle"]
THRESHOLD = default_config()["circle"]["report"]["collapse_threshold"]
STEPS = np.arange(101)


def _decay(rate: float, until: int | None = None) -> np.ndarray:
    """A token distance ``exp(-rate t)`` from 1, flat from step ``until`` on."""
    t = STEPS if until is None else np.minimum(STEPS, until)
    return np.exp(-rate * t)


def _runs(pure: list[np.ndarray], skip: list[np.ndarray]) -> tuple[pd.DataFrame, xr.DataArray]:
    """The collapse table and the token distances of SAN runs ``pure`` and SAN+skip runs ``skip`` (seeds of one
    hidden dimension; the same number of each)."""
    data = np.stack([np.stack(pure), np.stack(skip)])[:, None]  # variant, hidden_dim, seed, step
    distance = xr.DataArray(
        data, dims=("variant", "hidden_dim", "seed", "step"),
        coords={"variant": ["SAN", "SAN+skip"], "hidden_dim": [8], "seed": range(len(pure)), "step": STEPS},
    )  # fmt: skip
    collapsed = (distance.isel(step=-1) / distance.isel(step=0) < THRESHOLD).sum("seed").values[:, 0]
    table = pd.DataFrame({"variant": ["SAN", "SAN+skip"], "hidden_dim": [8, 8], "n_seeds": [len(pure)] * 2,
                          "n_collapsed": collapsed})  # fmt: skip
    return table, distance


def _row(table, distance, **cfg) -> dict:
    return circle_claims(table, distance, collapse_threshold=THRESHOLD, **{**CIRCLE, **cfg})["verdicts"][0]


COLLAPSING = _decay(0.2)  # 2e-9 at step 100


def test_pure_attention_collapses_more_where_the_skips_early_rate_would_collapse_them_too():
    # skip runs: exp(-0.05 t) for ten steps (0.61), then flat; their early rate continued reaches 6.7e-3 < 0.01
    row = _row(*_runs([COLLAPSING] * 10, [_decay(0.05, until=10)] * 10))
    assert row["verdict"] == "holds" and row["value"] == pytest.approx(1.0)
    assert row["positive_control"]["key"] == "report.circle.early_rate_control"
    # every skip run collapses at that rate: q = 1 exceeds skip_fraction_max by 0.5, a value whose margin is -0.5
    assert row["positive_control"]["margin"] == pytest.approx(-0.5)
    # log of the final distance moved: -0.5 (1 - s) - 5 s < ln 0.01 from s = 0.912 on
    power = row["positive_control"]["power"]
    assert power == pytest.approx(0.9)
    print(f"circle.pure_collapses_more: power {power}")
    assert "at their early rates 10/10 skip runs would collapse" in row["detail"]


def test_skip_runs_flat_from_the_start_leave_the_test_without_power():
    """Skip runs that do not move over the early steps: their early rate predicts no collapse, so "the skips only
    slow the collapse" passes the test as well as "they counteract it"."""
    row = _row(*_runs([COLLAPSING] * 10, [_decay(0.05, until=0)] * 10))
    assert row["holds"] is True and row["positive_control"]["verdict"] == "holds" and row["verdict"] == "no power"


def test_skip_runs_collapsing_slowly_pass_the_fig3_test_without_power():
    """Skip runs that do collapse, at a slow constant rate (exp(-0.005 t): below 0.01 of the start only after some 920
    steps), end the 100-step rollout at 0.61: the test "pure attention collapses, the skips in at most half their runs"
    passes them as it passes runs the skips hold apart. Its former control (the skip variants through pure
    attention's "collapsed in at least half the runs", false whenever the claim's own "at most half" holds) passed
    such data as "holds"; judged against the skip runs' own early rate, the row says "no power"."""
    table, distance = _runs([COLLAPSING] * 10, [_decay(0.005)] * 10)
    row = _row(table, distance)
    assert row["holds"] is True and row["verdict"] == "no power"
    q = table.set_index("variant").loc["SAN+skip", "n_collapsed"] / 10
    assert q <= CIRCLE["skip_fraction_max"] and not q >= CIRCLE["pure_fraction_min"], "the former control failed"


def test_skip_variants_that_collapse_too_often_or_pure_attention_too_rarely_fail():
    half = [COLLAPSING] * 5 + [_decay(0.05, until=10)] * 5
    row = _row(*_runs([COLLAPSING] * 10, half))  # 1 - 0.5 = 0.5, less 2 x 0.16 s.e., is not above 0.2
    assert row["verdict"] == "fails" and row["margin"] == pytest.approx(0.5 - 2 * np.sqrt(0.025) - 0.2)
    rare = [COLLAPSING] * 4 + [_decay(0.0)] * 6  # pure attention collapses in 40 % of its runs, below 50 %
    row = _row(*_runs(rare, [_decay(0.0)] * 10), margin=0.0, sigmas=0.0)
    assert row["verdict"] == "fails" and row["margin"] == pytest.approx(-0.1), "short of pure_fraction_min by 0.1"
    many = _row(*_runs([COLLAPSING] * 10, [COLLAPSING] * 6 + [_decay(0.0)] * 4), margin=0.0, sigmas=0.0)
    assert many["verdict"] == "fails" and many["margin"] == pytest.approx(-0.1), "over skip_fraction_max by 0.1"


def test_without_runs_of_both_kinds_it_is_not_judged_and_the_inputs_must_agree():
    table, distance = _runs([COLLAPSING] * 4, [_decay(0.0)] * 4)
    empty = circle_claims(table.iloc[:1], distance.sel(variant=["SAN"]), collapse_threshold=THRESHOLD, **CIRCLE)
    assert empty["pure_collapses_more"] is None and empty["verdicts"][0]["verdict"] == "not judged"
    with pytest.raises(ValueError, match="the collapse table 3 of 4"):
        _row(table.assign(n_collapsed=[4, 3]), distance)
    with pytest.raises(ConfigError, match="report.circle.early_steps = 100 must be below the rollout's last step"):
        _row(table, distance, early_steps=100)


def test_the_runs_are_pooled_over_variants_and_hidden_dimensions():
    """Pure attention is SAN and SAN+MLP, the skip variants SAN+skip and the transformer, over every hidden size."""
    flat, variants = _decay(0.0), ["SAN", "SAN+MLP", "SAN+skip", "transformer"]
    collapsed = {("SAN", 8): 5, ("SAN", 32): 3, ("SAN+MLP", 8): 4, ("SAN+MLP", 32): 5, ("transformer", 8): 1}
    runs = {(v, d): [COLLAPSING] * collapsed.get((v, d), 0) + [flat] * (5 - collapsed.get((v, d), 0))
            for v in variants for d in (8, 32)}  # fmt: skip
    data = np.stack([np.stack([np.stack(runs[v, d]) for d in (8, 32)]) for v in variants])
    coords = {"variant": variants, "hidden_dim": [8, 32], "seed": range(5), "step": STEPS}
    distance = xr.DataArray(data, dims=("variant", "hidden_dim", "seed", "step"), coords=coords)
    table = pd.DataFrame([{"variant": v, "hidden_dim": d, "n_seeds": 5, "n_collapsed": collapsed.get((v, d), 0)}
                          for v in variants for d in (8, 32)])  # fmt: skip
    out = circle_claims(table, distance, collapse_threshold=THRESHOLD, **CIRCLE)
    assert (out["pure_collapsed"], out["pure_runs"], out["skip_collapsed"], out["skip_runs"]) == (17, 20, 1, 20)
    assert out["pure_collapses_more"] is True and "SAN: 8/10 runs collapsed" in out["caption"]


def test_every_circle_row_is_rederived_from_its_own_numbers():
    for pure, skip in (
        ([COLLAPSING] * 10, [_decay(0.05, until=10)] * 10),
        ([COLLAPSING] * 10, [_decay(0.05, until=0)] * 10),
        ([COLLAPSING] * 10, [COLLAPSING] * 5 + [_decay(0.0)] * 5),
    ):
        r = json.loads(json.dumps(_row(*_runs(pure, skip))))
        assert V.rederive(r) == []


def test_the_section_reads_the_table_and_the_gathered_result(tmp_path):
    from san.circle.results import VARIABLES
    from san.core.storage import describe, write_netcdf

    table, distance = _runs([COLLAPSING] * 10, [_decay(0.05, until=10)] * 10)
    table.to_csv(tmp_path / "collapse.csv", index=False)
    nc = write_netcdf(describe(xr.Dataset({"token_distance": distance}), VARIABLES), tmp_path / "circle.nc", {})
    params = {"report": default_config()["report"], "circle_collapse_threshold": THRESHOLD}
    section = claims({"circle": [str(tmp_path / "collapse.csv")], "circle_result": [str(nc)]}, params)["circle"]
    assert section["pure_collapsed"] == 10 and section["skip_collapsed_at_early_rate"] == 10
    assert section["verdicts"][0]["verdict"] == "holds"


def test_check_config_refuses_a_control_that_cannot_move():
    from san.circle.claims import check_config

    check_config({"circle": CIRCLE})
    with pytest.raises(ConfigError, match="report.circle.early_rate_control = 0"):
        check_config({"circle": {**CIRCLE, "early_rate_control": 0}})
    with pytest.raises(ConfigError, match="report.circle.early_steps = 0"):
        check_config({"circle": {**CIRCLE, "early_steps": 0}})
