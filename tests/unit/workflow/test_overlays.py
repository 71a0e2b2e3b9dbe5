"""The shipped overlays of config/ pass the config check when laid over config.yaml the way ``--configfile`` lays
them (Snakemake's merge: mappings key by key, lists and values replaced; no ``replace`` key, which only the tests'
own overlay helper knows)."""

from __future__ import annotations

import copy

import pytest

from san.core.config import load_config_file, overlay_config
from san.experiments import check_config

from helpers import ROOT

OVERLAYS = sorted((ROOT / "config").glob("*.yaml"))


def test_quick_overlay_is_shipped():
    assert ROOT / "config" / "quick.yaml" in OVERLAYS


@pytest.mark.slow
@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda p: p.name)
def test_overlay_passes_the_config_check(default_config, overlay):
    changes = load_config_file(overlay)
    assert "replace" not in changes, f"{overlay.name}: --configfile merges mappings; 'replace' is no config key"
    config = overlay_config(copy.deepcopy(default_config), changes)
    check_config(config, ROOT / "workflow" / "schemas", reference=default_config)
