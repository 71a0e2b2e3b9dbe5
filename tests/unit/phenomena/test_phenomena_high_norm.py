"""Darcet et al. against Bach et al. on a small ViT: high-norm patch tokens exist (against the tail of one lognormal
norm distribution) and sit in redundant patches (against random patch sets), on synthetic vision results."""

from __future__ import annotations

import numpy as np
import pytest
from phenomena_results import REPORT, assert_rederived, vision_result
from scipy.stats import norm

from san.phenomena.high_norm import high_norm_claims, outlier_shares, random_excess, tail_shares
from san.phenomena.spec import DECODER, IMAGE_ENCODER

R = REPORT["phenomena"]
LAYERS, IMAGES, PATCHES = 4, 3, 16
OUTLIERS = [3, 11]
#: patch norms about 1 (a spread across patches and images), two outliers x10 from block 2 on
CALM = 1.0 + 0.01 * np.arange(PATCHES) + 0.02 * np.arange(IMAGES)[:, None]
CALM = np.broadcast_to(CALM, (LAYERS + 1, IMAGES, PATCHES)).copy()
LOUD = CALM.copy()
LOUD[2:, :, OUTLIERS] = 10.0
#: neighbour similarity: the outliers' patches redundant (0.9), the others spread around 0.5
SIM = np.broadcast_to(np.linspace(0.4, 0.6, PATCHES), (IMAGES, PATCHES)).copy()
SIM[:, OUTLIERS] = 0.9
#: a similarity high for 7 patches (the outliers among them) and low for 9: random sets sit above the median too
HIGH = np.isin(np.arange(PATCHES), [3, 10, 11, 12, 13, 14, 15])
SKEWED = np.broadcast_to(np.where(HIGH, 1.0, 0.3) + 0.001 * np.arange(PATCHES), (IMAGES, PATCHES))
#: patch norms of one lognormal with log-spread 1 (its quantiles): its upper tail passes 4 x the median with no
#: separate population of outliers
HEAVY = np.exp(norm.ppf((np.arange(PATCHES) + 0.5) / PATCHES))
HEAVY = np.broadcast_to(HEAVY, (LAYERS + 1, IMAGES, PATCHES)).copy()


def judge(pretrained, init=CALM, similarity=SIM, layers=LAYERS, key=None):
    ds = vision_result({"pretrained": pretrained, "init": init}, similarity, layers=layers)
    out = high_norm_claims({"vit": ds}, {"vit": IMAGE_ENCODER, "dec": DECODER}, R)
    return out if key is None else out[key]


def test_the_shares_count_patches_above_the_factor_times_the_median():
    shares = outlier_shares(LOUD, 4.0)
    assert shares.shape == (LAYERS + 1, IMAGES)
    np.testing.assert_allclose(shares[:2], 0.0)
    np.testing.assert_allclose(shares[2:], 2 / 16)
    rng = np.random.default_rng(0)
    assert random_excess(np.arange(16.0), 16, 3, rng) == pytest.approx(0.0)  # every patch: the mean minus the median


def test_the_lognormal_tail_is_read_from_the_median_absolute_deviation_of_the_log_norms():
    """Against a direct computation: sigma = 1.4826 x MAD(ln norms), tail = P(Z > ln(4) / sigma); no spread, no tail."""
    logs = np.log(HEAVY[0, 0])
    sigma = 1.4826 * np.median(np.abs(logs - np.median(logs)))
    np.testing.assert_allclose(tail_shares(HEAVY, 4.0), norm.sf(np.log(4.0) / sigma))
    assert 0.05 < float(tail_shares(HEAVY, 4.0)[0, 0]) < 0.12
    np.testing.assert_array_equal(tail_shares(np.ones((2, 3, 8)), 4.0), 0.0)


def test_high_norm_outliers_in_redundant_patches_hold_and_their_placebos_fail():
    out = judge(LOUD)
    exist, redundant = out["small_vit_high_norm"]["row"], out["high_norm_in_redundant_patches"]["row"]
    assert exist["verdict"] == "holds" and exist["value"] == pytest.approx(0.125) and exist["item"] == "layer 2"
    # the calm patches spread little in log: one lognormal puts next to nothing above 4 x the median
    assert exist["positive_control"]["verdict"] == "fails" and exist["positive_control"]["measured_value"] < 1e-6
    assert exist["positive_control"]["power"] == pytest.approx(0.9)  # 0.125 (1 - s) stays above 0.01 below s = 0.92
    assert "first layer with a share >= 0.01: 2" in exist["detail"]
    assert redundant["verdict"] == "holds" and redundant["value"] == pytest.approx(0.9 - np.median(SIM[0]))
    assert redundant["evidence"] == IMAGES and redundant["item"] == "layer 2"
    assert redundant["positive_control"]["verdict"] == "fails"
    assert 0.5 < redundant["positive_control"]["power"] < 1.0  # random sets' excess is about 0.05, the outliers' 0.39
    assert out["small_vit_high_norm"]["cells"]["dec"]["verdict"] == "n/a"
    for r in (exist, redundant):
        assert_rederived(r)


def test_the_random_placebo_is_seeded():
    a = judge(LOUD, key="high_norm_in_redundant_patches")["row"]
    b = judge(LOUD, key="high_norm_in_redundant_patches")["row"]
    assert a["positive_control"]["measured_value"] == b["positive_control"]["measured_value"]
    report = {**R, "high_norm": {**R["high_norm"], "control_seed": 1}}
    ds = vision_result({"pretrained": LOUD, "init": CALM}, SIM, layers=LAYERS)
    c = high_norm_claims({"vit": ds}, {"vit": IMAGE_ENCODER}, report)["high_norm_in_redundant_patches"]["row"]
    assert c["positive_control"]["measured_value"] != a["positive_control"]["measured_value"]


def test_controls_that_hold_too_leave_no_power():
    # norms of one heavy-tailed distribution: large norms, but the lognormal's own tail reaches the share as well
    exist = judge(HEAVY, key="small_vit_high_norm")["row"]
    assert exist["holds"] is True and exist["verdict"] == "no power", exist["detail"]
    redundant = judge(LOUD, similarity=SKEWED, key="high_norm_in_redundant_patches")["row"]
    assert redundant["holds"] is True and redundant["verdict"] == "no power"
    for r in (exist, redundant):
        assert_rederived(r)


def test_no_outlier_fails_the_existence_and_leaves_the_redundancy_unjudged():
    out = judge(CALM)
    exist, redundant = out["small_vit_high_norm"]["row"], out["high_norm_in_redundant_patches"]["row"]
    assert exist["verdict"] == "fails" and exist["value"] == 0.0
    assert redundant["verdict"] == "not judged" and "no patch above 4 x the median norm" in redundant["detail"]
    for r in (exist, redundant):
        assert_rederived(r)


def test_outliers_in_ordinary_patches_fail_the_redundancy():
    row = judge(LOUD, similarity=np.broadcast_to(np.linspace(0.4, 0.6, PATCHES), (IMAGES, PATCHES)),
                key="high_norm_in_redundant_patches")["row"]  # fmt: skip
    assert row["verdict"] == "fails"
    assert_rederived(row)


def test_a_large_vit_is_not_judged_and_a_missing_twin_leaves_its_share_out():
    deep = np.broadcast_to(LOUD[:1], (25, IMAGES, PATCHES))
    row = judge(deep, init=deep, layers=24, key="small_vit_high_norm")["row"]
    assert row["verdict"] == "not judged" and "24 blocks: not a small ViT (at most 12)" in row["detail"]
    assert_rederived(row)
    ds = vision_result({"pretrained": LOUD}, SIM, layers=LAYERS)
    out = high_norm_claims({"vit": ds}, {"vit": IMAGE_ENCODER}, R)["small_vit_high_norm"]
    assert out["cells"]["vit"]["verdict"] == "holds" and "init twin" not in out["row"]["detail"]
    assert "init twin's largest share 0" in judge(LOUD, key="small_vit_high_norm")["row"]["detail"]


@pytest.mark.slow
@pytest.mark.parametrize(("outliers", "within"), [(2.0, True), (10.5, False)])
def test_an_image_encoder_with_the_quantisation_control_carries_its_drift(tmp_path, outliers, within):
    """The summary's image cells and rows with an image encoder's control (its copies' vision results): a copy whose
    outliers fall to ``outliers`` x the median moves the share of high-norm patches; to 2 (below the factor 4) the
    share falls from 0.125 to 0, past its margin above 0.01: within quantisation drift; to 10.5 it stays, and the row
    keeps its verdict with its drift beside."""
    from san.claims.drift import WITHIN_DRIFT
    from san.phenomena.claims import claims

    copy = LOUD.copy()
    copy[2:, :, OUTLIERS] = outliers
    files = {"vit": vision_result({"pretrained": LOUD, "init": CALM}, SIM, layers=LAYERS),
             "ctl": vision_result({"pretrained": LOUD, "Q4_0": copy}, SIM, layers=LAYERS)}  # fmt: skip
    for name, ds in files.items():
        ds.to_netcdf(tmp_path / f"{name}.nc")
    inputs = {"vision": [str(tmp_path / "vit.nc")], "quantisation": [str(tmp_path / "ctl.nc")]}
    params = {"models": [], "vision_models": ["vit"], "quantisation_models": ["vit"], "report": REPORT}
    section = claims(inputs, params)["phenomena"]
    cell = section["table"]["vit"]["small_vit_high_norm"]
    row = next(r for r in section["verdicts"] if r["key"] == "small_vit_high_norm")
    assert section["quantisation_models"] == ["vit"] and "vit" in section["quantisation"]
    moved = 0.125 - (0.0 if within else 0.125)
    assert cell["drift"] == pytest.approx(moved) and row["drift"] == pytest.approx(moved)
    assert (cell["verdict"] == WITHIN_DRIFT) is within and (row["verdict"] == WITHIN_DRIFT) is within
    if not within:
        assert cell["verdict"] == row["verdict"] == "holds"
    assert_rederived(row)
