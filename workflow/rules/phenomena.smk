# What pretraining does to the residual stream (massive activations, attention sinks, compression). The per-layer
# measures are the rank_collapse and vision jobs' (san.measures.phenomena); this file adds the unmodified decoders at
# several context lengths (Barbero et al. 2025: sinks grow with the context).
from san.phenomena.spec import quantisation_models
from san.rank_collapse.spec import context_models

# Models measured along the context (phenomena.context.models; null: the causal decoders with pretrained weights).
SINK_CONTEXT_MODELS = context_models(config)
# The context job's slice: the lengths and the rank-collapse batch (and, per model, its dtype: the transformer
# variant's is used).
SINK_CONTEXT = {
    "seq_lens": config["phenomena"]["context"]["seq_lens"],
    "batch_size": config["rank_collapse"]["batch_size"],
}


rule sink_context:
    """The attention on the first token per layer and head, and the first token's norm and the massive-activation
    ratio per layer and sequence, of one decoder's unmodified model (transformer variant) on the first seq_len tokens
    of its input sequences, for each length of phenomena.context.seq_lens and each weight set."""
    input:
        models=model_inputs("model"),
        inputs=model_inputs("inputs"),
    output:
        RESULT["sink_context"],
    log:
        "logs/sink_context/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/sink_context/{{model}}.tsv"
    priority: model_priority
    conda:
        TORCH_ENV
    threads: compute_threads("sink_context")
    resources:
        **analysis_resources("sink_context", "rank_collapse"),
    params:
        weights=lambda w: model_weights(w.model),
        settings=lambda w: {
            **SINK_CONTEXT,
            "dtype": config["models"][w.model].get("dtype", config["rank_collapse"]["dtype"]),
        },
        compute=compute_params("sink_context"),
    script:
        "../../scripts/sink_context.py"


TARGETS.extend(expand(RESULT["sink_context"], model=SINK_CONTEXT_MODELS))

# What the claims read of the context-length runs (san.phenomena.claims: inputs "sink_context", params
# "sink_context_models").
SUMMARY_INPUTS.update(sink_context=expand(RESULT["sink_context"], model=SINK_CONTEXT_MODELS))
SUMMARY_PARAMS.update(sink_context_models=SINK_CONTEXT_MODELS)
# Families at several sizes (phenomena.size_ladders): the size claim reads their context-length runs.
SUMMARY_PARAMS.update(size_ladders=config["phenomena"]["size_ladders"])


# Models whose cells get the quantisation control (those of phenomena.quantisation.models the run analyses: text
# models, and image encoders of vision.smk's VISION_MODELS) and its copies' block types.
QUANTISATION = config["phenomena"]["quantisation"]
QUANTISATION_MODELS = quantisation_models(config)
QUANTISED_IMAGE_ENCODERS = [m for m in QUANTISATION_MODELS if m in VISION_MODELS]
QUANTISED_TEXT_MODELS = [m for m in QUANTISATION_MODELS if m not in VISION_MODELS]


rule quantisation_drift:
    """The quantisation control of one text model: its pretrained weights requantised to each of
    phenomena.quantisation.kinds, and the rank-collapse measures of the weights and of every copy, one result with a
    weight set each (san.rank_collapse.quantisation); the summaries judge each copy's cells and rows
    (san.phenomena.drift, san.claims.drift)."""
    input:
        models=lambda w: [RESULT["model"].format(model=w.model, weights="pretrained")],
        inputs=lambda w: [RESULT["inputs"].format(model=w.model, weights="pretrained")],
    output:
        RESULT["quantisation"],
    log:
        "logs/quantisation_drift/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/quantisation_drift/{{model}}.tsv"
    wildcard_constraints:
        model=one_of(QUANTISED_TEXT_MODELS),
    priority: model_priority
    conda:
        TORCH_ENV
    threads: compute_threads("quantisation_drift")
    resources:
        **analysis_resources("quantisation_drift", "rank_collapse"),
    params:
        settings=model_settings("rank_collapse", drop=("models",)),
        kinds=QUANTISATION["kinds"],
        compute=compute_params("quantisation_drift"),
        # the experiment whose `run` measures the weights and the copies (san.rank_collapse.experiment: text models)
        experiment="san.rank_collapse.experiment",
    script:
        "../../scripts/quantisation_drift.py"


use rule quantisation_drift as vision_quantisation_drift with:
    """The quantisation control of one image encoder: its copies measured like vision.models (the vision experiment
    on its pixel values), on the compute settings of compute.quantisation_drift."""
    input:
        models=lambda w: [RESULT["model"].format(model=w.model, weights="pretrained")],
        inputs=lambda w: [RESULT["pixels"].format(model=w.model, weights="pretrained")],
    log:
        "logs/vision_quantisation_drift/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/vision_quantisation_drift/{{model}}.tsv"
    wildcard_constraints:
        model=one_of(QUANTISED_IMAGE_ENCODERS),
    resources:
        **model_resources("vision_quantisation_drift", gpu=compute_gpu("quantisation_drift")),
    params:
        settings=model_settings("vision", drop=("models",)),
        kinds=QUANTISATION["kinds"],
        compute=compute_params("quantisation_drift"),
        experiment="san.rank_collapse.vision.experiment",


TARGETS.extend(expand(RESULT["quantisation"], model=QUANTISATION_MODELS))
SUMMARY_INPUTS.update(quantisation=expand(RESULT["quantisation"], model=QUANTISATION_MODELS))
SUMMARY_PARAMS.update(quantisation_models=QUANTISATION_MODELS)


# ---- The claims wing (san/phenomena): the pretrained phenomena's models x claims table and its figure, from the
# phenomena wing's summary (results/summary/phenomena.json). Its claims read the rank-collapse and vision results
# (registered by their rules files) and the context-length runs (inputs "sink_context", params "sink_context_models").


rule phenomena_table:
    """The models x claims table of the pretrained phenomena (its wing's summary): each claim's
    verdict on each model alone, its statistic, threshold, control statistic and power, as netCDF and CSV."""
    input:
        summary=RESULT["wing_summary"].format(wing="phenomena"),
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
        figure_report("phenomena"),
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
        "../../scripts/figure.py"


if RANK_COLLAPSE_MODELS or VISION_MODELS:
    TARGETS.extend([*rules.phenomena_table.output, *rules.phenomena.output])
