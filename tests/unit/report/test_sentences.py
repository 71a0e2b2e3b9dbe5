"""Text that never breaks: every report caption and README/docs table of a run whose only model is a decoder reads
without "nan", an empty list or empty parentheses."""

from __future__ import annotations

import json
import re

import pytest

from san.claims import verdicts as V
from san.rank_collapse.claims import rank_collapse_claims
from san.rank_collapse.pretrained_claims import pretrained_collapse_claims, pretrained_slower_claims
from san.report import readme
from san.report.captions import render_captions

from helpers import ROOT, default_config, synthetic_pretrained

#: what a broken sentence shows: a NaN, an empty pair of parentheses or brackets, a list that starts or ends empty
BROKEN = re.compile(r"\bnan\b|\(\s*\)|\[\s*\]|\(\s*[;,]|[;,]\s*\)|:\s*\)", re.I)


def _decoder_only(summary: dict) -> dict:
    """The committed run's summary with the rank-collapse sections of a run whose only model is a decoder."""
    t = default_config()["report"]
    p, dec, causal = t["pretrained_collapse"], {"dec": synthetic_pretrained([0.6, 0.3, 0.2, 0.1])}, ("dec",)
    summary["rank_collapse"] = rank_collapse_claims(dec, **t["rank_collapse"], causal=causal)
    summary["pretrained_collapse"] = pretrained_collapse_claims(
        dec, threshold=p["threshold"], max_layer_fraction=p["max_layer_fraction"],
        plateau_control=p["plateau_control"], causal=causal,
    )  # fmt: skip
    summary["pretrained_slower"] = pretrained_slower_claims(
        dec, layer=t["rank_collapse"]["layer"], min_factor=p["slower_factor"],
        init_rate_control=p["init_rate_control"], causal=causal,
    )  # fmt: skip
    sections = {k: v for k, v in summary.items() if k not in ("verdicts", "provenance")}
    return {**sections, "verdicts": V.collect(json.loads(json.dumps(sections))), "provenance": summary["provenance"]}


@pytest.mark.slow
def test_a_decoder_only_run_reads_without_nan_or_empty_parentheses(tmp_path):
    snapshots = ROOT / readme.SNAPSHOTS
    summary = _decoder_only(json.loads((snapshots / "summary.json").read_text()))
    summary = json.loads(json.dumps(summary))  # as summary.json stores it
    written = render_captions(ROOT / "workflow" / "report", tmp_path / "captions", summary)
    texts = {p.name: p.read_text() for p in written}
    texts |= readme.build_tables(summary, readme.run_data(snapshots, snapshots=True))
    verdicts = texts["verdicts.rst"]
    assert "the decoders (dec) collapse at least exponentially" in verdicts and "(this run has none)" in verdicts
    broken = {name: BROKEN.findall(text) for name, text in texts.items() if BROKEN.search(text)}
    assert broken == {}, {name: [m for m in found] for name, found in broken.items()}
