# The report: the paper's claims checked against this run's numbers (captions), and per-rule runtimes.
# `snakemake --report results/report.html` renders the captions written here (results/report/captions/).

from san.report.readme import tables as readme_tables

REPORT_INPUTS = list(TARGETS)  # every result of the configured experiments


rule summary:
    """Check each of the paper's claims on this run's results; write summary.json and the report's captions."""
    input:
        # what every wing's claims read, registered by its rules file
        **SUMMARY_INPUTS,
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
    params:
        **SUMMARY_PARAMS,
        report=config["report"],
        # the entries of the run's models: the facts their caveats are read from (san.claims.caveats)
        model_entries={m: config["models"][m] for m in dict.fromkeys(RANK_COLLAPSE_MODELS + VISION_MODELS)},
    script:
        "../../scripts/summary.py"


rule runtimes:
    """Wall time, CPU time and peak memory of every job, from the benchmark files."""
    input:
        # ancient: the table is refreshed when the summary changes, not when a figure is restyled
        results=[ancient(f) for f in REPORT_INPUTS],
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
