"""The quantisation control of an image encoder: a tiny random DINOv2 requantised with the ``gguf`` package and
measured by the vision experiment (san.rank_collapse.quantisation with san.rank_collapse.vision.experiment); the drift
is read over the images, and the vision wing's rows and the phenomena wing's image cells carry it."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from test_vision import ARCH, SETTINGS

from san.claims import verdicts as V
from san.claims.drift import WITHIN_DRIFT, as_pretrained, measure_drift
from san.core.storage import write_netcdf
from san.models.store import materialise_init
from san.phenomena.drift import measure_table
from san.rank_collapse.quantisation import quantisation_control
from san.rank_collapse.vision.experiment import pixel_inputs, run

FAMILY = "dinov2_with_registers"
KINDS = ["Q4_0", "Q8_0"]
EXPERIMENT = "san.rank_collapse.vision.experiment"
SET = {**SETTINGS, "variants": ["SAN", "transformer"]}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def control(tmp_path_factory) -> dict[str, xr.Dataset]:
    """The tiny encoder's result (init twin and "pretrained" weights, two seeds) and its quantisation control."""
    root = tmp_path_factory.mktemp("dinov2q")
    for weights, seed in (("init", 1), ("pretrained", 0)):
        materialise_init(FAMILY, ARCH, seed, root / weights)
    pixels = pixel_inputs(root / "pretrained", SET)
    folders = {w: root / w for w in ("init", "pretrained")}
    result = run(FAMILY, folders, dict.fromkeys(folders, pixels), SET)
    ctl = quantisation_control(FAMILY, root / "pretrained", pixels, SET, KINDS, root / "copies", experiment=EXPERIMENT)
    return {"result": result, "control": ctl}


def test_the_control_measures_the_copies_with_the_vision_experiment(control):
    ctl, result = control["control"], control["result"]
    assert list(ctl["weights"].values) == ["pretrained", *KINDS]
    assert "residual_ratio_frobenius_patches" in ctl and "image" in ctl.dims, "the vision measures, per image"
    for name in ("residual_ratio", "token_norm", "massive_ratio"):
        np.testing.assert_array_equal(ctl[name].sel(weights="pretrained"), result[name].sel(weights="pretrained"))


def test_the_drift_is_taken_over_the_images_against_a_recompute(control):
    """measure_drift averages over the images; the drift table's relative change per measure and layer of the
    unmodified model equals a direct recompute; an image encoder has no first-token attention (no entry)."""
    ctl = control["control"]
    drift = measure_drift(ctl)
    assert drift["residual_ratio"].dims == ("copy", "variant", "layer")
    means = ctl["residual_ratio"].sel(variant="transformer").mean("image")
    for kind in KINDS:
        moved = np.abs(means.sel(weights=kind) - means.sel(weights="pretrained")).values
        np.testing.assert_allclose(drift["residual_ratio"].sel(copy=kind, variant="transformer"), moved)
        entry = measure_table(ctl)[kind]["residual_ratio"]
        relative = moved / np.abs(means.sel(weights="pretrained").values)
        assert entry["relative"] == pytest.approx(float(np.nanmax(relative)))
        assert entry["layer"] == int(np.nanargmax(relative))
    assert "first_token_attention" not in measure_table(ctl)["Q4_0"]
    coarse = float(drift["residual_ratio"].sel(copy="Q4_0").sum())
    assert coarse > float(drift["residual_ratio"].sel(copy="Q8_0").sum()) > 0, "4 bits move more than 8"


def _vision_claims(control, tmp_path, high_norm: float, with_control: bool = True) -> list[dict]:
    """The vision wing's rows on the tiny encoder with its control (or without), Darcet et al.'s claim in scope (the
    tiny depth) and its threshold ``high_norm``; a text model's control in the list is left out, its file never
    read."""
    from test_vision import REPORT

    from san.rank_collapse.vision.claims import claims

    files = {name: write_netcdf(control[name], tmp_path / f"{name}.nc", {}) for name in ("result", "control")}
    report = {**REPORT, "large_min_layers": ARCH["num_hidden_layers"], "high_norm": high_norm}
    inputs = {"vision": [str(files["result"])], "quantisation": [str(tmp_path / "absent.nc"), str(files["control"])]}
    params = {"vision_models": ["vit"], "quantisation_models": ["dec", "vit"], "report": {"vision": report}}
    if not with_control:
        inputs, params = {"vision": inputs["vision"]}, {**params, "quantisation_models": []}
    return claims(inputs, params)["vision"]["verdicts"]


def _ratio(ds: xr.Dataset) -> float:
    from san.rank_collapse.vision.claims import _norm_ratio

    return _norm_ratio(ds, "pretrained")


def test_a_vision_row_on_a_threshold_within_the_drift_prints_so_and_one_far_from_it_keeps_its_verdict(
    control, tmp_path
):
    """Darcet et al.'s row with the threshold at the weights' own ratio: requantising moves the margin further than
    the margin itself, "within quantisation drift"; with the threshold a hundredth of it, the row keeps the verdict it
    has without the control (the random init twin passes too: no power), with its drift beside. The drift equals a
    recompute from the copies' own ratios; the init-only row is not judged here and has none."""
    ctl, result = control["control"], control["result"]
    ratios = {w: _ratio(as_pretrained(result, ctl, w)) for w in ("pretrained", *KINDS)}
    moved = max(abs(np.log10(ratios[w]) - np.log10(ratios["pretrained"])) for w in KINDS)
    assert moved > 0
    near = _vision_claims(control, tmp_path, ratios["pretrained"] * 10 ** (moved / 2))
    row = next(r for r in near if r["key"] == "high_norm_tokens")
    assert row["drift"] == pytest.approx(moved, rel=1e-6) and row["verdict"] == WITHIN_DRIFT
    assert V.rederive(row) == []
    far = _vision_claims(control, tmp_path, ratios["pretrained"] / 100)
    row = next(r for r in far if r["key"] == "high_norm_tokens")
    plain = next(r for r in _vision_claims(control, tmp_path, ratios["pretrained"] / 100, False)
                 if r["key"] == "high_norm_tokens")  # fmt: skip
    assert plain["verdict"] in (V.HOLDS, V.NO_POWER) and "drift" not in plain
    assert row["verdict"] == plain["verdict"] and row["drift"] == pytest.approx(moved, rel=1e-6)
    assert row["drift"] < row["margin"]
    assert next(r for r in far if r["key"] == "oversmoothing")["drift"] is None
