"""The vision measures against numpy's Fourier transform and patterns of known spectrum, the run's dataset on a
tiny ViT and DINOv2 with registers, and the two claims of the vision literature, each where it holds and where it
fails."""

import numpy as np
import pytest
import torch
import xarray as xr

from san.models.store import materialise_init
from san.rank_collapse.vision.claims import high_norm_tokens_claim, oversmoothing_claim
from san.rank_collapse.vision.experiment import (
    ROLES,
    high_frequency_share,
    log_amplitude_difference,
    patch_grid,
    pixel_inputs,
    run,
)

from helpers import ROOT
from reference import assert_phenomena

GRID = (4, 6)
REPORT = {
    "decay_below": 0.01,
    "preserved_above": 0.5,
    "high_norm": 5.0,
    # the synthetic results of _norms have 2 blocks: "large" here
    "large_min_layers": 2,
    "constant_rate_control": 1.0,
    "init_twin_control": 1.0,
    "threshold_notes": {"preserved_above": "set to 0.5 before the first run"},
}


def _tokens(maps: np.ndarray) -> torch.Tensor:
    """Feature maps ``(images, rows, columns, width)`` as patch tokens ``(images, rows * columns, width)``."""
    return torch.as_tensor(maps.reshape(maps.shape[0], -1, maps.shape[-1]))


def test_patch_grid():
    assert patch_grid((2, 3, 224, 224), 16) == (14, 14)
    assert patch_grid((3, 224, 168), 14) == (16, 12)


def test_high_frequency_share_of_known_patterns():
    rows, cols = np.meshgrid(np.arange(GRID[0]), np.arange(GRID[1]), indexing="ij")
    checker = ((-1.0) ** (rows + cols))[None, :, :, None] * np.ones((1, 1, 1, 3))
    constant = np.ones((1, *GRID, 3))
    assert high_frequency_share(_tokens(checker), GRID, 0.25).item() == pytest.approx(1.0)
    assert high_frequency_share(_tokens(constant), GRID, 0.25).item() == pytest.approx(0.0, abs=1e-15)


def test_high_frequency_share_equals_numpy():
    rng = np.random.default_rng(0)
    maps = rng.normal(size=(2, *GRID, 5))
    energy = (np.abs(np.fft.fft2(maps, axes=(1, 2))) ** 2).sum(axis=-1)
    fr, fc = np.abs(np.fft.fftfreq(GRID[0])), np.abs(np.fft.fftfreq(GRID[1]))
    low = (fr[:, None] < 0.3) & (fc[None, :] < 0.3)
    want = 1 - energy[:, low].sum(axis=1) / energy.sum(axis=(1, 2))
    np.testing.assert_allclose(high_frequency_share(_tokens(maps), GRID, 0.3).numpy(), want, rtol=1e-12)


def test_log_amplitude_difference_equals_numpy():
    rng = np.random.default_rng(1)
    maps = rng.normal(size=(3, *GRID, 4)) + 2.0
    amp = np.abs(np.fft.fft2(maps, axes=(1, 2))).mean(axis=-1)
    want = np.log(amp[:, GRID[0] // 2, GRID[1] // 2]) - np.log(amp[:, 0, 0])
    np.testing.assert_allclose(log_amplitude_difference(_tokens(maps), GRID).numpy(), want, rtol=1e-12)


ARCH = {"hidden_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "image_size": 224, "patch_size": 56,
        "mlp_ratio": 2, "layerscale_value": 1.0, "num_register_tokens": 2}  # fmt: skip
SETTINGS = {"variants": ["SAN", "SAN+MLP", "SAN+skip", "transformer"], "dtype": "float64", "batch_size": 2,
            "high_frequency_cutoff": 0.25, "images": ["astronaut", "rocket"], "noise_images": 1, "noise_size": 32,
            "seed": 0, "massive_token_factor": 10.0}  # fmt: skip


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dinov2r") / "init"
    materialise_init("dinov2_with_registers", ARCH, 0, folder)
    inputs = {"init": pixel_inputs(folder, SETTINGS)}
    return run("dinov2_with_registers", {"init": folder}, inputs, SETTINGS)


def test_run_records_roles_and_every_measure(result):
    roles = [ROLES[i] for i in result["role"].values]
    assert roles == ["class", "register", "register"] + ["patch"] * 16
    assert result["token_norm"].dims == ("weights", "variant", "layer", "image", "token")
    assert list(result["image"].values) == ["astronaut", "rocket", "noise0"]
    assert result.sizes["layer"] == ARCH["num_hidden_layers"] + 1
    assert result["role"].attrs["flag_meanings"] == "class distillation register patch"
    share = result["residual_ratio_frobenius_patches"].sel(weights="init")
    assert (share.sel(variant="SAN").isel(layer=-1) < 1e-3 * share.sel(variant="SAN").isel(layer=0)).all()


def test_run_measures_lie_in_range_and_the_patch_only_ones_differ(result):
    """The patch-only measure differs from the all-token one, and both lie in [0, 1]."""
    for name in ("residual_ratio", "residual_ratio_patches", "residual_ratio_frobenius_patches"):
        values = result[name].values
        assert np.all((values >= 0) & (values <= 1 + 1e-12))
    assert not np.allclose(result["residual_ratio"].values, result["residual_ratio_patches"].values)


@pytest.mark.slow
def test_run_records_the_phenomena_of_the_hidden_states(result, tmp_path):
    """The unmodified model's measures (the class token first) and every patch's similarity to its grid neighbours,
    against numpy on the model's own hidden states (the encoder's outputs, no final norm)."""
    from san.measures.phenomena import PHENOMENA
    from san.models.load import load_model

    folder = tmp_path / "init"
    materialise_init("dinov2_with_registers", ARCH, 0, folder)
    pixels = torch.as_tensor(pixel_inputs(folder, SETTINGS)["pixel_values"].values)
    with torch.inference_mode():
        model = load_model(folder, "dinov2_with_registers", torch.float64)
        states = [h.numpy() for h in model(pixel_values=pixels.double(), output_hidden_states=True).hidden_states]
    got = {name: result[name].sel(weights="init", variant="transformer").values for name in PHENOMENA}
    assert_phenomena(got, states, SETTINGS["massive_token_factor"])
    similarity = result["patch_neighbour_similarity"].sel(weights="init")
    assert similarity.dims == ("image", "token") and similarity.isel(token=slice(0, 3)).isnull().all()
    patches = states[0][:, 3:].reshape(3, 4, 4, -1)
    unit = patches / np.linalg.norm(patches, axis=-1, keepdims=True)
    r, c = 1, 2  # an inner patch: four neighbours
    want = np.mean([(unit[:, r, c] * unit[:, rr, cc]).sum(-1) for rr, cc in ((0, 2), (2, 2), (1, 1), (1, 3))], axis=0)
    np.testing.assert_allclose(similarity.isel(token=3 + 4 * r + c).values, want, rtol=1e-12)


def _smoothing(san_decay: float, skip_curve: list[float]) -> xr.Dataset:
    """Init results of SAN and SAN+skip on a photograph and a noise image: SAN's patch share falls from 1 to
    ``san_decay``, SAN+skip's follows ``skip_curve`` (layers 0, 1, ...)."""
    layers = len(skip_curve)
    share = np.ones((1, 2, layers, 2))
    share[0, 0, -1] = san_decay
    share[0, 1] = np.asarray(skip_curve)[:, None]
    return xr.Dataset(
        {"residual_ratio_frobenius_patches": (("weights", "variant", "layer", "image"), share)},
        coords={"weights": ["init"], "variant": ["SAN", "SAN+skip"], "image": ["astronaut", "noise0"]},
    )


def _norms(peaks: dict[str, float]) -> xr.Dataset:
    """The unmodified model's token norms, one token at ``peaks[weights]`` times the others, per weight set."""
    norms = np.ones((len(peaks), 1, 3, 2, 5))
    for i, peak in enumerate(peaks.values()):
        norms[i, ..., 0] = peak
    return xr.Dataset(
        {"token_norm": (("weights", "variant", "layer", "image", "token"), norms)},
        coords={"weights": list(peaks), "variant": ["transformer"], "image": ["astronaut", "noise0"]},
    )


def test_oversmoothing_holds_where_a_constant_rate_would_fall_below_the_bound():
    # SAN+skip 1 -> 0.6 -> 0.55; at its first block's rate 0.6^2 = 0.36 < 0.5
    row = oversmoothing_claim({"m": _smoothing(1e-4, [1.0, 0.6, 0.55])}, REPORT)
    assert row["verdict"] == "holds" and row["value"] == pytest.approx(0.55) and row["item"].endswith("SAN+skip")
    assert row["positive_control"]["measured_value"] == pytest.approx(0.36)
    assert row["positive_control"]["key"] == "report.vision.constant_rate_control"
    # ln 0.55 (1 - s) + ln 0.36 s > ln 0.5 up to s = 0.224
    power = row["positive_control"]["power"]
    assert power == pytest.approx(0.2)
    print(f"oversmoothing: power {power}")
    assert "Threshold history: report.vision.preserved_above: set to 0.5 before" in row["detail"]
    assert row["threshold"] == {"value": 0.5, "above": True, "key": "report.vision.preserved_above", "sigmas": 0.0,
                                "log": True}  # fmt: skip


def test_oversmoothing_has_no_power_where_the_skip_decays_slowly_at_a_constant_rate():
    """A SAN+skip that decays by a constant factor per layer, slowly enough, passes "the skip connection preserves
    it" at a threshold below its last value: the test cannot tell preservation from a slow decay."""
    row = oversmoothing_claim({"m": _smoothing(1e-4, [1.0, 0.9, 0.81])}, REPORT)
    assert row["holds"] is True and row["positive_control"]["verdict"] == "holds" and row["verdict"] == "no power"


def test_oversmoothing_fails_on_either_half_and_is_not_judged_without_both_variants():
    pure = oversmoothing_claim({"m": _smoothing(0.5, [1.0, 0.9, 0.9])}, REPORT)
    assert pure["verdict"] == "fails" and pure["item"].endswith(": SAN")
    # SAN's half clears by log10(0.01 / 0.5) = -1.7 decades: the value's margin is SAN's
    assert pure["margin"] == pytest.approx(np.log10(0.01 / 0.5))
    assert oversmoothing_claim({"m": _smoothing(1e-4, [1.0, 0.2, 0.1])}, REPORT)["verdict"] == "fails"
    assert oversmoothing_claim({}, REPORT)["verdict"] == "not judged"


def test_high_norm_tokens_hold_where_the_random_init_twin_has_none():
    row = high_norm_tokens_claim({"m": _norms({"init": 1.0, "pretrained": 50.0})}, REPORT)
    assert row["verdict"] == "holds" and row["value"] == pytest.approx(50.0)
    assert row["positive_control"]["measured_value"] == pytest.approx(1.0)
    # log10 50 (1 - s) > log10 5 up to s = 0.588
    power = row["positive_control"]["power"]
    assert power == pytest.approx(0.55)
    print(f"high_norm_tokens: power {power}")


def test_high_norm_tokens_without_power_where_the_init_twin_has_them_too():
    row = high_norm_tokens_claim({"m": _norms({"init": 50.0, "pretrained": 50.0})}, REPORT)
    assert row["holds"] is True and row["verdict"] == "no power"


def test_high_norm_tokens_fail_and_are_not_judged_without_pretrained_weights_or_their_twin():
    assert high_norm_tokens_claim({"m": _norms({"init": 1.0, "pretrained": 2.0})}, REPORT)["verdict"] == "fails"
    missing = high_norm_tokens_claim({"m": _norms({"init": 50.0})}, REPORT)
    assert missing["verdict"] == "not judged" and "no pretrained image encoder" in missing["detail"]
    alone = high_norm_tokens_claim({"m": _norms({"pretrained": 50.0})}, REPORT)
    assert alone["holds"] is True and alone["verdict"] == "not judged", "no twin: the placebo could not run"


def test_high_norm_tokens_on_a_small_vit_are_not_judged_with_what_the_claim_needs():
    report = {**REPORT, "large_min_layers": 24}
    row = high_norm_tokens_claim({"small": _norms({"init": 1.0, "pretrained": 1.2})}, report)
    assert row["verdict"] == "not judged" and row["holds"] is None and row["scope"]["covered"] is False
    assert "needs a pretrained ViT with >= 300M parameters" in row["detail"] and "small: 2 blocks" in row["detail"]
    judged = high_norm_tokens_claim({"small": _norms({"init": 1.0, "pretrained": 50.0})}, REPORT)
    assert judged["items"] == [{"item": "small", "value": pytest.approx(50.0), "unit": "x median", "blocks": 2}]


def test_every_vision_row_is_rederived_from_its_own_numbers():
    import json

    from san.claims import verdicts as V

    rows = [
        oversmoothing_claim({"m": _smoothing(1e-4, [1.0, 0.6, 0.55])}, REPORT),
        oversmoothing_claim({"m": _smoothing(1e-4, [1.0, 0.9, 0.81])}, REPORT),
        oversmoothing_claim({"m": _smoothing(0.5, [1.0, 0.9, 0.9])}, REPORT),
        high_norm_tokens_claim({"m": _norms({"init": 1.0, "pretrained": 50.0})}, REPORT),
        high_norm_tokens_claim({"m": _norms({"init": 50.0})}, REPORT),
    ]
    for r in rows:
        assert V.rederive(json.loads(json.dumps(r))) == []


def test_config_refuses_a_text_model_under_vision_and_an_image_model_under_rank_collapse(default_config):
    from san.core.config import ConfigError
    from san.rank_collapse.vision.spec import check_config

    schemas = ROOT / "workflow" / "schemas"
    check_config(default_config, schemas)
    bad = {**default_config, "vision": {**default_config["vision"], "models": ["bert-base-cased"]}}
    with pytest.raises(ConfigError, match=r"'vision.models.0': model 'bert-base-cased' is of family 'bert'"):
        check_config(bad, schemas)
    missing = {**default_config, "vision": {**default_config["vision"], "models": ["vit-huge"]}}
    with pytest.raises(ConfigError, match="'vit-huge' is not defined under 'models'"):
        check_config(missing, schemas)
    image = default_config["vision"]["models"][0]
    text = {**default_config, "rank_collapse": {**default_config["rank_collapse"], "models": [image]}}
    with pytest.raises(ConfigError, match=r"'rank_collapse.models.0'.*image encoder"):
        check_config(text, schemas)


def test_report_thresholds_must_not_overlap():
    from san.core.config import ConfigError
    from san.rank_collapse.vision.claims import check_config

    check_config({"vision": REPORT})
    with pytest.raises(ConfigError, match="report.vision.decay_below = 0.6 must be below"):
        check_config({"vision": {**REPORT, "decay_below": 0.6}})
    for key in ("constant_rate_control", "init_twin_control"):
        with pytest.raises(ConfigError, match=f"report.vision.{key} = -1"):
            check_config({"vision": {**REPORT, key: -1.0}})
    with pytest.raises(ConfigError, match=r"threshold_notes names keys that report.vision lacks: \['floor'\]"):
        check_config({"vision": {**REPORT, "threshold_notes": {"floor": "x"}}})


def test_summary_section_per_model_and_verdicts(result, tmp_path):
    from san.core.storage import write_netcdf
    from san.rank_collapse.vision.claims import claims

    path = write_netcdf(result, tmp_path / "m.nc", {})
    section = claims({"vision": [str(path)]}, {"vision_models": ["m"], "report": {"vision": REPORT}})["vision"]
    entry = section["per_model"]["m"]["init"]
    assert entry["layers"] == ARCH["num_hidden_layers"]
    share = result["residual_ratio_frobenius_patches"]
    photos = share.sel(weights="init", variant="SAN", image=["astronaut", "rocket"])
    assert entry["patch_share"]["SAN"] == pytest.approx(float((photos.isel(layer=-1) / photos.isel(layer=0)).mean()))
    assert [r["key"] for r in section["verdicts"]] == ["oversmoothing", "high_norm_tokens"]
    assert section["verdicts"][1]["holds"] is None
    assert claims({}, {"report": {"vision": REPORT}}) == {"vision": None}


def test_the_schema_names_the_pinned_images_and_the_variants():
    import yaml

    from san.core.images import IMAGES
    from san.models.spec import VARIANTS

    schema = yaml.safe_load((ROOT / "workflow/schemas/vision.schema.yaml").read_text())["properties"]
    assert schema["images"]["items"]["enum"] == list(IMAGES)
    assert schema["images"]["default"] == list(IMAGES)
    assert schema["variants"]["items"]["enum"] == list(VARIANTS)


@pytest.mark.slow
def test_the_figure_has_a_column_per_model_and_a_row_per_measure(result):
    from san.rank_collapse.vision.plots import ROWS, vision_figure

    fig = vision_figure({"a": result, "b": result})
    axes = fig.axes
    assert len(axes) == 2 * len(ROWS)
    assert all(ax.get_yscale() == "log" for ax in axes)
    assert axes[0].get_title() == "a (init)" and len(axes[0].lines) == 4


def test_the_high_norm_rows_control_moves_with_the_data_it_tests():
    """Judged again on a seeded multiplicative perturbation of its result (:mod:`perturb`), the row's control (the
    random-init twin, the data moved toward it) reads a different value."""
    from perturb import perturbed_dataset

    results = {"m": _norms({"init": 1.0, "pretrained": 50.0})}
    before = high_norm_tokens_claim(results, REPORT)
    after = high_norm_tokens_claim({m: perturbed_dataset(ds, np.random.default_rng(0)) for m, ds in results.items()},
                                   REPORT)  # fmt: skip
    assert before["holds"] is True
    b, a = (r["positive_control"]["measured_value"] for r in (before, after))
    assert not np.isclose(a, b, rtol=1e-9, atol=0), f"control {b} does not move"
