# The report: the paper's claims checked against this run's numbers (captions), and per-rule runtimes.
# `snakemake --report results/report.html` renders the captions written here (results/report/captions/).

from san.report.readme import TABLES as README_TABLES

REPORT_INPUTS = list(TARGETS)  # every result of the configured experiments


rule summary:
    """Check each of the paper's claims on this run's results; write summary.json and the report's captions."""
    input:
        rank_collapse=expand(RESULT["rank_collapse"], model=config["rank_collapse"]["models"]),
        attention_products=expand(RESULT["attention_products"], model=ATTENTION_PRODUCT_MODELS),
        circle=RESULT["circle_collapse"],
        # read by the run's config hash only: the collapse table carries no config, the gathered result does
        circle_result=rules.circle_gather.output[0],
        paths=expand(RESULT["paths"], task=config["paths"]["tasks"]),
        paths_exact=expand(RESULT["paths_exact"], task=config["paths"]["tasks"]),
        theorem=rules.theorem_sweep.output[0],
        propagation=expand(RESULT["propagation"], sweep=PROPAGATION_SWEEPS),
        series=OFFLINE_SERIES,
        series_checkpoints=expand(RESULT["series"], seed=SERIES_SEEDS),
        vision=expand(RESULT["vision"], model=VISION_MODELS),
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
        models=config["rank_collapse"]["models"],
        attention_product_models=ATTENTION_PRODUCT_MODELS,
        tasks=config["paths"]["tasks"],
        report=config["report"],
        theory={k: config["theory"][k] for k in ("float_floor", "limit")},
        sweeps=PROPAGATION_SWEEPS,
        vision_models=VISION_MODELS,
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
        paths=[f"{RESULTS}/paths/summary.csv"] if config["paths"]["tasks"] else [],
    output:
        [f"{RESULTS}/tables/readme/{name}.md" for name in README_TABLES],
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
