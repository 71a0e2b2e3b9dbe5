"""The report's front page in a real headless browser (Playwright driving Debian's chromium): a reader lands on the
title, the findings in plain words and the first verdict rows, in the first screen at 1400 x 1000 and 1920 x 1080,
with the rule graph beside them, not over them.

The report is built once, from the committed run's ``summary.json`` (docs/results/), its captions and pages rendered
by the library as the summary and report_pages rules render them, and a stand-in workflow that has the real
workflow's rule names (so the rule graph is as tall) and the report's front page, verdicts pages and one figure: no
pipeline runs. ``SAN_SCREENSHOTS=<folder>`` also writes the screenshots there (docs/figures/ for the docs)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from helpers import ROOT, snakemake, synthetic_pretrained, synthetic_rank_collapse

pytestmark = pytest.mark.slow

WINDOWS = ((1400, 1000), (1920, 1080))
TITLE = "Attention is not all you need: a rebuild and its verdicts"


def _rule_names() -> list[str]:
    """The real workflow's rule names, in the order its rules files define them."""
    files = [ROOT / "workflow" / "rules" / f for f in ("common.smk",)]
    files += sorted((ROOT / "workflow" / "rules").glob("*.smk"))
    names = [n for f in dict.fromkeys(files) for n in re.findall(r"^rule (\w+):", f.read_text(), re.M)]
    return [n for n in dict.fromkeys(names) if n not in ("all", "report_pages", "theorem_bound")]


STANDIN = """
report: "results/report/captions/workflow.rst"

STAGES = {stages!r}

rule all:
    input: "results/report/verdicts.html", "results/report/models_claims_layers.html", "results/figures/theorem.png"

for i, stage in enumerate(STAGES):
    rule:
        name: stage
        input: [f"results/stages/{{STAGES[i - 1]}}"] if i else []
        output: f"results/stages/{{stage}}"
        shell: "touch {{output}}"

rule report_pages:
    input: f"results/stages/{{STAGES[-1]}}"
    output:
        verdicts=report("results/report/verdicts.html", category="Verdicts", labels={{"page": "every verdict"}}),
        view=report("results/report/models_claims_layers.html", category="Verdicts", labels={{"page": "view"}}),
    shell: "true"

rule theorem_bound:
    input: f"results/stages/{{STAGES[0]}}"
    output: report("results/figures/theorem.png", category="Theorem 2.2 vs its bound")
    shell: "true"
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    from san.report.captions import render_captions
    from san.report.pages import claims_view, rst_page

    work = tmp_path_factory.mktemp("front")
    summary = json.loads((ROOT / "docs/results/summary.json").read_text())
    captions = work / "results/report/captions"
    render_captions(ROOT / "workflow/report", captions, summary)
    (work / "results/report/verdicts.html").write_text(rst_page((captions / "verdicts.rst").read_text(), "Verdicts"))
    # the view without the phenomena grid: plotly.js inlined once (about 5 MB), the report stays quick to open
    models = {"a": synthetic_pretrained([0.5, 0.1, 0.01, 1e-3]), "b": synthetic_rank_collapse(1e-4, 0.5)}
    view = claims_view({k: v for k, v in summary.items() if k != "phenomena"}, models)
    (work / "results/report/models_claims_layers.html").write_text(view)
    (work / "results/figures").mkdir(parents=True)
    shutil.copyfile(ROOT / "docs/figures/theorem_bound.png", work / "results/figures/theorem.png")
    (work / "Snakefile").write_text(STANDIN.format(stages=_rule_names()))
    snakemake(work, "--report", "report.html", "--cores", "1")
    return work / "report.html"


def _inside(box: dict, width: int, height: int) -> bool:
    return box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= width and box["y"] + box["height"] <= height


def _overlap(a: dict, b: dict) -> bool:
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"] or a["y"] + a["height"] <= b["y"]
                or b["y"] + b["height"] <= a["y"])  # fmt: skip


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (the dev extra)")
    if shutil.which("chromium") is None:
        pytest.skip("no chromium to drive: install Debian's chromium package (apt-get install chromium; .ci/run does)")
    executable = shutil.which("chromium")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.mark.parametrize(("width", "height"), WINDOWS)
def test_the_front_page_opens_on_the_title_findings_and_first_verdicts(report, browser, tmp_path, width, height):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(report.as_uri(), timeout=120_000)
    page.wait_for_selector("div#rulegraph svg", timeout=60_000)
    title = page.get_by_role("heading", name=TITLE).bounding_box()
    findings = page.get_by_text("The paper.", exact=True).bounding_box()
    later = page.get_by_text("The follow-up literature.", exact=True).bounding_box()
    rows = page.locator(".prose table tbody tr")
    first_rows = [rows.nth(i).bounding_box() for i in range(min(3, rows.count()))]
    graph = page.locator("div#rulegraph").bounding_box()
    shots = [tmp_path] + ([Path(os.environ["SAN_SCREENSHOTS"])] if os.environ.get("SAN_SCREENSHOTS") else [])
    for folder in shots:
        page.screenshot(path=str(folder / f"report_front_page_{width}x{height}.png"))
    page.close()
    assert len(first_rows) == 3, "the front page shows its first verdict rows"
    for name, box in [("title", title), ("findings", findings), ("follow-up findings", later)] + [
        (f"verdict row {i + 1}", b) for i, b in enumerate(first_rows)
    ]:
        assert box is not None and _inside(box, width, height), f"{name} is not in the first screen: {box}"
        assert not _overlap(box, graph), f"the rule graph {graph} is drawn over the {name} {box}"


def test_the_front_page_links_to_the_verdicts_and_the_interactive_view(report, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(report.as_uri(), timeout=120_000)
    page.locator(".prose").get_by_role("link", name="Verdicts").click()
    listed = page.get_by_text("every verdict").first
    listed.wait_for(timeout=5_000)
    view = page.get_by_text("view", exact=True).first
    assert listed.is_visible() and view.is_visible(), "the Verdicts category lists both pages"
    page.close()
