# The report: the paper's claims checked against this run's numbers (captions), and per-rule runtimes.
# `snakemake --report results/report.html` renders the captions written here (results/report/captions/).

from san.claims.caveats import caveat_entry
from san.experiments import WINGS, wing_inputs
from san.report.readme import tables as readme_tables

REPORT_INPUTS = list(TARGETS)  # every result of the configured experiments
WING_NAMES = [w.name for w in WINGS]
# the config the wings' summaries read besides SUMMARY_PARAMS: config `report` (each wing its sections) and, of the
# entries of the run's models, the keys their caveats are read from (san.claims.caveats.ENTRY_KEYS)
SUMMARY_FACTS = {
    "report": config["report"],
    "model_entries": {
        m: caveat_entry(config["models"][m]) for m in dict.fromkeys(RANK_COLLAPSE_MODELS + VISION_MODELS)
    },
}


rule wing_summary:
    """Check one wing's claims on its own results (the files, values and report sections it reads,
    san.experiments.WINGS): results/summary/<wing>.json, so no wing's verdicts wait for another wing."""
    input:
        unpack(lambda w: wing_inputs(w.wing, SUMMARY_INPUTS, {})[0]),
    output:
        RESULT["wing_summary"],
    log:
        "logs/wing_summary/{wing}.log",
    benchmark:
        f"{RESULTS}/benchmarks/wing_summary/{{wing}}.tsv"
    wildcard_constraints:
        wing="|".join(WING_NAMES),
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("wing_summary"),
    params:
        # its values and report sections, and the entries of the run's models: the facts their caveats are read
        # from (san.claims.caveats)
        claims=lambda w: wing_inputs(w.wing, {}, {**SUMMARY_PARAMS, **SUMMARY_FACTS})[1],
    script:
        "../../scripts/wing_summary.py"


rule summary:
    """Gather every wing's claims into summary.json with the verdict table; write the report's captions."""
    input:
        wings=expand(RESULT["wing_summary"], wing=WING_NAMES),
        templates=REPORT_TEMPLATES,
    output:
        json=f"{RESULTS}/summary.json",
        captions=[f"{RESULTS}/report/captions/{Path(t).name}" for t in REPORT_TEMPLATES],
    log:
        "logs/summary.log",
    benchmark:
        f"{RESULTS}/benchmarks/summary.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("summary"),
    script:
        "../../scripts/summary.py"


rule runtimes:
    """Wall time, CPU time and peak memory of every job, from the benchmark files."""
    input:
        # ancient: the table is refreshed when the summary changes, not when a figure is restyled
        results=REPORT_INPUTS,
        summary=rules.summary.output.json,
    output:
        report(
            f"{RESULTS}/tables/runtimes.csv",
            caption=caption("runtimes"),
            category="Runtimes",
        ),
    log:
        "logs/runtimes.log",
    benchmark:
        f"{RESULTS}/benchmarks/runtimes.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("runtimes"),
    params:
        folder=f"{RESULTS}/benchmarks",
    script:
        "../../scripts/runtimes.py"


rule readme_tables:
    """Markdown tables of this run's numbers for README.md and docs/ (python -m san.report.readme publish)."""
    input:
        summary=rules.summary.output.json,
        # the run's other data that the wings' tables read, registered by the rules files that write it
        data=TABLE_INPUTS,
    output:
        [f"{RESULTS}/tables/readme/{name}.md" for name in readme_tables()],
    log:
        "logs/readme_tables.log",
    benchmark:
        f"{RESULTS}/benchmarks/readme_tables.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("readme_tables"),
    script:
        "../../scripts/readme_tables.py"


TARGETS += [rules.summary.output.json, rules.runtimes.output[0], *rules.readme_tables.output]


rule report_pages:
    """The report's verdicts page (every verdict with its numbers) and its interactive models x claims x layers view,
    self-contained HTML pages that the front page links to."""
    input:
        summary=rules.summary.output.json,
        verdicts=f"{RESULTS}/report/captions/verdicts.rst",
        rank_collapse=expand(RESULT["rank_collapse"], model=RANK_COLLAPSE_MODELS),
    output:
        verdicts=report(
            f"{RESULTS}/report/verdicts.html",
            caption=caption("verdicts_page"),
            category="Verdicts",
            labels={"page": "every verdict"},
        ),
        view=report(
            f"{RESULTS}/report/models_claims_layers.html",
            caption=caption("models_claims_layers"),
            category="Verdicts",
            labels={"page": "models x claims x layers"},
        ),
    log:
        "logs/report_pages.log",
    benchmark:
        f"{RESULTS}/benchmarks/report_pages.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("report_pages"),
    params:
        models=RANK_COLLAPSE_MODELS,
    script:
        "../../scripts/report_pages.py"


TARGETS += rules.report_pages.output
