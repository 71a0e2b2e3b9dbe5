"""The report's claim checks and caption rendering, on hand-made results."""

import numpy as np
import pytest
import xarray as xr

from san.paths.claims import path_effectiveness_claims
from san.rank_collapse.claims import attention_product_claims, rank_collapse_claims
from san.report.captions import render_captions
from san.report.runtimes import runtimes_table

from helpers import default_config, synthetic_pretrained, synthetic_rank_collapse

REPORT = default_config()["report"]  # the config's thresholds
THRESHOLDS = REPORT["rank_collapse"]


def test_rank_collapse_claims_verdicts_and_numbers():
    good = rank_collapse_claims(
        {"a": synthetic_rank_collapse(2e-7, 0.3), "b": synthetic_rank_collapse(4e-5, 0.2)}, **THRESHOLDS
    )
    assert good["pure_falls_by_layer"] and good["skip_survives"]
    assert good["pure_max"] == pytest.approx(4e-5) and good["skip_min"] == pytest.approx(0.2)
    assert "SAN 2.0e-07" in good["caption_rows"]["a"] and "at layer 3" in good["caption_rows"]["a"]
    bad = rank_collapse_claims({"a": synthetic_rank_collapse(5e-3, 0.01)}, **THRESHOLDS)
    assert not bad["pure_falls_by_layer"] and not bad["skip_survives"]


def test_attention_product_claims():
    rank1 = np.array([[0.5, 0.4], [1e-3, 2e-3], [1e-6, 1e-6]])[None]
    ds = xr.Dataset(
        {"rank1_residual": (("weights", "depth", "path"), rank1)}, coords={"weights": ["init"], "depth": [1, 2, 3]}
    )
    c = attention_product_claims({"m": ds}, **REPORT["attention_products"])
    assert c["longer_paths_closer_to_rank1"] and c["per_model"]["m"]["init"]["longest"] == 1e-6
    c = attention_product_claims(
        {"m": ds.isel(depth=[2, 1, 0]).assign_coords(depth=[1, 2, 3])}, **REPORT["attention_products"]
    )
    assert not c["longer_paths_closer_to_rank1"]


def test_path_effectiveness_claims():
    acc = np.array([[[0.3, 0.3], [0.7, 0.6], [0.5, 0.5], [0.2, 0.2]], [[0.3, 0.3], [0.8, 0.8], [0.6, 0.6], [0.1, 0.1]]])
    ds = xr.Dataset(
        {"accuracy": (("n_paths", "path_length", "repeat"), acc), "full_model_accuracy": 0.9, "chance_accuracy": 0.3},
        coords={"n_paths": [5, 20], "path_length": [0, 1, 2, 3]},
    )
    c = path_effectiveness_claims({"sorting": ds}, short=2, most=0.5, margin=0.02)
    t = c["per_task"]["sorting"]
    assert t["n_paths"] == 20 and t["short_best"] == 0.8 and t["longest"] == 0.1
    assert c["short_beats_long"] and c["models_learn"] and "full model 0.900" in c["caption"]
    assert t["short_share_of_gain"] == pytest.approx(5 / 6) and c["short_reach_most"]
    assert "83% of the full" in c["caption"]


def test_render_captions_fills_numbers_and_keeps_snakemake_syntax(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "fig.rst").write_text(
        "Claim holds: [[ yes_no(c.ok) ]], max [[ c.x | e ]]; model {{ snakemake.wildcards.model }}.\n"
    )
    [out] = render_captions(tmp_path / "t", tmp_path / "out", {"c": {"ok": True, "x": 2.5e-7}})
    assert out.read_text() == "Claim holds: yes, max 2.5e-07; model {{ snakemake.wildcards.model }}.\n"


def test_runtimes_table(tmp_path):
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (tmp_path / "rank_collapse").mkdir()
    (tmp_path / "rank_collapse" / "bert.tsv").write_text(header + "12.5\t0:00:12\t2000\t0\t0\t0\t0\t0\t0\t20.1\n")
    (tmp_path / "corpus.tsv").write_text(header + "0.5\t0:00:00\t100\t0\t0\t0\t0\t0\t0\t0.4\n")
    df = runtimes_table(tmp_path)
    assert list(df["rule"]) == ["rank_collapse", "corpus"] and list(df["job"]) == ["bert", "corpus"]
    assert df.loc[0, "wall_s"] == 12.5 and df.loc[0, "cpu_s"] == 20.1 and df.loc[0, "max_rss_mb"] == 2000


def test_pretrained_collapse_claims_find_the_first_layer_below_the_threshold():
    from san.rank_collapse.claims import pretrained_collapse_claims

    results = {
        "fast": synthetic_pretrained([0.9, 0.1, 1e-4, 1e-9]),
        "slow": synthetic_pretrained([0.9, 0.5, 0.1, 0.05, 2e-3, 5e-4]),
        "init-only": synthetic_pretrained([0.9, 0.1]).sel(weights=["init"]),
    }
    out = pretrained_collapse_claims(results, threshold=1e-3, max_layer_fraction=1.0, plateau_control=1.0)
    assert set(out["per_model"]) == {"fast", "slow"}, "models without pretrained weights are left out"
    assert out["per_model"]["fast"]["residual_ratio"]["san_first_below"] == 2
    assert out["per_model"]["slow"]["residual_ratio"]["san_first_below"] == 5
    assert out["per_model"]["slow"]["residual_ratio_frobenius"]["san_first_below"] == 4
    assert out["pure_collapses_in_every_model"] and out["within_layers"] == 5
    causal = pretrained_collapse_claims(
        results, threshold=1e-3, max_layer_fraction=1.0, plateau_control=1.0, causal=("slow",)
    )
    assert causal["per_model"]["slow"]["causal"] and not causal["per_model"]["fast"]["causal"]
    assert causal["judged"] == ["fast"] and causal["within_layers"] == 2, "causal decoders stay out of the verdict"
    assert "SAN below at layer 5 of 5" in out["caption_rows"]["slow"]
    never = pretrained_collapse_claims(
        {"flat": synthetic_pretrained([0.9, 0.5, 0.4])}, threshold=1e-3, max_layer_fraction=1.0, plateau_control=1.0
    )
    assert never["pure_collapses_in_every_model"] is False and never["within_layers"] is None
    assert "never" in never["caption_rows"]["flat"]


def test_propagation_captions_print_each_rows_verdict_and_control(tmp_path):
    """The propagation templates of workflow/report print each sweep's rows with their printed verdict (no power
    included) and the control's reference and power; a demonstration row has no control."""
    import shutil

    from san.claims import verdicts as V

    from helpers import ROOT

    control = V.control("the recursion offset by +0.1", 0.1, True, power=0.2)
    rows = [
        V.row("depth.recursion_exact_in_limit", "exact in the limit", kind=V.SCIENTIFIC, form=V.QUANTITATIVE,
              source="G&G", holds=True, test="t", detail="gap 0.01", positive_control=control),
        V.row("masks.layernorm_construction", "a construction", kind=V.DEMONSTRATION, form=V.EXISTENTIAL,
              source="Wu", holds=True, test="t", detail="staying 98%"),
    ]  # fmt: skip
    templates = tmp_path / "t"
    templates.mkdir()
    for name in ("propagation_depth", "propagation_masks", "propagation_qk_variance"):
        shutil.copy(ROOT / "workflow" / "report" / f"{name}.rst", templates)
    out = {
        p.stem: p.read_text() for p in render_captions(templates, tmp_path / "out", {"propagation": {"verdicts": rows}})
    }
    assert '"exact in the limit" — **no power**' in out["propagation_depth"]
    assert "positive control, the recursion offset by +0.1: holds, passes up to 0.2" in out["propagation_depth"]
    assert '"a construction" — **holds** (demonstration, existential' in out["propagation_masks"]
    assert "positive control" not in out["propagation_masks"]
    assert "exact in the limit" not in out["propagation_qk_variance"]


def test_a_caption_quotes_a_measured_detail_as_written(tmp_path):
    """A row's texts go into the caption as reStructuredText that reads as written: ``|measured Y - limit|`` is no
    substitution, ``*`` no emphasis, ``a_`` no reference; docutils renders the item without a problem and shows
    the characters (the same row unescaped: an undefined substitution)."""
    import docutils.core

    from san.claims import verdicts as V
    from san.report.captions import rst_text, verdict_item

    detail = r"mean |measured Y - limit| over *beta*, layer_ 2 \ 3"
    row = V.row("k", "a claim", kind=V.REGRESSION, form=V.QUANTITATIVE, source="s", holds=True, test=detail)
    assert rst_text(detail) == r"mean \|measured Y - limit\| over \*beta\*, layer\_ 2 \\ 3"

    def render(text: str) -> tuple[str, str]:
        stream = tmp_path / "warnings.txt"
        with stream.open("w") as warnings:
            html = docutils.core.publish_string(
                f"- {text}.\n", writer="html", settings_overrides={"warning_stream": warnings, "report_level": 2}
            ).decode()
        return html, stream.read_text()

    html, problems = render(verdict_item(row))
    assert problems == "" and "|measured Y - limit|" in html and "*beta*" in html and "layer_ 2 \\ 3" in html
    assert "Undefined substitution" in render(f"{row['test']}")[1]
