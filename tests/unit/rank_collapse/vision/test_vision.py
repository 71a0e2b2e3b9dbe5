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
REPORT = {"decay_below": 0.01, "preserved_above": 0.5, "high_norm": 5.0, "high_norm_control_factor": 1000.0}


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
    from san.core.phenomena import PHENOMENA
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


def _fake(san_decay: float, skip_kept: float, weights: str = "init", peak: float = 1.0) -> xr.Dataset:
    layers, images, tokens = 3, 2, 5
    share = np.ones((1, 2, layers, images))
    share[0, 0, -1] = san_decay
    share[0, 1, -1] = skip_kept
    norms = np.ones((1, 2, layers, images, tokens))
    norms[..., 0] = peak
    return xr.Dataset(
        {"residual_ratio_frobenius_patches": (("weights", "variant", "layer", "image"), share),
         "token_norm": (("weights", "variant", "layer", "image", "token"), norms)},
        coords={"weights": [weights], "variant": ["SAN", "SAN+skip"] if weights == "init" else ["SAN", "transformer"],
                "image": ["astronaut", "noise0"]},
    )  # fmt: skip


def test_oversmoothing_claim_holds_fails_and_is_not_judged():
    holds = oversmoothing_claim({"m": _fake(1e-4, 0.9)}, REPORT)
    assert holds["holds"] is True and holds["verdict"] == "holds"
    assert holds["positive_control"]["fails_as_it_must"] is True
    assert oversmoothing_claim({"m": _fake(0.5, 0.9)}, REPORT)["holds"] is False
    assert oversmoothing_claim({"m": _fake(1e-4, 0.1)}, REPORT)["holds"] is False
    assert oversmoothing_claim({}, REPORT)["holds"] is None


def test_high_norm_claim_holds_fails_and_is_not_judged_without_pretrained_weights():
    holds = high_norm_tokens_claim({"m": _fake(1, 1, "pretrained", peak=50.0)}, REPORT)
    assert holds["holds"] is True and holds["positive_control"]["fails_as_it_must"] is True
    assert high_norm_tokens_claim({"m": _fake(1, 1, "pretrained", peak=2.0)}, REPORT)["holds"] is False
    missing = high_norm_tokens_claim({"m": _fake(1, 1, "init")}, REPORT)
    assert missing["holds"] is None and "no pretrained weights" in missing["detail"]


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


def test_the_figure_has_a_column_per_model_and_a_row_per_measure(result):
    from san.rank_collapse.vision.plots import ROWS, vision_figure

    fig = vision_figure({"a": result, "b": result})
    axes = fig.axes
    assert len(axes) == 2 * len(ROWS)
    assert all(ax.get_yscale() == "log" for ax in axes)
    assert axes[0].get_title() == "a (init)" and len(axes[0].lines) == 4
