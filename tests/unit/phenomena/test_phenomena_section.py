"""The phenomena wing end to end on synthetic result files: summary.json's section (its rows re-derived from their
own numbers), the config checks, the models x claims table as netCDF, CSV, Markdown and figure."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from phenomena_results import REPORT, context_result, text_result, vision_result
from test_phenomena_colocation import events
from test_phenomena_high_norm import CALM, LOUD, SIM
from test_phenomena_massive import FLAT, STEP

from san.claims import verdicts as V
from san.core.config import ConfigError
from san.core.storage import read_netcdf, write_netcdf
from san.phenomena import claims as phenomena_claims
from san.phenomena import spec
from san.phenomena.plots import phenomena_figure
from san.phenomena.table import table_dataset, table_frame
from san.phenomena.tables import phenomena_table

RUN = {"commit": "0123456789abcdef", "config_hash": "abcdef012345", "date": "2026-01-01 00:00 UTC", "machine": "m"}


def decoder():
    """A decoder whose pretrained weights show every text phenomenon."""
    (pc, pa), (ic, ia) = events(2, 2, 3), events(99, 99, 99)  # the init twin: no event
    share = np.where(np.arange(9) >= 2, 0.95, 0.5)
    pre = {**pc, "massive_ratio": STEP, "sigma1_share": share, "residual_ratio": 0.3}
    curves = {("pretrained", "transformer"): pre, ("init", "transformer"): {**ic, "massive_ratio": FLAT},
              ("pretrained", "SAN"): {"residual_ratio": 1e-9, "residual_ratio_no_massive": 1e-9}}  # fmt: skip
    return text_result("decoder", curves, {("pretrained", "transformer"): pa, ("init", "transformer"): ia})


#: the first-token attention of the context-length runs per length (16, 32, 64) and sequence, on every layer and
#: head: the pretrained sinks grow, the init twin's dilute; each value a few per cent from Gu et al.'s epsilon 0.3, so
#: that a perturbation of that size moves some heads across it
SINKS = {"pretrained": np.array([[0.29] * 4, [0.31] * 4, [0.31] * 4]),
         "init": np.array([[0.31] * 4, [0.29] * 4, [0.1] * 4])}  # fmt: skip


def written_run(folder):
    """The files of a run with a decoder (and its smaller size), an encoder at init only, a small ViT and the
    decoders' context-length runs, written to ``folder``: the summary rule's ``inputs`` and ``params``."""
    files = {
        "dec.nc": decoder(),
        "enc.nc": text_result("encoder", weights=("init",)),
        "vit.nc": vision_result({"pretrained": LOUD, "init": CALM}, SIM),
        "ctx.nc": context_result(SINKS),
        # the same decoder's smaller (shallower) size: at the longest length half the larger one's sink heads
        "small.nc": decoder(),
        "ctx_small.nc": half_the_heads(context_result(SINKS, layers=3)),
    }  # fmt: skip
    for name, ds in files.items():
        ds.to_netcdf(folder / name)
    inputs = {"rank_collapse": [str(folder / f) for f in ("dec.nc", "enc.nc", "small.nc")],
              "vision": [str(folder / "vit.nc")],
              "sink_context": [str(folder / "ctx.nc"), str(folder / "ctx_small.nc")]}  # fmt: skip
    params = {"models": ["dec", "enc", "small"], "vision_models": ["vit"], "sink_context_models": ["dec", "small"],
              "size_ladders": [["small", "dec"]], "report": REPORT}  # fmt: skip
    return inputs, params


@pytest.fixture
def section(tmp_path):
    """The phenomena section of :func:`written_run`, read from netCDF files as the summary rule reads them."""
    return phenomena_claims.claims(*written_run(tmp_path))["phenomena"]


def half_the_heads(ds):
    """``ds`` with the first half of the heads of its pretrained weights without a sink at the longest length."""
    for name in ("first_token_attention_by_sample", "first_token_attention"):
        v = ds[name].values
        v[0, -1, 1:, ..., : ds.sizes["head"] // 2] = 0.1
    return ds


def test_every_claim_has_its_row_and_every_model_its_cells(section):
    assert [r["key"] for r in section["verdicts"]] == list(spec.CLAIMS)
    assert section["models"] == {"dec": "decoder", "enc": "encoder", "small": "decoder", "vit": "image encoder"}
    verdicts = {r["key"]: r["verdict"] for r in section["verdicts"]}
    # Barbero et al.'s claim needs decoders pretrained at several context lengths, which no run holds
    assert verdicts == {**dict.fromkeys(spec.CLAIMS, "holds"), "sinks_grow_with_context": "not judged"}, verdicts
    assert all(r["kind"] == V.SCIENTIFIC and "threshold" in r for r in section["verdicts"])
    for row in section["verdicts"]:
        assert V.rederive(row) == []
    assert section["table"]["enc"]["compression_is_not_collapse"]["verdict"] == "not judged"
    assert "no pretrained weights" in section["table"]["enc"]["compression_is_not_collapse"]["note"]
    assert section["table"]["enc"]["colocated"]["verdict"] == "n/a"
    assert section["table"]["vit"]["small_vit_high_norm"]["verdict"] == "holds"
    json.dumps(section)  # the section is plain JSON


def test_a_run_without_the_context_runs_leaves_barbero_unjudged(tmp_path):
    decoder().to_netcdf(tmp_path / "dec.nc")
    params = {"models": ["dec"], "vision_models": [], "report": REPORT}
    out = phenomena_claims.claims({"rank_collapse": [str(tmp_path / "dec.nc")], "vision": []}, params)["phenomena"]
    row = next(r for r in out["verdicts"] if r["key"] == "sinks_at_longer_inference_context")
    assert row["verdict"] == "not judged" and "no context-length run of this model" in row["detail"]
    assert phenomena_claims.claims({}, {"report": REPORT}) == {"phenomena": None}


def test_the_report_check_refuses_a_plateau_as_wide_as_the_jump(default_config):
    phenomena_claims.check_config(default_config["report"])
    bad = copy.deepcopy(default_config["report"])
    bad["phenomena"]["massive"]["plateau"] = bad["phenomena"]["massive"]["jump"]
    with pytest.raises(ConfigError, match="report.phenomena.massive.plateau"):
        phenomena_claims.check_config(bad)


def test_the_tests_read_config_yamls_settings(default_config):
    mine, theirs = REPORT["phenomena"], default_config["report"]["phenomena"]
    notes = {"threshold_notes"}  # a threshold's history in config, not a setting of the tests
    assert {k: set(v) - notes for k, v in mine.items()} == {k: set(v) - notes for k, v in theirs.items()}
    share = default_config["report"]["first_token_sink"]["share_threshold"]
    assert REPORT["first_token_sink"]["share_threshold"] == share


def test_a_model_in_both_lists_is_refused(default_config):
    spec.check_config(default_config, None)
    cfg = copy.deepcopy(default_config)
    cfg["vision"]["models"] = [*cfg["vision"]["models"], cfg["rank_collapse"]["models"][0]]
    with pytest.raises(ConfigError, match="vision.models.2"):
        spec.check_config(cfg, None)


def test_the_table_as_netcdf_csv_markdown_and_figure(section, tmp_path):
    ds = table_dataset(section)
    assert ds["verdict"].dims == ("model", "claim") and ds["value"].attrs["long_name"]
    assert spec.CELL_STATES[int(ds["verdict"].sel(model="enc", claim="colocated"))] == "n/a"
    write_netcdf(ds, tmp_path / "table.nc", RUN)
    back = read_netcdf(tmp_path / "table.nc")
    assert list(map(str, back["model"].values)) == ["dec", "enc", "small", "vit"]
    frame = table_frame(back)
    assert len(frame) == 4 * len(spec.CLAIMS)
    hit = frame[(frame.model == "dec") & (frame.claim == "massive_appear_abruptly")].iloc[0]
    assert hit.verdict == "holds" and hit.value == pytest.approx(1.0, abs=0.01)
    assert hit.control_value == pytest.approx(0.5, abs=0.01), "the rise spread over two blocks"
    text = phenomena_table({"phenomena": section, "provenance": RUN}, {})
    assert text.splitlines()[0].startswith("| model | kind | massive activations appear abruptly |")
    assert "| dec | decoder | holds: 0.99 |" in text and "| enc | encoder | n/a |" in text
    assert phenomena_table({"provenance": RUN}, {}) == "No pretrained phenomena in this run.\n"
    fig = phenomena_figure(back)
    assert len(fig.axes[0].texts) == int(np.isfinite(back["value"].values).sum())
