"""Queipo-de-Llano et al.'s co-location of the first token's norm spike, the entropy valley and the sink rise,
against the random-init twin's three curves, on synthetic rank-collapse results."""

from __future__ import annotations

import numpy as np
import pytest
from phenomena_results import REPORT, assert_rederived, text_result

from san.phenomena.colocation import colocation_claims, event_layers
from san.phenomena.spec import DECODER, ENCODER

R, SHARE = REPORT["phenomena"], REPORT["first_token_sink"]["share_threshold"]
LAYERS = np.arange(9)


def events(norm_at: int, valley_at: int, sink_at: int) -> tuple[dict, np.ndarray]:
    """Curves whose norm spike, entropy valley and sink rise happen at the given blocks (of 8)."""
    norm = np.where(norm_at <= LAYERS, 100.0, 1.0)
    entropy = np.where(valley_at <= LAYERS, 0.2, 0.8)
    alpha = np.where(sink_at <= LAYERS, 0.9, 0.1)
    return {"first_token_norm_ratio": norm, "matrix_entropy": entropy}, alpha


def judge(pretrained: tuple[int, int, int], init: tuple[int, int, int]):
    (pc, pa), (ic, ia) = events(*pretrained), events(*init)
    results = {
        "dec": text_result("decoder", {("pretrained", "transformer"): pc, ("init", "transformer"): ic},
                           {("pretrained", "transformer"): pa, ("init", "transformer"): ia}),
        "enc": text_result("encoder"),
    }  # fmt: skip
    return colocation_claims(results, {"dec": DECODER, "enc": ENCODER}, R, SHARE)["colocated"]


def test_the_three_events_are_read_where_each_curve_moves_most():
    curves, alpha = events(3, 4, 5)
    share = np.where(np.isnan(alpha), np.nan, (alpha > SHARE).astype(float))
    assert event_layers(curves["first_token_norm_ratio"], curves["matrix_entropy"], share) == (3, 4, 5)
    # no sink before the first block: a share already full at block 1 rises there
    assert event_layers(np.ones(4), np.ones(4), np.array([np.nan, 1.0, 1.0, 1.0]))[2] == 1


def test_co_located_events_hold_and_the_twins_scattered_ones_fail():
    out = judge((3, 3, 4), init=(1, 6, 3))
    row = out["row"]
    assert row["verdict"] == "holds" and row["value"] == 1.0 and row["item"] == "spike 3, valley 3, sink 4"
    assert row["positive_control"]["verdict"] == "fails" and row["positive_control"]["measured_value"] == 5.0
    # half way to the twin the twin's steps (as large as the pretrained ones) win the ties of the largest change
    assert row["positive_control"]["power"] == pytest.approx(0.5)
    assert out["cells"]["enc"]["verdict"] == "n/a"
    assert "init twin's at 1, 6, 3" in row["detail"]
    assert_rederived(row)


def test_a_twin_with_co_located_events_leaves_no_power():
    row = judge((3, 3, 4), init=(1, 1, 1))["row"]
    assert row["holds"] is True and row["verdict"] == "no power"
    assert_rederived(row)


def test_scattered_events_fail():
    row = judge((1, 4, 7), init=(1, 6, 3))["row"]
    assert row["verdict"] == "fails" and row["value"] == 6.0
    assert_rederived(row)


def test_a_result_without_the_entropy_is_not_judged():
    ds = text_result("decoder").drop_vars("matrix_entropy")
    out = colocation_claims({"dec": ds}, {"dec": DECODER}, R, SHARE)["colocated"]
    assert out["row"]["verdict"] == "not judged" and "no matrix_entropy" in out["row"]["detail"]
    assert out["cells"]["dec"]["verdict"] == "not judged"
    assert_rederived(out["row"])


@pytest.mark.parametrize("window, verdict", [(2, "fails"), (3, "holds")])
def test_the_window_is_a_strict_bound(window, verdict):
    report = {**R, "colocation": {**R["colocation"], "window": window}}
    (pc, pa), (ic, ia) = events(3, 5, 4), events(1, 6, 8)
    ds = text_result("decoder", {("pretrained", "transformer"): pc, ("init", "transformer"): ic},
                     {("pretrained", "transformer"): pa, ("init", "transformer"): ia})  # fmt: skip
    row = colocation_claims({"dec": ds}, {"dec": DECODER}, report, SHARE)["colocated"]["row"]
    assert row["value"] == 2.0 and row["verdict"] == verdict
