"""A new user's own model, from ``save_pretrained`` to its page with the README's command alone: a 4-layer Llama made
here, saved to a folder outside the workflow, then ``snakemake --cores all model_report --config model=FOLDER`` in a
fresh copy of the workflow on the shipped config.yaml. Only that model's jobs run (acquisition, tokenised inputs, the
rank-collapse job, the context-length run of a decoder, its verdicts and page); a bad folder is refused while the
workflow parses, naming the key, with nothing written."""

from __future__ import annotations

import json
import re

import pytest

from helpers import ROOT, copy_workflow, save_tiny_llama, snakemake

pytestmark = pytest.mark.slow

#: the README's command, with the folder's place
README_COMMAND = "snakemake --cores all model_report --config model=path/to/my-model"


def jobs_run(stdout: str) -> dict[str, int]:
    stats = stdout.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", stats, re.M)}


def test_a_saved_model_goes_to_its_page_with_the_readme_command(tmp_path):
    assert README_COMMAND in (ROOT / "README.md").read_text(), "the README's command changed: update this test"
    folder = save_tiny_llama(tmp_path / "my-llama")
    work = copy_workflow(tmp_path / "work")
    out = snakemake(work, *README_COMMAND.split()[1:-1], f"model={folder}", timeout=900)
    text = out.stdout + out.stderr
    assert jobs_run(text) == {
        "acquire_model": 2,
        "corpus": 1,
        "tokenize_inputs": 2,
        "rank_collapse": 1,
        "sink_context": 1,
        "model_verdicts": 1,
        "model_page": 1,
        "model_report": 1,
    }, text[-3000:]
    assert "Render the report with" not in text, "the report cannot be built from a partial target"
    page = work / "results/model_report/my-llama/README.md"
    assert f"The page of model my-llama: {page.resolve()}" in text
    body = page.read_text()
    assert "## Verdicts that apply to this model" in body and "## Per layer: pretrained weights" in body
    assert "phenomena.sinks_grow_with_context" in body, "a decoder's context-length verdict is on its page"
    verdicts = json.loads((work / "results/model_report/my-llama/verdicts.json").read_text())
    assert verdicts["model"] == "my-llama" and {"rank_collapse", "phenomena"} <= set(verdicts)
    for ext in ("pdf", "png"):
        assert (work / f"results/model_report/my-llama/my-llama.{ext}").stat().st_size > 0

    import pandas as pd

    csv = pd.read_csv(work / "results/rank_collapse/my-llama.csv")
    assert set(csv["weights"]) == {"init", "pretrained"} and set(csv["variant"]) == {
        "SAN",
        "SAN+MLP",
        "SAN+skip",
        "transformer",
    }
    wanted = {"residual_ratio", "massive_ratio", "first_token_norm_ratio", "matrix_entropy", "sink_share"}
    assert wanted <= set(csv["measure"]) and set(csv["layer"]) == set(range(5))
    # the pretrained weights are the folder's, not a second random initialisation
    pre = csv[(csv.weights == "pretrained") & (csv.measure == "residual_ratio")]["mean"].to_numpy()
    init = csv[(csv.weights == "init") & (csv.measure == "residual_ratio")]["mean"].to_numpy()
    assert (pre != init).any()
    # nothing else ran: no other experiment's results
    assert sorted(p.name for p in (work / "results").iterdir()) == [
        "benchmarks",
        "inputs",
        "model_report",
        "models",
        "phenomena",
        "rank_collapse",
        "text",
    ]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d, r"config key 'model': '.*nowhere' is neither a model under 'models'"),
        (
            lambda d: (d.mkdir(), (d / "config.json").write_text('{"model_type": "mamba"}'), d)[-1],
            r"config key 'model': .*model_type 'mamba' mixes tokens with layers that are not softmax attention",
        ),
    ],
    ids=["missing-folder", "mamba"],
)
def test_a_bad_model_is_refused_while_parsing_with_nothing_written(tmp_path, make, message):
    folder = make(tmp_path / "nowhere")
    work = copy_workflow(tmp_path / "work")
    before = sorted(p.name for p in work.iterdir())
    out = snakemake(work, "-n", "--cores", "1", "model_report", "--config", f"model={folder}", check=False, timeout=300)
    assert out.returncode != 0 and re.search(message, out.stdout + out.stderr), out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert sorted(p.name for p in work.iterdir() if p.name != ".snakemake") == before
