"""Config validation: defaults, clear errors naming the key, failure before any job runs."""

import copy

import pytest
import yaml

from san.core.config import ConfigError, ordered_like, validate_config, with_defaults
from san.experiments import check_config
from san.paths.spec import task_architectures, task_slices
from san.rank_collapse.spec import VARIANT_DTYPES, variant_dtypes

from helpers import ROOT

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def test_default_config_is_valid_and_gets_defaults(default_config):
    cfg = copy.deepcopy(default_config)
    validate_config(cfg, SCHEMA)
    assert cfg["rank_collapse"]["dtype"] == VARIANT_DTYPES
    minimal = {"models": {"m": {"family": "bert", "init": {"config": {}}}}}
    validate_config(minimal, SCHEMA)
    assert minimal["rank_collapse"]["dtype"] == VARIANT_DTYPES, "the schema's default is the library's"
    assert minimal["compute"]["rank_collapse"] == {"device": "auto", "threads": 1, "memory_budget_mb": None}
    assert minimal["compute"]["paths_train"]["device"] == "cpu" and minimal["text"]["n_sequences"] == 32
    assert minimal["models"]["m"]["init"]["seed"] == 0 and minimal["figures"]["formats"] == ["pdf", "png"]


def test_ordered_like_puts_keys_in_the_reference_order_at_every_depth():
    reference = {"a": 1, "b": {"x": 1, "y": 2}, "c": [{"p": 1, "q": 2}], "d": 0}
    value = {"new": 1, "c": [{"q": 5, "p": 6}, {"s": 1, "r": 2}], "b": {"z": 3, "y": 2, "x": 1}, "a": 9}
    out = ordered_like(value, reference)
    assert out == value, "the values are kept"
    assert list(out) == ["a", "b", "c", "new"], "reference order, then the keys the reference lacks in their order"
    assert list(out["b"]) == ["x", "y", "z"]
    assert [list(item) for item in out["c"]] == [["p", "q"], ["s", "r"]], "list items matched by position"
    assert ordered_like({"b": 1, "a": 2}, None) == {"b": 1, "a": 2} and list(ordered_like({"b": 1, "a": 2}, 3)) == [
        "b",
        "a",
    ]
    assert ordered_like([3, {"k": 1}], "x") == [3, {"k": 1}]


def test_with_defaults_fills_an_invalid_config_and_leaves_it_unchanged():
    config = {"models": {"m": {"family": "bert", "init": {"config": {}}}}, "text": {"n_sequences": "many"}}
    filled = with_defaults(config, SCHEMA)
    assert filled["compute"]["rank_collapse"]["device"] == "auto" and filled["text"]["n_sequences"] == "many"
    assert filled["text"]["seq_len"] > 0
    assert config == {"models": {"m": {"family": "bert", "init": {"config": {}}}}, "text": {"n_sequences": "many"}}


@pytest.mark.slow
def test_check_config_orders_an_overlaid_config_like_its_reference(default_config):
    """Snakemake starts from a --configfile overlay and merges config.yaml into it, so the overlay's keys come first;
    with config.yaml as the reference the checked config is the same mapping in the same order, derived task slices
    included."""
    reference = copy.deepcopy(default_config)
    plain = copy.deepcopy(default_config)
    plain_slices = check_config(plain, SCHEMA.parent, reference=reference)
    overlaid = {"figures": {"dpi": plain["figures"]["dpi"]}, "paths": {"sorting": {"train": {"epochs": 65}}}}
    for key, value in default_config.items():  # Snakemake's merge: the overlay's mappings first, then config.yaml's
        overlaid[key] = {**overlaid[key], **value} if key in overlaid else copy.deepcopy(value)
    overlaid["paths"]["sorting"]["train"]["epochs"] = 65
    assert list(overlaid) != list(plain)
    slices = check_config(overlaid, SCHEMA.parent, reference=reference)
    assert repr(overlaid) == repr(plain) and repr(slices) == repr(plain_slices)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["rank_collapse"].update(bogus=1), r"unknown config key\(s\) \['bogus'\] under 'rank_collapse'"),
        (lambda c: c.update(extra_section={}), r"unknown config key\(s\) \['extra_section'\] under the top level"),
        (lambda c: c["rank_collapse"].update(batch_size="16"), r"'rank_collapse.batch_size': '16' is not of type"),
        (lambda c: c["rank_collapse"].update(dtype="float128"), r"'rank_collapse.dtype'"),
        (lambda c: c["rank_collapse"].update(models=["gpt-5"]), r"'rank_collapse.models.0': unknown model 'gpt-5'"),
        (lambda c: c["models"]["bert-base-cased"].update(family="gpt"), r"'models.bert-base-cased.family'"),
        (
            lambda c: c.update(compute={"circle_train": {"device": "tpu", "threads": 1}}),
            r"'compute.circle_train.device'",
        ),
        (lambda c: c.update(compute={"paths_train": {"device": "cpu"}}), r"'compute.paths_train'.*threads"),
        (lambda c: c.update(compute={"paths_train": {"device": "cpu", "threads": 1, "gpu": 1}}), r"'gpu'"),
        (
            lambda c: c["models"]["all-MiniLM-L6-v2"]["pretrained"]["sha256"].update({"model.safetensors": "abc"}),
            r"models.all-MiniLM-L6-v2.pretrained",
        ),
        (lambda c: c["paths"].update(tasks=["sorting", "sortin"]), r"'paths.tasks.1': unknown task 'sortin'"),
        (
            lambda c: c["paths"]["derived_tasks"]["sorting_10k"]["data"].update(n_trian=5),
            r"unknown config key\(s\) \['n_trian'\] under 'paths.derived_tasks.sorting_10k.data'",
        ),
        (
            lambda c: c["paths"]["derived_tasks"]["sorting_10k"]["train"].update(epochs="many"),
            r"'paths.derived_tasks.sorting_10k.train.epochs': 'many' is not of type 'integer'",
        ),
        (
            lambda c: c["paths"]["derived_tasks"]["sorting_10k"].pop("task"),
            r"'paths.derived_tasks.sorting_10k'.*'task'",
        ),
        (lambda c: c["paths"]["derived_tasks"].update(sorting={"task": "sorting"}), r"'paths.derived_tasks'"),
        (lambda c: c["paths"]["derived_tasks"].update({"bad-name": {"task": "sorting"}}), r"'paths.derived_tasks'"),
        (  # a derived task is checked even when paths.tasks does not list it
            lambda c: c["paths"]["derived_tasks"].update(spare={"task": "convex_hull", "model": {"dim": "wide"}}),
            r"'paths.derived_tasks.spare.model.dim': 'wide' is not of type 'integer'",
        ),
    ],
)
def test_bad_config_names_the_key(default_config, edit, message):
    cfg = copy.deepcopy(default_config)
    edit(cfg)
    with pytest.raises(ConfigError, match=message):
        check_config(cfg, SCHEMA.parent)


def test_every_schema_property_has_description_and_default():
    """Each key documents itself (description) and has a default, except required model definitions."""

    def walk(node, path):
        if not isinstance(node, dict):
            return
        for key, sub in node.get("properties", {}).items():
            # a $ref'd schema documents the keys; properties beside the $ref only set their defaults
            if isinstance(sub, dict) and "$ref" not in sub and "$ref" not in node:
                assert "description" in sub, f"{path}.{key} has no description"
            walk(sub, f"{path}.{key}")
        for key in ("$defs", "items", "additionalProperties"):
            child = node.get(key)
            if isinstance(child, dict):
                for name, sub in child.items() if key == "$defs" else [(key, child)]:
                    walk(sub, f"{path}.{name}")

    for path in SCHEMA.parent.glob("*.schema.yaml"):
        walk(yaml.safe_load(path.read_text()), path.name)
    top = yaml.safe_load(SCHEMA.read_text())
    for key, sub in top["properties"].items():
        assert key == "models" or "default" in sub, f"top-level key {key} has no default"


def test_derived_task_is_its_task_with_the_changed_keys(default_config):
    cfg = copy.deepcopy(default_config)
    validate_config(cfg, SCHEMA)
    p = cfg["paths"]
    p["derived_tasks"]["wide_hull"] = {
        "task": "convex_hull",
        "seeds": [7],
        "model": {"dim": 96},
        "title": "Hull, wider",
    }
    p["tasks"] = ["sorting", "wide_hull", "sorting_10k"]
    slices = task_slices(p, SCHEMA.parent / "paths.schema.yaml")
    assert list(slices) == ["sorting", "wide_hull", "sorting_10k"]
    assert slices["sorting"] == {"task": "sorting", **p["sorting"]}  # a task's slice: exactly its section
    hull = slices["wide_hull"]
    assert hull["task"] == "convex_hull" and hull["name"] == "wide_hull" and "title" not in hull
    assert hull["seeds"] == [7] and hull["model"] == {**p["convex_hull"]["model"], "dim": 96}
    assert hull["data"] == p["convex_hull"]["data"] and hull["train"] == p["convex_hull"]["train"]
    long = slices["sorting_10k"]
    assert long["data"] == {**p["sorting"]["data"], "n_train": 10000}
    assert long["train"] == {**p["sorting"]["train"], "epochs": 105}
    assert p["sorting"]["data"]["n_train"] == 1000  # the task's own section is unchanged
    archs = task_architectures(slices)
    assert archs == [
        {"name": "SAN (sorting, sorting_10k)", "layers": 6, "heads": 2},
        {"name": "SAN (wide_hull)", "layers": 6, "heads": 3},
    ]


def test_spec_names_are_the_schema_enums():
    """Each experiment's spec module is the one source of its names: the schema's enums and the code agree."""
    from san.models.spec import VARIANTS
    from san.paths.spec import TASK_KINDS
    from san.paths.tasks import TASK_KINDS as TASKS

    paths = yaml.safe_load((SCHEMA.parent / "paths.schema.yaml").read_text())
    top = yaml.safe_load(SCHEMA.read_text())
    assert TASK_KINDS == TASKS
    assert tuple(paths["properties"]["derived_tasks"]["additionalProperties"]["properties"]["task"]["enum"]) == TASKS
    assert all(kind in paths["properties"] for kind in TASKS)
    assert tuple(top["properties"]["rank_collapse"]["properties"]["variants"]["items"]["enum"]) == VARIANTS
    assert "enum" not in top["$defs"]["model"]["properties"]["family"]  # the family table checks the name


def test_rank_collapse_dtype_is_one_for_all_variants_or_one_per_variant(default_config):
    """``rank_collapse.dtype``: a name applies to every variant; a mapping names each variant's (float64 for one
    it leaves out); an unknown variant or dtype is refused naming the key."""
    variants = ["SAN", "SAN+MLP", "SAN+skip", "transformer"]
    assert variant_dtypes("float32", variants) == dict.fromkeys(variants, "float32")
    assert variant_dtypes({"SAN+skip": "float32"}, variants) == {
        "SAN": "float64", "SAN+MLP": "float64", "SAN+skip": "float32", "transformer": "float64"
    }  # fmt: skip
    for bad, key in (({"SANN": "float32"}, "SANN"), ({"SAN": "float16"}, "rank_collapse.dtype.SAN")):
        cfg = copy.deepcopy(default_config)
        cfg["rank_collapse"]["dtype"] = bad
        with pytest.raises(ConfigError, match=key):
            check_config(cfg, SCHEMA.parent)
