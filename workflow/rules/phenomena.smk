# ---- The claims wing (san/phenomena): the pretrained phenomena's models x claims table and its figure, from the
# summary's phenomena section. Its claims read the rank-collapse and vision results (registered by their rules files)
# and the context-length runs (inputs "sink_context", params "sink_context_models").


rule phenomena_table:
    """The models x claims table of the pretrained phenomena (summary.json's phenomena section): each claim's
    verdict on each model alone, its statistic, threshold, control statistic and power, as netCDF and CSV."""
    input:
        summary=f"{RESULTS}/summary.json",
    output:
        nc=f"{RESULTS}/phenomena/table.nc",
        csv=f"{RESULTS}/phenomena/table.csv",
    log:
        "logs/phenomena_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/phenomena_table.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("phenomena_table"),
    script:
        "../../scripts/phenomena_table.py"


rule phenomena:
    """The pretrained phenomena at a glance: models x claims, each cell coloured by the claim's verdict on that
    model and labelled with its statistic."""
    input:
        data=rules.phenomena_table.output.nc,
    output:
        report(
            figures("phenomena"),
            caption=caption("phenomena"),
            category="Pretrained phenomena (beyond the paper)",
        ),
    log:
        "logs/phenomena.log",
    benchmark:
        f"{RESULTS}/benchmarks/phenomena.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("phenomena"),
    params:
        figures=config["figures"],
    script:
        "../../scripts/phenomena.py"


if RANK_COLLAPSE_MODELS or VISION_MODELS:
    TARGETS.extend([*rules.phenomena_table.output, *rules.phenomena.output])
