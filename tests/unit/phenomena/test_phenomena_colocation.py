"""Queipo-de-Llano et al.'s co-location of the onsets of the first token's norm spike, the entropy valley and the
sinks, against the valley and sinks a window later, on synthetic rank-collapse results."""

from __future__ import annotations

import numpy as np
import pytest
from phenomena_results import REPORT, assert_rederived, text_result

from san.phenomena.colocation import colocation_claims, delayed, event_layers, levels, moves, onsets
from san.phenomena.spec import DECODER, ENCODER

R, SHARE = REPORT["phenomena"], REPORT["first_token_sink"]["share_threshold"]
LAYERS = np.arange(9)


def events(norm_at: int, valley_at: int, sink_at: int) -> tuple[dict, np.ndarray]:
    """Curves whose norm spike, entropy valley and sink rise happen at the given blocks (of 8)."""
    norm = np.where(norm_at <= LAYERS, 100.0, 1.0)
    entropy = np.where(valley_at <= LAYERS, 0.2, 0.8)
    alpha = np.where(sink_at <= LAYERS, 0.9, 0.1)
    return {"first_token_norm_ratio": norm, "matrix_entropy": entropy}, alpha


FLAT = (99, 99, 99)  # no event within the 8 blocks


def judge(pretrained: tuple[int, int, int], init: tuple[int, int, int] = FLAT, report=R):
    (pc, pa), (ic, ia) = events(*pretrained), events(*init)
    results = {
        "dec": text_result("decoder", {("pretrained", "transformer"): pc, ("init", "transformer"): ic},
                           {("pretrained", "transformer"): pa, ("init", "transformer"): ia}),
        "enc": text_result("encoder"),
    }  # fmt: skip
    return colocation_claims(results, {"dec": DECODER, "enc": ENCODER}, report, SHARE)["colocated"]


def test_the_largest_change_reading_and_the_onsets():
    curves, alpha = events(3, 4, 5)
    share = np.where(np.isnan(alpha), np.nan, (alpha > SHARE).astype(float))
    assert event_layers(curves["first_token_norm_ratio"], curves["matrix_entropy"], share) == (3, 4, 5)
    # no sink before the first block: a share already full at block 1 rises there
    assert event_layers(np.ones(4), np.ones(4), np.array([np.nan, 1.0, 1.0, 1.0]))[2] == 1
    m = moves(curves["first_token_norm_ratio"], curves["matrix_entropy"], share)
    assert m[:, -1] == pytest.approx([2.0, 0.6, 1.0]) and m[:, 0] == pytest.approx([0, 0, 0])
    assert onsets(m, levels(None, np.array([0.5, 0.2, 0.5]))) == (3, 4, 5)
    assert onsets(m, levels(m, np.array([0.5, 0.2, 0.5]))) == (None, None, None), "the twin moves as much"
    assert onsets(delayed(m, 3), np.array([0.5, 0.2, 0.5])) == (3, 7, 8)


def test_co_located_onsets_hold_and_the_delayed_near_miss_fails():
    out = judge((3, 3, 4))
    row = out["row"]
    assert row["verdict"] == "holds" and row["value"] == 1.0 and row["item"] == "norm spike 3, valley 3, sinks 4"
    # the valley and the sinks three blocks later: onsets 3, 6, 7
    assert row["positive_control"]["verdict"] == "fails" and row["positive_control"]["measured_value"] == 4.0
    assert 0 < row["positive_control"]["power"] <= 1
    assert out["cells"]["enc"]["verdict"] == "n/a"
    assert "onsets norm spike 3, valley 3, sinks 4" in row["detail"] and "largest changes" in row["detail"]
    assert "depends on the definition" not in row["detail"]
    assert_rederived(row)


def test_a_barely_delayed_near_miss_leaves_no_power():
    report = {**R, "colocation": {**R["colocation"], "delay_control": 0.1}}
    row = judge((3, 3, 4), report=report)["row"]
    assert row["holds"] is True and row["verdict"] == "no power"
    assert_rederived(row)


def test_a_twin_that_moves_as_much_leaves_no_onset_and_the_model_unjudged():
    out = judge((3, 3, 4), init=(1, 1, 1))
    assert out["row"]["verdict"] == "not judged" and "no norm onset" in out["row"]["detail"]
    assert out["cells"]["dec"]["verdict"] == "not judged"
    assert_rederived(out["row"])


def test_scattered_onsets_fail_and_missing_sinks_span_the_depth():
    row = judge((1, 4, 7))["row"]
    assert row["verdict"] == "fails" and row["value"] == 6.0
    assert_rederived(row)
    never = judge((2, 2, 99))["row"]
    assert never["verdict"] == "fails" and never["value"] == 8.0 and "sinks never" in never["item"]
    assert_rederived(never)


def test_a_verdict_decided_by_the_margins_says_so():
    """The first token's norm rises 0.3 decades at block 1 and 2 decades at block 5, the valley and the sinks at 5:
    with the norm margin 0.5 the onsets line up (5, 5, 5); halved, the norm's onset is block 1 (spread 4)."""
    curves, alpha = events(5, 5, 5)
    curves["first_token_norm_ratio"] = np.where(LAYERS >= 5, 100.0, np.where(LAYERS >= 1, 2.0, 1.0))
    ds = text_result("decoder", {("pretrained", "transformer"): curves}, {("pretrained", "transformer"): alpha},
                     weights=("pretrained",))  # fmt: skip
    row = colocation_claims({"dec": ds}, {"dec": DECODER}, R, SHARE)["colocated"]["row"]
    assert row["verdict"] == "holds" and row["value"] == 0.0
    assert "margins x0.5: norm spike 1, valley 5, sinks 5 (spread 4)" in row["detail"]
    assert "the verdict depends on the definition" in row["detail"]


def test_a_result_without_the_entropy_is_not_judged():
    ds = text_result("decoder").drop_vars("matrix_entropy")
    out = colocation_claims({"dec": ds}, {"dec": DECODER}, R, SHARE)["colocated"]
    assert out["row"]["verdict"] == "not judged" and "no matrix_entropy" in out["row"]["detail"]
    assert out["cells"]["dec"]["verdict"] == "not judged"
    assert_rederived(out["row"])


@pytest.mark.parametrize("window, verdict", [(2, "fails"), (3, "holds")])
def test_the_window_is_a_strict_bound(window, verdict):
    report = {**R, "colocation": {**R["colocation"], "window": window}}
    row = judge((3, 5, 4), report=report)["row"]
    assert row["value"] == 2.0 and row["verdict"] == verdict
