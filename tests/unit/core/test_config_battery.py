"""A battery of bad configs: each is refused by the one config check before any job, naming the offending key.

Most cases run the check in-process (:func:`san.experiments.check_config`, as the workflow does while it parses);
the cases only a workflow run can show (YAML syntax errors, empty files, a name that would escape the project) run
``snakemake -n`` in a copy of the workflow and assert that nothing under ``results/`` (or outside) was written.
"""

import copy
import re

import pytest

from san.core.config import ConfigError
from san.experiments import check_config

from helpers import ROOT, copy_workflow, snakemake, write_config

SCHEMAS = ROOT / "workflow" / "schemas"
BERT, XLNET, MINILM = "bert-base-cased", "xlnet-base-cased", "all-MiniLM-L6-v2"
SMOL, MPNET, GEMMA = "SmolLM2-135M-Instruct", "all-mpnet-base-v2", "gemma-3-270m"


def _set(dotted: str, value):
    """An edit setting the dotted key (list indices as numbers) to ``value``."""

    def edit(cfg):
        *parents, last = dotted.split(".")
        node = cfg
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return edit


def _arch(model: str, **keys):
    return lambda cfg: cfg["models"][model]["init"]["config"].update(keys)


def _rename(section: list[str], old: str, new: str):
    """An edit renaming the mapping entry ``old`` of the mapping at ``section`` to ``new``."""

    def edit(cfg):
        node = cfg
        for part in section:
            node = node[part]
        node[new] = node.pop(old)

    return edit


def _both(*edits):
    def edit(cfg):
        for e in edits:
            e(cfg)

    return edit


ESCAPE = "../../x"
# (id, edit, regex the message must match: the key, and what is wrong where that matters)
CASES = [
    # --- names that become path components: refused by pattern -------------------------------------------------
    ("model-name-escapes", _rename(["models"], BERT, ESCAPE), r"config key 'models': name '\.\./\.\./x'"),
    ("model-name-slash", _rename(["models"], XLNET, "a/b"), r"config key 'models': name 'a/b'"),
    ("model-name-dot", _rename(["models"], XLNET, ".hidden"), r"config key 'models': name '\.hidden'"),
    ("rank-collapse-model-ref", _set("rank_collapse.models.0", ESCAPE), r"'rank_collapse\.models\.0'"),
    ("theory-model-ref", _set("theory.embedding_model", ESCAPE), r"'theory\.embedding_model'"),
    ("propagation-model-ref", _set("propagation.prose_model", ESCAPE), r"'propagation\.prose_model'"),
    ("task-name", _set("paths.tasks.0", ESCAPE), r"'paths\.tasks\.0'"),
    ("derived-task-name", _rename(["paths", "derived_tasks"], "sorting_10k", "../sorting"), r"'paths\.derived_tasks'"),
    ("circle-variant-name", _rename(["circle", "variants"], "SAN", "../SAN"), r"'circle\.variants': name '\.\./SAN'"),
    ("sweep-name", _rename(["propagation", "sweeps"], "masks", "../masks"), r"'propagation\.sweeps'"),
    ("residual-name", _rename(["propagation", "residuals"], "pure", "../pure"), r"'propagation\.residuals'"),
    (
        "residual-ref",
        _set("propagation.sweeps.qk_variance.fixed.residual", "../skip"),
        r"'propagation\.sweeps\.qk_variance\.fixed\.residual'",
    ),
    ("package-subdir", _set(f"models.{MINILM}.pretrained.subdir", "../.."), rf"models\.{MINILM}\.pretrained"),
    ("package-name", _set(f"models.{MINILM}.pretrained.package", "os;rm"), rf"models\.{MINILM}\.pretrained"),
    (
        "pin-file-name",
        lambda c: c["models"][MINILM]["pretrained"]["sha256"].update({"../x": "0" * 64}),
        rf"models\.{MINILM}\.pretrained",
    ),
    (
        "hub-repo-id",
        _set(f"models.{BERT}.pretrained", {"source": "hub", "repo_id": "../../x"}),
        rf"models\.{BERT}\.pretrained",
    ),
    (
        "tokenizer-package",
        _set("paths.memorization.data.tokenizer_package", "../x"),
        r"'paths\.memorization\.data\.tokenizer_package'",
    ),
    # --- integers: 4.0 and true are not integers -----------------------------------------------------------------
    ("int-float-seq-len", _set("text.seq_len", 64.0), r"'text\.seq_len': 64\.0 is not of type 'integer'"),
    ("int-float-batch", _set("rank_collapse.batch_size", 16.0), r"'rank_collapse\.batch_size': 16\.0 is not of type"),
    (
        "int-bool-threads",
        _set("compute.rank_collapse.threads", True),
        r"'compute\.rank_collapse\.threads': True is not of type",
    ),
    ("int-float-init-seed", _set(f"models.{BERT}.init.seed", 0.0), rf"'models\.{BERT}\.init\.seed'"),
    ("int-float-circle-dims", _set("circle.hidden_dims", [8.0, 32]), r"'circle\.hidden_dims\.0'"),
    ("int-float-task-dim", _set("paths.sorting.model.dim", 48.0), r"'paths\.sorting\.model\.dim'"),
    (
        "int-float-derived",
        _set("paths.derived_tasks.sorting_10k.train.epochs", 105.0),
        r"'paths\.derived_tasks\.sorting_10k\.train\.epochs'",
    ),
    ("int-float-sweep-depth", _set("propagation.sweeps.depth.depth", 24.0), r"'propagation\.sweeps\.depth\.depth'"),
    ("int-float-theory", _set("theory.layers", 12.0), r"'theory\.layers'"),
    ("int-float-arch", _arch(BERT, num_hidden_layers=12.0), rf"'models\.{BERT}\.init\.config\.num_hidden_layers'"),
    ("int-bool-arch", _arch(BERT, num_attention_heads=True), rf"'models\.{BERT}\.init\.config\.num_attention_heads'"),
    # --- minimums ----------------------------------------------------------------------------------------------
    ("text-seed", _set("text.seed", -1), r"'text\.seed': -1 is less than the minimum"),
    (
        "attention-products-seed",
        _set("attention_products.seed", -1),
        r"'attention_products\.seed': -1 is less than the minimum",
    ),
    ("init-seed", _set(f"models.{BERT}.init.seed", -1), rf"'models\.{BERT}\.init\.seed'"),
    ("zero-sequences", _set("text.n_sequences", 0), r"'text\.n_sequences'"),
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
        _both(_arch(MINILM, max_position_embeddings=100), _set("text.seq_len", 120)),
        rf"'text\.seq_len'.*models\.{MINILM}\.init\.config\.max_position_embeddings",
    ),
    # --- references between sections --------------------------------------------------------------------------
    (
        "attention-products-capped",
        _set("attention_products.n_sequences", 33),
        r"'attention_products\.n_sequences': 33 sequences requested.*text\.n_sequences = 32",
    ),
    ("theory-tokens", _set("theory.tokens", 200), r"'theory\.tokens': 200 exceeds text\.seq_len"),
    ("theory-sequences", _set("theory.n_sequences", 40), r"'theory\.n_sequences': 40 exceeds text\.n_sequences"),
    (
        "prose-longer-than-text",
        _set("propagation.sweeps.masks.fixed.seq_len", 256),
        r"'propagation\.sweeps\.masks'.*seq_len 256 .* prose input",
    ),
    (
        "isometric-too-long",
        _set("propagation.sweeps.sequence_length.fixed.width_ratio", 0.5),
        r"'propagation\.sweeps\.sequence_length': isometric input needs seq_len <= width",
    ),
    ("unknown-model-ref", _set("rank_collapse.models.0", "bert"), r"'rank_collapse\.models\.0': unknown model 'bert'"),
    ("unknown-task", _set("paths.tasks.0", "sortng"), r"'paths\.tasks\.0': unknown task 'sortng'"),
    ("circle-plot-seed", _set("circle.plot.seed", 99), r"'circle\.plot\.seed'"),
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
    ("unknown-top", _set("rank_colapse", {}), r"\['rank_colapse'\] under the top level"),
    ("unknown-nested", _set("text.seqlen", 3), r"\['seqlen'\] under 'text'"),
    (
        "wrong-type-string",
        _set("attention_products.n_paths", "100"),
        r"'attention_products\.n_paths': '100' is not of type",
    ),
    ("wrong-enum", _set("text.source", "wikipedia"), r"'text\.source'"),
    ("wrong-dtype", _set("attention_products.dtype", "float16"), r"'attention_products\.dtype'"),
    # --- today's architectures: families, package parts, checks, per-model settings -------------------------------
    ("unknown-family", _set(f"models.{BERT}.family", "not_a_family"), rf"'models\.{BERT}\.family'"),
    ("model-dtype", _set(f"models.{SMOL}.dtype", "float16"), rf"'models\.{SMOL}\.dtype'"),
    ("model-mem", _set(f"models.{SMOL}.mem_mb", 100), rf"'models\.{SMOL}\.mem_mb'"),
    ("parts-empty", _set(f"models.{MPNET}.pretrained.parts", []), rf"'models\.{MPNET}\.pretrained"),
    ("parts-escape", _set(f"models.{MPNET}.pretrained.parts.0.file", "../x.zip"), rf"'models\.{MPNET}\.pretrained"),
    ("parts-format", _set(f"models.{MPNET}.pretrained.format", "tar"), rf"'models\.{MPNET}\.pretrained"),
    ("zip-without-folder", lambda c: c["models"][MPNET]["pretrained"].pop("folder"), rf"'models\.{MPNET}\.pretrained"),
    ("gguf-with-folder", _set(f"models.{SMOL}.pretrained.folder", "x"), rf"'models\.{SMOL}\.pretrained"),
    ("parts-bad-pin", _set(f"models.{SMOL}.pretrained.sha256.x", "abc"), rf"'models\.{SMOL}\.pretrained"),
    ("check-kind", _set(f"models.{SMOL}.pretrained.check.kind", "vibes"), rf"'models\.{SMOL}\.pretrained"),
    (
        "continuation-on-encoder",
        _set(f"models.{MPNET}.pretrained.check", {"kind": "continuation"}),
        rf"'models\.{MPNET}\.pretrained': check kind 'continuation' need a causal decoder family",
    ),
    (
        "gguf-on-encoder",
        _set(
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
    ("local-without-pins", _set(f"models.{BERT}.pretrained", {"source": "local", "path": "x"}), rf"'models\.{BERT}"),
    ("gpt2-positions", _arch("gpt2", n_positions=64), r"128 tokens exceed the 64 usable .*init\.config\.n_positions"),
    (
        "roberta-positions",
        _arch("roberta-base", max_position_embeddings=129),
        r"128 tokens exceed the 127 usable position embeddings of model 'roberta-base'",
    ),
    (
        "attention-products-model",
        _both(_set("rank_collapse.models", [BERT]), _set("attention_products.models", [MINILM])),
        r"'attention_products\.models\.0': model 'all-MiniLM-L6-v2' is not in rank_collapse\.models",
    ),
    (
        "attention-products-unknown",
        _set("attention_products.models", [MINILM, "nope"]),
        r"'attention_products\.models\.1'",
    ),
    ("gemma-arch-key", _arch(GEMMA, sliding_windw=4), r"'sliding_windw': did you mean 'sliding_window'"),
]


def test_the_battery_is_large_enough():
    assert len(CASES) + len(WORKFLOW_CASES) >= 50
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


# --- through Snakemake: what only a workflow run shows -----------------------------------------------------------
GOOD = (ROOT / "config.yaml").read_text()
WORKFLOW_CASES = [
    (
        "yaml-syntax",
        lambda wf, cfg: (wf / "config.yaml").write_text(GOOD.replace("  seq_len: 128", "  seq_len: [128")),
        r"config file config\.yaml, line \d+, column \d+: invalid YAML",
    ),
    (
        "yaml-tab",
        lambda wf, cfg: (wf / "config.yaml").write_text(GOOD.replace("  seed: 0\n", "\tseed: 0\n", 1)),
        r"config file config\.yaml, line \d+, column \d+: invalid YAML",
    ),
    (
        "empty-file",
        lambda wf, cfg: (wf / "config.yaml").write_text("# nothing here\n"),
        r"config file config\.yaml is empty",
    ),
    (
        "escaping-model-name",
        lambda wf, cfg: write_config(wf, _renamed_model(cfg, ESCAPE)),
        r"config key 'models': name '\.\./\.\./x'",
    ),
    (
        "float-integer",
        lambda wf, cfg: write_config(wf, _edited(cfg, _set("text.seq_len", 64.0))),
        r"'text\.seq_len': 64\.0 is not of type 'integer'",
    ),
]


def _edited(cfg, edit):
    cfg = copy.deepcopy(cfg)
    edit(cfg)
    return cfg


def _renamed_model(cfg, name):
    cfg = _edited(cfg, _rename(["models"], BERT, name))
    cfg["rank_collapse"]["models"] = [name if m == BERT else m for m in cfg["rank_collapse"]["models"]]
    cfg["theory"]["embedding_model"] = cfg["propagation"]["prose_model"] = name
    return cfg


@pytest.mark.slow
@pytest.mark.parametrize(("write", "message"), [c[1:] for c in WORKFLOW_CASES], ids=[c[0] for c in WORKFLOW_CASES])
def test_bad_config_file_fails_the_dry_run_before_any_job(tmp_path, default_config, write, message):
    wf = copy_workflow(tmp_path / "project" / "wf")
    write(wf, default_config)
    proc = snakemake(wf, "-n", "--cores", "1", check=False, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(message, out), out[-3000:]
    assert not (wf / "results").exists()
    assert sorted(p.name for p in (tmp_path / "project").iterdir()) == ["wf"]  # nothing written beside it
    assert not (tmp_path / "x").exists()
