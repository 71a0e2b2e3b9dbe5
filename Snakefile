# san: rebuild every result of Dong, Cordonnier & Loukas (ICML 2021) from config.yaml.
# Usage: snakemake --cores all   (see README.md for GPU nodes, SLURM clusters and the report)
from snakemake.utils import min_version

min_version("9.0")

# The config of the workflow; a file given with --configfile is laid over it (its values, in this file's order).
CONFIG_FILE = "config.yaml"

# A YAML syntax error or an empty file fails here naming the file and line (Snakemake's loader names neither).
from san.core.config import check_config_files

check_config_files([CONFIG_FILE])


configfile: CONFIG_FILE


# Front page of `snakemake --report results/report.html`: the claims and this run's numbers (see report.smk).
report: "results/report/captions/workflow.rst"


include: "workflow/rules/common.smk"


# Every wing's rules files, in the order of the wings' registry (san.experiments.WINGS), then the report's.
for wing_rules in WING_RULES:

    include: wing_rules


include: "workflow/rules/report.smk"


rule all:
    """Target: every result of the config (the default target)."""
    default_target: True
    input:
        TARGETS,


# Every rule that runs a script gets the library modules the script imports as inputs (after the last rule).
add_library_inputs(workflow.rules)


onsuccess:
    # Where the run's results are (also after a partial target such as fig2) and how to render the report.
    summary = Path(RESULTS, "summary.json")
    if summary.is_file():
        print(f"Claims checked on this run: {summary.resolve()}")
    print(f"Results are in {Path(RESULTS).resolve()}; figures in {Path(RESULTS, 'figures').resolve()}.")
    print(f"Render the report with: snakemake --report {RESULTS}/report.html")
