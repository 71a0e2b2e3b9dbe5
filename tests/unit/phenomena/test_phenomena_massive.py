"""Sun et al.'s massive activations: they appear abruptly (against the same rise spread over two blocks) and plateau
(against a transient spike), each judged, without power, failing and not judged on synthetic rank-collapse
results."""

from __future__ import annotations

import numpy as np
import pytest
from phenomena_results import REPORT, assert_rederived, text_result

from san.phenomena.massive import largest_rise, massive_claims, one_block_share, plateau_factor, spread_over_two
from san.phenomena.spec import DECODER, ENCODER

R = REPORT["phenomena"]
#: a massive activation appearing at block 2 of 8 (x100) and holding until the last two blocks
STEP = np.array([5, 5, 500, 520, 510, 505, 500, 200, 100.0])
FLAT = np.full(9, 5.0)
GRADUAL = 50.0 * 2.0 ** np.arange(9)  # the onset level (100) at block 1, then x2 per block


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


def test_the_share_of_one_block_tells_one_block_from_two():
    assert one_block_share(STEP, 10.0) == (2, pytest.approx(1.0, abs=0.01)), "x100 in one block, flat around it"
    two = spread_over_two(STEP, 2)
    assert two[2] == pytest.approx(50.0) and two[3] == STEP[3], "x10 at block 2, x10.4 at block 3"
    assert one_block_share(two, 10.0) == (3, pytest.approx(np.log10(10.4) / np.log10(100 * 1.04), abs=1e-3))
    assert one_block_share(STEP, 200.0)[1] == 0.0, "no rise of x200 to locate"


def test_an_abrupt_plateau_holds_and_its_controls_fail():
    out = judge(STEP)
    appear, plateau = out["massive_appear_abruptly"]["row"], out["massive_plateau"]["row"]
    assert appear["verdict"] == "holds" and appear["value"] == pytest.approx(1.0, abs=0.01)
    assert appear["positive_control"]["verdict"] == "fails"
    assert appear["positive_control"]["measured_value"] == pytest.approx(0.505, abs=0.01), "spread over two blocks"
    # the share falls from 1 toward 1/2 as the rise is spread: it passes 0.7 up to about 0.6 of the way
    assert 0.4 <= appear["positive_control"]["power"] <= 0.7
    print(f"massive_appear_abruptly: power {appear['positive_control']['power']}")
    assert appear["placebo"].startswith("the random-init twin") and "init twin's largest x1" in appear["detail"]
    assert plateau["verdict"] == "holds" and plateau["value"] < 1.1
    assert plateau["positive_control"]["verdict"] == "fails"  # a spike back to 5 strays x100 from its median
    # moved s of the way (in decades) the plateau strays about x100^s: past x3 beyond s = log(3) / log(100) ~ 0.24
    assert plateau["positive_control"]["power"] == pytest.approx(0.2)
    assert "token 0" in plateau["detail"] and "dimension 7" in plateau["detail"]
    for r in (appear, plateau):
        assert_rederived(r)


def test_a_small_rise_spread_below_the_jump_fails_the_control_by_its_size_too():
    """x12 in one block: spread over two blocks, each rises x3.5, no massive rise at all (share 0)."""
    row = judge(np.array([10, 10, 120, 120, 120, 120, 120, 120, 120.0]))["massive_appear_abruptly"]["row"]
    assert row["verdict"] == "holds" and row["positive_control"]["measured_value"] == 0.0
    assert_rederived(row)


def test_a_huge_rise_over_two_blocks_leaves_the_appearance_without_power_when_the_control_barely_moves():
    r = {**R, "massive": {**R["massive"], "spread_control": 0.1}}
    curves = {("pretrained", "transformer"): {"massive_ratio": STEP}, ("init", "transformer"): {"massive_ratio": FLAT}}
    results = {"dec": text_result("decoder", curves)}
    row = massive_claims(results, {"dec": DECODER}, r)["massive_appear_abruptly"]["row"]
    assert row["holds"] is True and row["verdict"] == "no power"
    assert_rederived(row)


def test_a_curve_below_the_onset_level_is_not_judged_and_a_barely_moved_spike_leaves_no_power():
    out = judge(FLAT)
    for key in ("massive_appear_abruptly", "massive_plateau"):
        row = out[key]["row"]
        assert row["verdict"] == "not judged" and "never rises to 100" in row["detail"]
        assert_rederived(row)
    r = {**R, "massive": {**R["massive"], "transient_control": 0.01}}
    curves = {("pretrained", "transformer"): {"massive_ratio": STEP}}
    row = massive_claims({"dec": text_result("decoder", curves)}, {"dec": DECODER}, r)["massive_plateau"]["row"]
    assert row["holds"] is True and row["verdict"] == "no power"
    assert_rederived(row)


def test_the_appearance_is_read_at_the_onset_with_its_sensitivity_to_the_level():
    """Gradual rises to 80 (x2 per block), then x50 into block 5: at level 100 the onset is block 5 (abrupt); at
    level 20 it is block 2 (x2: not abrupt), which the detail says changes the verdict."""
    ratio = np.array([5, 10, 20, 40, 80, 4000, 4000, 4000, 4000.0])
    row = judge(ratio)["massive_appear_abruptly"]["row"]
    assert row["verdict"] == "holds" and row["item"] == "block 5"
    assert "onset at block 5 (80 -> 4e+03)" in row["detail"]
    assert "ratio >= 20: block 2, x2, share 0.00" in row["detail"] and "ratio >= 400: block 5" in row["detail"]
    assert "the verdict depends on the definition" in row["detail"]
    assert "depends on the definition" not in judge(STEP)["massive_appear_abruptly"]["row"]["detail"]


def test_a_gradual_accumulation_fails_both():
    out = judge(GRADUAL)
    appear, plateau = out["massive_appear_abruptly"]["row"], out["massive_plateau"]["row"]
    assert appear["verdict"] == "fails" and appear["value"] == 0.0, "x2 per block: no rise of x10"
    spread = judge(5.0 * 4.0 ** np.minimum(np.arange(9), 3))["massive_appear_abruptly"]["row"]  # x64 over 3 blocks
    assert spread["verdict"] == "fails", "no block of x10"
    steady = judge(np.array([5, 5, 50, 500, 500, 500, 500, 500, 500.0]))["massive_appear_abruptly"]["row"]
    assert steady["verdict"] == "fails" and steady["value"] == pytest.approx(0.5), "x10 and x10: two blocks"
    assert plateau["verdict"] == "fails"
    for r in (appear, plateau):
        assert_rederived(r)


def test_without_pretrained_weights_or_enough_layers_the_claims_are_not_judged():
    curves = {("init", "transformer"): {"massive_ratio": STEP}}
    results = {"dec": text_result("decoder", curves, weights=("init",))}
    out = massive_claims(results, {"dec": DECODER}, R)
    row = out["massive_appear_abruptly"]["row"]
    assert row["verdict"] == "not judged" and "no pretrained weights in this run" in row["detail"]
    assert out["massive_appear_abruptly"]["cells"]["dec"]["verdict"] == "not judged"
    assert_rederived(row)
    alone = {"dec": text_result("decoder", {("pretrained", "transformer"): {"massive_ratio": STEP}},
                                weights=("pretrained",))}  # fmt: skip
    assert massive_claims(alone, {"dec": DECODER}, R)["massive_appear_abruptly"]["row"]["verdict"] == "holds", (
        "the init twin is a placebo only: not needed to judge"
    )
    three = {("pretrained", "transformer"): {"massive_ratio": STEP[:4]}}
    short = massive_claims({"dec": text_result("decoder", three, layers=3)}, {"dec": DECODER}, R)
    short = short["massive_plateau"]["row"]
    assert short["verdict"] == "not judged" and "fewer than 2 layers" in short["detail"]
    assert_rederived(short)


def test_an_encoder_gets_a_cell_that_says_the_claim_is_not_about_it():
    cells = judge(STEP)["massive_appear_abruptly"]["cells"]
    assert cells["enc"]["verdict"] == "n/a" and cells["dec"]["verdict"] == "holds"
    assert cells["dec"]["control_value"] == pytest.approx(0.505, abs=0.01)
