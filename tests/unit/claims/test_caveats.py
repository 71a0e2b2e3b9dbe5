"""Caveats that travel with a verdict: derived from the model entries' facts and the thresholds' history, shown as a
marker on every row and models x claims cell that rests on them, explained once under each table."""

from __future__ import annotations

from san.claims import caveats
from san.claims.record import history
from san.phenomena.tables import phenomena_table
from san.report.readme import verdicts_table

ENTRIES = {
    "smol": {"bos_in_inputs": False, "pretrained": {"format": "gguf", "file_name": "SmolLM2-135M-Instruct.Q4_1.gguf"}},
    "gemma": {"pretrained": {"format": "gguf", "file_name": "gemma-3-270m-q4_k_m.gguf"}},
    "minilm": {"fine_tune_of": "nreimers/MiniLM-L6-H384-uncased", "pretrained": {"source": "package"}},
    "dino": {"pretrained": {"source": "onnx", "lineage": "DINOv2 ViT-S/14 backbone fine-tuned for saliency"}},
    "bert": {"pretrained": None},
}
REPORT = {"vision": {"preserved_above": 0.1, "threshold_notes": {"preserved_above": "set to 0.5 before; lowered"}}}


def _row(key: str, detail: str, threshold_key: str = "report.x.y") -> dict:
    return {"key": key, "statement": key, "source": "s", "verdict": "holds", "kind": "scientific", "detail": detail,
            "item": "", "threshold": {"key": threshold_key, "value": 1.0, "above": True, "log": False}}  # fmt: skip


def test_the_facts_of_the_model_entries():
    facts = caveats.facts(ENTRIES)
    assert facts["smol"] == {"q": "GGUF Q4_1", "b": "no BOS token"}
    assert facts["gemma"] == {"q": "GGUF Q4_K_M"}
    assert facts["minilm"] == {"f": "fine-tune of nreimers/MiniLM-L6-H384-uncased"} and facts["dino"] == {
        "f": "fine-tune"
    }
    assert "bert" not in facts


def test_a_threshold_changed_after_its_result_has_its_history():
    h = history(REPORT, "report.vision.preserved_above")
    assert h["set_before"] is False and h["old_value"] == 0.5
    assert history(REPORT, "report.vision.decay_below")["set_before"] is True


def test_markers_on_rows_and_cells_and_their_legend_under_each_table():
    sections = {
        "phenomena": {
            "verdicts": [_row("massive", "smol: x; gemma: y; smolder: z")],
            "table": {"smol": {"a": {"verdict": "holds", "value": 2.0, "threshold_key": "report.x.y"}},
                      "bert": {"a": {"verdict": "n/a", "value": None}}},
            "models": {"smol": "decoder", "bert": "encoder"}, "claims": {"a": "claim a"},
        },
        "vision": {"verdicts": [_row("oversmoothing", "smol: 0.3", "report.vision.preserved_above")]},
    }  # fmt: skip
    caveats.annotate(sections, ENTRIES, REPORT)
    row = sections["phenomena"]["verdicts"][0]
    assert row["caveats"]["markers"] == ["q", "b"]
    assert row["caveats"]["why"]["q"] == ["gemma (GGUF Q4_K_M)", "smol (GGUF Q4_1)"]
    # a row of random-init weights carries no weight caveat, only its threshold's
    assert sections["vision"]["verdicts"][0]["caveats"]["markers"] == ["t"]
    assert sections["vision"]["verdicts"][0]["threshold_history"]["old_value"] == 0.5
    assert sections["phenomena"]["table"]["smol"]["a"]["caveats"] == ["q", "b"]
    assert sections["phenomena"]["table"]["bert"]["a"]["caveats"] == []
    table = phenomena_table({"phenomena": sections["phenomena"]}, {})
    assert "| smol | decoder | holds: 2 [q, b] |" in table
    assert "\nCaveats: q: quantised weights" in table and "smol (GGUF Q4_1)" in table and "b: inputs without" in table
    rows = [{**sections["vision"]["verdicts"][0], "claim": "vision.oversmoothing"}]
    verdicts = verdicts_table({"verdicts": {"scientific": rows, "regression": [], "demonstration": []}}, {})
    assert "| holds | t |" in verdicts and "t: threshold set after its result" in verdicts


def test_a_table_without_caveats_has_no_legend():
    assert caveats.legend(rows=[{"caveats": {"markers": [], "why": {}}}]) == ""


def test_a_verdict_another_definition_would_change_is_marked_on_its_row_and_cell():
    row = {**_row("colocated", "bert: x; other: y"), "sensitive": ["bert"]}
    sections = {"phenomena": {"verdicts": [row, _row("plateau", "bert: x")],
                              "table": {"bert": {"colocated": {"verdict": "holds", "value": 1.0, "sensitive": True},
                                                 "plateau": {"verdict": "holds", "value": 1.0}}}}}  # fmt: skip
    caveats.annotate(sections, ENTRIES, {})
    marked, plain = sections["phenomena"]["verdicts"]
    assert marked["caveats"] == {"markers": ["d"], "why": {"d": ["bert"]}} and plain["caveats"]["markers"] == []
    cells = sections["phenomena"]["table"]["bert"]
    assert cells["colocated"]["caveats"] == ["d"] and cells["plateau"]["caveats"] == []
    assert "d: the verdict depends on the definition" in caveats.legend(rows=[marked])
