"""The image encoders in the workflow: every vision family named by its hub id alone (a tiny random checkpoint of
its config class, served with its image processor by the local hub) gets init and pretrained weights, pixel values
from its own image processor, the vision measures of every variant and the vision figure; the token roles and the
pure-attention collapse of every result are checked here on the stored data."""

from __future__ import annotations

import numpy as np

from san.core.storage import read_netcdf
from san.models.store import materialise_init
from san.rank_collapse.vision.experiment import ROLES

from helpers import copy_workflow, snakemake, tiny_config, write_config
from hub_repos import checkpoint_repo

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


def test_vision_families_by_hub_id_build_the_vision_figure(tmp_path, default_config, hub_server):
    for family, arch in ARCHS.items():
        folder = tmp_path / "built" / family
        materialise_init(family, arch, 1, folder)
        (folder / "manifest.json").unlink()
        hub_server.add(checkpoint_repo(f"tiny-org/{family}", folder))
    wf = copy_workflow(tmp_path / "wf")
    cfg = tiny_config(default_config)
    for family in ARCHS:
        cfg["models"][f"by-id-{family}"] = {
            "pretrained": {"source": "hub", "repo_id": f"tiny-org/{family}", "revision": "main"}
        }
    cfg["vision"]["models"] = [f"by-id-{f}" for f in ARCHS]
    write_config(wf, cfg)
    env = {"HF_ENDPOINT": hub_server.endpoint, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    snakemake(wf, "vision", "--cores", "2", env=env)
    assert (wf / f"results/figures/vision.{cfg['figures']['formats'][0]}").is_file()
    for family in ARCHS:
        ds = read_netcdf(wf / f"results/vision/by-id-{family}.nc")
        assert list(ds["weights"].values) == ["init", "pretrained"], family
        assert [ROLES[i] for i in ds["role"].values] == PREFIX[family] + ["patch"] * 16, family
        share = ds["residual_ratio_frobenius_patches"]
        san, skip = share.sel(variant="SAN"), share.sel(variant="SAN+skip")
        # three tiny layers: pure attention ends far below attention with its skip (SigLIP, without a class token,
        # keeps the most: ~1e-2 of its layer-0 share on noise)
        assert (san.isel(layer=-1) < 0.05 * san.isel(layer=0)).all(), family
        assert (skip.isel(layer=-1) > 0.1 * skip.isel(layer=0)).all(), family
        assert (san.isel(layer=-1) < 0.1 * skip.isel(layer=-1)).all(), family
        assert np.isfinite(ds["spatial_high_frequency_share"].values).all(), family
        pixels = read_netcdf(wf / f"results/pixels/by-id-{family}/pretrained.nc")
        assert "image_processor" in pixels.attrs and list(pixels["image"].values) == ["chelsea", "noise0"]
