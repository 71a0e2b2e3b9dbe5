# One model's report (config `model`, target model_report): its acquisition, the four rank-collapse variants with the
# per-layer measures, the context-length run of a decoder, and the verdicts that apply to it alone
# (san.report.model_report), without the other experiments. MODEL (common.smk) is the model's name under `models`.
rule model_verdicts:
    """The verdicts that apply to one model alone: the rank-collapse wing's and the pretrained phenomena's claims on
    its results (and its context-length run, for a decoder), the model as the run's only one."""
    input:
        rank_collapse=RESULT["rank_collapse"],
        sink_context=model_context,
    output:
        f"{RESULTS}/model_report/{{model}}/verdicts.json",
    log:
        "logs/model_verdicts/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/model_verdicts/{{model}}.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("model_verdicts"),
    params:
        model=lambda w: w.model,
        report=config["report"],
    script:
        "../../scripts/model_verdicts.py"


rule model_page:
    """One model's page: per layer the relative residual of the four variants, the massive ratio, first-token norm
    ratio, matrix entropy and sink share, with the verdicts that apply to it (figure, Markdown page); the tidy CSV of
    the per-layer measures beside its rank-collapse netCDF."""
    input:
        data=RESULT["rank_collapse"],
        verdicts=rules.model_verdicts.output[0],
    output:
        measures=f"{RESULTS}/rank_collapse/{{model}}.csv",
        figure=expand(f"{RESULTS}/model_report/{{{{model}}}}/{{{{model}}}}.{{ext}}", ext=FIGURE_FORMATS),
        page=f"{RESULTS}/model_report/{{model}}/README.md",
    log:
        "logs/model_page/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/model_page/{{model}}.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("model_page"),
    params:
        figures=config["figures"],
    script:
        "../../scripts/model_page.py"


rule model_report:
    """Target: one model's page (config `model`: a name under models or a local model folder), its measures and the
    verdicts that apply to it, nothing else."""
    input:
        model_report_inputs,
