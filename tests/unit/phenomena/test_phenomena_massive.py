"""Sun et al.'s massive activations: they appear abruptly (against the random-init twin) and plateau (against a
transient spike), each judged, without power, failing and not judged on synthetic rank-collapse results."""

from __future__ import annotations

import numpy as np
import pytest
from phenomena_results import REPORT, assert_rederived, text_result

from san.phenomena.massive import largest_rise, massive_claims, plateau_factor
from san.phenomena.spec import DECODER, ENCODER

R = REPORT["phenomena"]
#: a massive activation appearing at block 2 of 8 (x100) and holding until the last two blocks
STEP = np.array([5, 5, 500, 520, 510, 505, 500, 200, 100.0])
FLAT = np.full(9, 5.0)
GRADUAL = 5.0 * 2.0 ** np.arange(9)


def judge(pretrained, init=FLAT, **kw):
    curves = {("pretrained", "transformer"): {"massive_ratio": pretrained},
              ("init", "transformer"): {"massive_ratio": init}}  # fmt: skip
    results = {"dec": text_result("decoder", curves, **kw), "enc": text_result("encoder")}
    return massive_claims(results, {"dec": DECODER, "enc": ENCODER}, R)


def test_the_largest_rise_is_read_in_the_first_half_only():
    assert largest_rise(STEP) == (2, 100.0)
    late = np.array([5, 5, 5, 5, 5, 5, 500, 500, 500.0])
    assert largest_rise(late) == (1, 1.0), "a rise at block 6 of 8 is not in the first half"
    assert plateau_factor(np.array([1.0, 2.0, 4.0])) == pytest.approx(2.0)


def test_an_abrupt_plateau_holds_and_its_controls_fail():
    out = judge(STEP)
    appear, plateau = out["massive_appear_abruptly"]["row"], out["massive_plateau"]["row"]
    assert appear["verdict"] == "holds" and appear["value"] == pytest.approx(100.0)
    assert appear["positive_control"]["verdict"] == "fails"
    assert appear["positive_control"]["measured_value"] == pytest.approx(1.0)  # the init twin does not rise
    # x100 moved toward x1 in decades reaches x10 half way, where the margin is zero: the last passing step is 0.45
    assert appear["positive_control"]["power"] == pytest.approx(0.45)
    assert plateau["verdict"] == "holds" and plateau["value"] < 1.1
    assert plateau["positive_control"]["verdict"] == "fails"  # a spike back to 5 strays x100 from its median
    # moved s of the way (in decades) the plateau strays about x100^s: past x3 beyond s = log(3) / log(100) ~ 0.24
    assert plateau["positive_control"]["power"] == pytest.approx(0.2)
    assert "token 0" in plateau["detail"] and "dimension 7" in plateau["detail"]
    for r in (appear, plateau):
        assert_rederived(r)


def test_a_twin_that_rises_as_well_leaves_the_appearance_without_power():
    row = judge(STEP, init=STEP)["massive_appear_abruptly"]["row"]
    assert row["holds"] is True and row["verdict"] == "no power"
    assert row["positive_control"]["verdict"] == "holds"
    assert_rederived(row)


def test_a_flat_curve_plateaus_without_power():
    """Without a jump, a transient spike looks like the data: the plateau test cannot tell them apart."""
    row = judge(FLAT)["massive_plateau"]["row"]
    assert row["holds"] is True and row["verdict"] == "no power"
    assert_rederived(row)


def test_a_gradual_accumulation_fails_both():
    out = judge(GRADUAL)
    appear, plateau = out["massive_appear_abruptly"]["row"], out["massive_plateau"]["row"]
    assert appear["verdict"] == "fails" and appear["value"] == pytest.approx(2.0)
    assert plateau["verdict"] == "fails"
    for r in (appear, plateau):
        assert_rederived(r)


def test_without_an_init_twin_or_enough_layers_the_claims_are_not_judged():
    curves = {("pretrained", "transformer"): {"massive_ratio": STEP}}
    results = {"dec": text_result("decoder", curves, weights=("pretrained",))}
    out = massive_claims(results, {"dec": DECODER}, R)
    row = out["massive_appear_abruptly"]["row"]
    assert row["verdict"] == "not judged" and "no init weights in this run" in row["detail"]
    assert out["massive_appear_abruptly"]["cells"]["dec"]["verdict"] == "not judged"
    assert_rederived(row)
    short = massive_claims({"dec": text_result("decoder", layers=3)}, {"dec": DECODER}, R)["massive_plateau"]["row"]
    assert short["verdict"] == "not judged" and "fewer than 2 layers" in short["detail"]
    assert_rederived(short)


def test_an_encoder_gets_a_cell_that_says_the_claim_is_not_about_it():
    cells = judge(STEP)["massive_appear_abruptly"]["cells"]
    assert cells["enc"]["verdict"] == "n/a" and cells["dec"]["verdict"] == "holds"
    assert cells["dec"]["control_value"] == pytest.approx(1.0)
