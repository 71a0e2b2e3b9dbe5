# Rank collapse in image encoders (beyond the paper): the four variants of each vision model on pinned photographs
# and seeded noise images, over all tokens and the patch tokens alone, with the patch grid's spatial spectrum.

VISION = config["vision"]
VISION_MODELS = VISION["models"]
# The inputs of one model's job: each model's own image processor prepares the images.
VISION_INPUT_SETTINGS = {k: VISION[k] for k in ("images", "noise_images", "noise_size", "seed")}


rule vision_inputs:
    """Pixel values of the pinned photographs and noise images by one model's own image processor (its settings as
    attributes)."""
    input:
        model=rules.acquire_model.output[0],
    output:
        RESULT["pixels"],
    log:
        "logs/vision_inputs/{model}/{weights}.log",
    benchmark:
        f"{RESULTS}/benchmarks/vision_inputs/{{model}}/{{weights}}.tsv"
    conda:
        TORCH_ENV
    threads: 1
    resources:
        **resources("vision_inputs"),
    params:
        settings=VISION_INPUT_SETTINGS,
    script:
        "../../scripts/vision_inputs.py"


# The rank-collapse job shape (rule rank_collapse, its script), on pixel values, with the vision section's settings.
use rule rank_collapse as vision_model with:
    """Relative residual (all tokens, patch tokens), high-frequency shares and token norms per layer and image for
    each weights x variant of one image encoder."""
    input:
        models=model_inputs("model"),
        inputs=model_inputs("pixels"),
    output:
        RESULT["vision"],
    log:
        "logs/vision_model/{model}.log",
    benchmark:
        f"{RESULTS}/benchmarks/vision_model/{{model}}.tsv"
    wildcard_constraints:
        model=one_of(VISION_MODELS),
    threads: compute_threads("vision_model")
    resources:
        **model_resources("vision_model", gpu=compute_gpu("vision_model")),
    params:
        weights=lambda w: model_weights(w.model),
        settings=model_settings("vision", drop=("models",)),
        compute=compute_params("vision_model"),
        # the experiment whose `run` the job calls: the image encoders'
        experiment="san.rank_collapse.vision.experiment",


rule vision:
    """The image encoders' figure: the patch tokens' high-frequency share and the spatial high-frequency share per
    layer, the four variants, one column per model."""
    input:
        data=expand(RESULT["vision"], model=VISION_MODELS),
    output:
        figure_report("vision"),
    log:
        "logs/vision.log",
    benchmark:
        f"{RESULTS}/benchmarks/vision.tsv"
    conda:
        "../../envs/plot.yaml"
    threads: 1
    resources:
        **resources("vision"),
    params:
        models=VISION_MODELS,
        figures=config["figures"],
    script:
        "../../scripts/figure.py"


if VISION_MODELS:
    TARGETS.extend(rules.vision.output)
# What the wing's claims read (san.rank_collapse.vision.claims).
SUMMARY_INPUTS.update(vision=expand(RESULT["vision"], model=VISION_MODELS))
SUMMARY_PARAMS.update(vision_models=VISION_MODELS)
