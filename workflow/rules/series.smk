# Rank collapse along training: the offline series (a small GPT-NeoX trained on the pinned text, one series per seed,
# checkpoints on Pythia's schedule), analysed like revisions of one model.
from san.rank_collapse.series.spec import revisions as series_revisions

SERIES_SEEDS = config["series"]["seeds"]
# The checkpoints of every seed (step0 is the initialisation); tokenize_inputs reads the first one's tokenizer as
# the model SERIES_MODEL.
SERIES_REVISIONS = series_revisions(config["series"])


rule series_train:
    """Train one seed's offline series on the pinned text and save its checkpoints as model folders (resumable)."""
    output:
        directory(RESULT["series"]),
    log:
        "logs/series_train/seed{seed}.log",
    benchmark:
        f"{RESULTS}/benchmarks/series_train/seed{{seed}}.tsv"
    conda:
        TORCH_ENV
    threads: 1
    resources:
        **resources("series_train"),
    params:
        settings={k: v for k, v in config["series"].items() if k != "seeds"},
    script:
        "../../scripts/series_train.py"


rule rank_collapse_series:
    """Fig. 2's measures (four variants, the first-token sink) of every checkpoint of every seed of the series."""
    input:
        series=expand(RESULT["series"], seed=SERIES_SEEDS),
        inputs=RESULT["inputs"].format(model=SERIES_MODEL, weights=SERIES_REVISIONS[0]),
    output:
        f"{RESULTS}/rank_collapse_series.nc",
    log:
        "logs/rank_collapse_series.log",
    benchmark:
        f"{RESULTS}/benchmarks/rank_collapse_series.tsv"
    conda:
        TORCH_ENV
    threads: compute_threads("rank_collapse_series")
    resources:
        **resources("rank_collapse_series"),
    params:
        series=config["series"],
        settings={k: v for k, v in config["rank_collapse"].items() if k != "models"},
        compute=compute_params("rank_collapse_series"),
    script:
        "../../scripts/rank_collapse_series.py"


rule training_dynamics:
    """Rank collapse (first, middle, last layer), the transformer's massive ratio, first-token norm and matrix entropy
    over its layers, and the sink share against the training step, seed bands."""
    input:
        data=rules.rank_collapse_series.output[0],
    output:
        figure_report("training_dynamics"),
    log:
        "logs/training_dynamics.log",
    benchmark:
        f"{RESULTS}/benchmarks/training_dynamics.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("training_dynamics"),
    params:
        figures=config["figures"],
        share_threshold=config["report"]["first_token_sink"]["share_threshold"],
    script:
        "../../scripts/figure.py"


# Series of hub revisions (models.<name>.pretrained.revisions), one job per model.
HUB_SERIES = config["series"]["hub_models"]


rule rank_collapse_hub_series:
    """Every revision of one model's hub series acquired at its pin, analysed (four variants, the first-token sink)
    and removed unless kept; duplicates analysed once."""
    input:
        corpus=rules.corpus.output[0],
    output:
        RESULT["hub_series"],
    log:
        "logs/rank_collapse_hub_series/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/rank_collapse_hub_series/{{model}}.tsv"
    conda:
        TORCH_ENV
    threads: compute_threads("rank_collapse_hub_series")
    resources:
        **resources("rank_collapse_hub_series"),
    params:
        source=lambda w: config["models"][w.model]["pretrained"],
        folder=lambda w: f"{RESULTS}/series_hub/{w.model}",
        settings={k: v for k, v in config["rank_collapse"].items() if k != "models"},
        text={k: v for k, v in config["text"].items() if k != "wiki_bio"},
        compute=compute_params("rank_collapse_hub_series"),
    script:
        "../../scripts/rank_collapse_hub_series.py"


rule training_dynamics_model:
    """One hub series' rank collapse, the transformer's massive ratio, first-token norm and matrix entropy over its
    layers, and the sink share against the training step, duplicates marked."""
    input:
        data=rules.rank_collapse_hub_series.output[0],
    output:
        figure_report("training_dynamics_model", model_figure("training_dynamics_model"), labels={"model": "{model}"}),
    log:
        "logs/training_dynamics_model/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/training_dynamics_model/{{model}}.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("training_dynamics_model"),
    params:
        figures=config["figures"],
        share_threshold=config["report"]["first_token_sink"]["share_threshold"],
    script:
        "../../scripts/figure.py"


# The offline series' result (the summary reads it) and every series target.
OFFLINE_SERIES = [rules.rank_collapse_series.output[0]] if SERIES_SEEDS else []
SERIES = [*OFFLINE_SERIES, *figures("training_dynamics")] if SERIES_SEEDS else []
for _model in HUB_SERIES:
    SERIES += [RESULT["hub_series"].format(model=_model), *figures(f"training_dynamics_model_{_model}")]
TARGETS += SERIES
# What the wing's claims read (san.rank_collapse.series.claims): the offline series' result and its seeds' folders
# with their loss records.
SUMMARY_INPUTS.update(series=OFFLINE_SERIES, series_checkpoints=expand(RESULT["series"], seed=SERIES_SEEDS))


rule series:
    """Target: the training series (offline and of hub revisions), their rank-collapse measures and figures."""
    input:
        SERIES,
