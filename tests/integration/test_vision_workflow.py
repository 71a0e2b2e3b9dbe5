"""The image encoders named by their hub id alone: for every vision family, a tiny random checkpoint of its config
class is served with its image processor by the local hub and taken through what the workflow's jobs run for an entry
that gives only ``pretrained: {source: hub, repo_id, revision}``: the acquisition through the real client
(:func:`san.models.store.materialise`) recognises the family, the init weights are a random initialisation of the same
architecture, the pixel values come from the model's own image processor (:func:`pixel_inputs`), and the vision
measures of every variant (:func:`san.rank_collapse.vision.experiment.run`) and the vision figure are made of them;
the token roles and the pure-attention collapse of every result are checked on the data. One process for all of
them: the workflow around these calls (acquisition, pixels, the vision job and its figure as jobs) is the same for
every family and runs end to end for the tiny run's image encoder (tests/integration/test_report.py)."""

from __future__ import annotations

import numpy as np
import pytest

from san.core.plotting import figure_problems
from san.models.entries import init_entry
from san.models.folders import recorded_family
from san.models.store import materialise, materialise_init
from san.rank_collapse.vision.experiment import ROLES, pixel_inputs, run
from san.rank_collapse.vision.plots import vision_figure

from helpers import tiny_config
from hub_repos import checkpoint_repo

pytestmark = pytest.mark.slow

BASE = {"hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "image_size": 224, "patch_size": 56}
ARCHS = {
    "vit": {**BASE, "intermediate_size": 64},
    "deit": {**BASE, "intermediate_size": 64},
    "dinov2": {**BASE, "mlp_ratio": 2},
    "dinov2_with_registers": {**BASE, "mlp_ratio": 2, "num_register_tokens": 2},
    "siglip": {**BASE, "intermediate_size": 64},
    "clip": {**BASE, "intermediate_size": 64},
}
#: the special tokens before the 16 patches
PREFIX = {"vit": ["class"], "deit": ["class", "distillation"], "dinov2": ["class"],
          "dinov2_with_registers": ["class", "register", "register"], "siglip": [], "clip": ["class"]}  # fmt: skip


def test_vision_families_by_hub_id_build_the_vision_figure(tmp_path, default_config, hub):
    cfg = tiny_config(default_config)
    settings = {k: v for k, v in cfg["vision"].items() if k != "models"}
    pixel_settings = {k: cfg["vision"][k] for k in ("images", "noise_images", "noise_size", "seed")}
    results = {}
    for family, arch in ARCHS.items():
        built = tmp_path / "built" / family
        materialise_init(family, arch, 1, built)
        (built / "manifest.json").unlink()
        hub.add(checkpoint_repo(f"tiny-org/{family}", built))
        name = f"by-id-{family}"
        entry = {"pretrained": {"source": "hub", "repo_id": f"tiny-org/{family}", "revision": "main"}}
        folders = {w: tmp_path / "models" / family / w for w in ("pretrained", "init")}
        materialise(name, None, "pretrained", entry["pretrained"], folders["pretrained"])
        materialise(name, None, "init", init_entry(entry), folders["init"], folders["pretrained"])
        recognised, recognition = recorded_family(list(folders.values()))
        assert recognised == family, recognition
        pixels = {w: pixel_inputs(f, pixel_settings) for w, f in folders.items()}
        assert "image_processor" in pixels["pretrained"].attrs, family
        assert list(pixels["pretrained"]["image"].values) == ["chelsea", "noise0"], family
        ds = run(recognised, {w: str(f) for w, f in folders.items()}, pixels, settings)
        results[name] = ds
        assert sorted(map(str, ds["weights"].values)) == ["init", "pretrained"], family
        assert [ROLES[i] for i in ds["role"].values] == PREFIX[family] + ["patch"] * 16, family
        share = ds["residual_ratio_frobenius_patches"]
        san, skip = share.sel(variant="SAN"), share.sel(variant="SAN+skip")
        # three tiny layers: pure attention ends far below attention with its skip (SigLIP, without a class token,
        # keeps the most: ~1e-2 of its layer-0 share on noise)
        assert (san.isel(layer=-1) < 0.05 * san.isel(layer=0)).all(), family
        assert (skip.isel(layer=-1) > 0.1 * skip.isel(layer=0)).all(), family
        assert (san.isel(layer=-1) < 0.1 * skip.isel(layer=-1)).all(), family
        assert np.isfinite(ds["spatial_high_frequency_share"].values).all(), family
    fig = vision_figure(results)
    assert len(fig.axes) >= len(ARCHS)
    assert not [p for p in figure_problems(fig) if not p.endswith("lies outside the figure")]
