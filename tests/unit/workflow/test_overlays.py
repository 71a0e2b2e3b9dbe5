"""The shipped overlays of config/ pass the config check when laid over config.yaml the way ``--configfile`` lays
them (Snakemake's merge: mappings key by key, lists and values replaced)."""

from __future__ import annotations

import copy

import pytest
from snakemake.common.configfile import load_configfile
from snakemake.utils import update_config

from san.experiments import check_config

from helpers import ROOT

OVERLAYS = sorted((ROOT / "config").glob("*.yaml"))


def test_quick_overlay_is_shipped():
    assert ROOT / "config" / "quick.yaml" in OVERLAYS


@pytest.mark.slow
@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda p: p.name)
def test_overlay_passes_the_config_check(default_config, overlay):
    config = copy.deepcopy(default_config)
    update_config(config, load_configfile(str(overlay)))
    check_config(config, ROOT / "workflow" / "schemas", reference=default_config)
