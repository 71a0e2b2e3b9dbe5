"""Every family of the table, each on a tiny random float64 model built from its transformers config class whose
every parameter is perturbed (the cases and reference forwards of tests/family_blocks.py):

- every variant equals the residual stream recomputed from the weights in plain torch (no transformers submodule's
  forward is called by a reference), with the variants written out there (``VARIANT_SWITCHES``: SAN is the attention
  branch only; SAN+MLP attention then the MLP, no skips; SAN+skip attention with its residual; transformer the
  unmodified model) and each family's masks (sliding windows, local layers), rotary positions (NoPE layers),
  multipliers, routing and dense layers built from its config; a mixture-of-experts family's MLP is its whole expert
  layer (router, the chosen experts, shared experts and their gates), recomputed from the expert weights with every
  expert on every token;
- the residual identity holds in every block of the unmodified model whose norms sit inside its branches: block
  input + attention branch + MLP branch (each times the family's branch multiplier) is the block output, and the MLP
  reads the block input (parallel blocks) or the input plus the attention branch (sequential blocks);
- the ``transformer`` variant is the unmodified model's residual stream; leaving a variant restores the model; a
  decoder's variants stay causal.

Adding a family of a known block is one row of the table plus one case in tests/family_blocks.py (``CASES``; its
reference in ``REFERENCES``). The paper's BERT, ALBERT and XLNet have their references in
tests/unit/models/test_ablations.py.
"""

import pytest
import torch
from family_blocks import (
    BATCH,
    CASES,
    N_TOKENS,
    REFERENCED,
    REFERENCES,
    TOL,
    VARIANT_NAMES,
    VARIANT_SWITCHES,
    assert_variants_restore,
    branch_states,
    family_of,
    identity,
    perturbed_model,
)

from san.models.ablations import variant
from san.models.families import FAMILIES
from san.models.spec import FAMILY_TABLE, IMAGE_FAMILIES
from san.rank_collapse.experiment import residual_stream

torch.set_num_threads(1)

#: families whose variants tests/unit/models/test_ablations.py recomputes (the paper's encoders), the image
#: encoders (tests/unit/models/test_vision_families.py), the encoder stacks of encoder-decoder models
#: (tests/unit/models/test_encoder_stacks.py) and the text towers of dual text-image checkpoints
#: (tests/unit/models/test_text_towers.py)
ELSEWHERE = {
    "bert", "albert", "xlnet", *IMAGE_FAMILIES, "clip_text", "siglip_text",
    *(n for n, row in FAMILY_TABLE.items() if row.stack_of),
}  # fmt: skip


@pytest.fixture(scope="module")
def ids():
    return torch.randint(5, 90, (BATCH, N_TOKENS), generator=torch.Generator().manual_seed(1))  # no special tokens


@pytest.fixture(scope="module")
def models():
    built = {case: perturbed_model(family, config) for case, (family, config) in CASES.items()}
    g = torch.Generator().manual_seed(3)
    for layer in built["deepseek_v3"].layers:  # the router's correction bias is a buffer: perturbed here
        bias = getattr(getattr(layer.mlp, "gate", None), "e_score_correction_bias", None)
        if bias is not None:
            bias.copy_(0.5 * torch.randn(bias.shape, generator=g, dtype=bias.dtype))
    return built


def run(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)


# ------------------------------------------------------------------------------------------------ tests
#: the scalar each family multiplies its branches by, as the config key that holds it
MULTIPLIER = {"granite": "residual_multiplier", "granitemoe": "residual_multiplier"}
#: the families whose blocks add attention and MLP in parallel (GPT-NeoX: as its config says)
PARALLEL = {"phi": True, "gpt_neox": "use_parallel_residual"}


def test_every_family_of_the_table_has_a_case():
    """One case per family (the paper's encoders in tests/unit/models/test_ablations.py), each with its reference."""
    assert {family_of(case) for case in CASES} | ELSEWHERE == set(FAMILY_TABLE) and len(FAMILY_TABLE) >= 24
    assert set(REFERENCES) | ELSEWHERE == set(FAMILY_TABLE)
    assert len({f for f in REFERENCES if FAMILY_TABLE[f].experts_key}) >= 6


@pytest.mark.parametrize("case", [c for c in CASES if FAMILY_TABLE[family_of(c)].pre_norm_parts])
def test_residual_identity_in_every_block(models, ids, case):
    """Unmodified model, every block: output = input + s attention branch + s MLP branch (``s``: the config's branch
    multiplier, 1 without one), each branch taken at the module that ends it (the norm after the sub-block where
    there is one); the MLP's input is the norm of the block input (parallel blocks) or of the input plus the
    attention branch (sequential blocks), as the config says."""
    model, family = models[case], family_of(case)
    entry = FAMILIES[family]
    norm_a, attn, post_a, norm_m, mlp, post_m = entry.row.pre_norm_parts
    scale = float(getattr(model.config, MULTIPLIER[family])) if family in MULTIPLIER else 1.0
    flag = PARALLEL.get(family, False)
    parallel = bool(getattr(model.config, flag)) if isinstance(flag, str) else flag
    assert entry.parallel_residual(model.config) == parallel
    for i, layer in enumerate(entry.layers(model)):
        seen = branch_states(lambda: run(model, ids), layer, getattr(layer, post_a or attn), getattr(layer, mlp),
                             getattr(layer, post_m or mlp))  # fmt: skip
        x, a, m, y = seen["x"], seen["a"], seen["m"], seen["y"]
        torch.testing.assert_close(y, x + scale * a + scale * m, **TOL, msg=lambda s, i=i: f"{case} block {i}: {s}")
        norm = getattr(layer, norm_m) if norm_m else identity
        with torch.no_grad():
            want = norm(x) if parallel else norm(x + scale * a)
        torch.testing.assert_close(seen["mlp_in"], want, **TOL, msg=lambda s, i=i: f"{case} block {i} MLP input: {s}")
        if scale != 1.0:  # the multiplier matters: without it the identity fails
            assert (y - (x + a + m)).abs().max() > 1e-3


@pytest.mark.parametrize("name", VARIANT_NAMES)
@pytest.mark.parametrize("case", REFERENCED)
def test_variant_matches_reference(models, ids, case, name):
    model, family = models[case], family_of(case)
    with variant(model, family, name):
        stream = residual_stream(model, family, ids)
    with torch.no_grad():
        expected = REFERENCES[family](model, ids, name)
    assert len(stream) == len(expected) == model.config.num_hidden_layers + 1
    for layer, (got, want) in enumerate(zip(stream, expected, strict=True)):
        torch.testing.assert_close(got, want, **TOL, msg=lambda m, layer=layer: f"{case} {name} layer {layer}: {m}")


@pytest.mark.parametrize("case", REFERENCED)
def test_references_distinguish_the_variants(models, ids, case):
    """The comparison above can tell the variants apart (their last layers all differ), and the references depend
    on the structure the config gives: windows, parallel blocks and multipliers change the unmodified stream."""
    model, family = models[case], family_of(case)
    with torch.no_grad():
        last = {name: REFERENCES[family](model, ids, name)[-1] for name in VARIANT_NAMES}
    for i, a in enumerate(VARIANT_NAMES):
        for b in VARIANT_NAMES[i + 1 :]:
            assert (last[a] - last[b]).abs().max() > 1e-3, (a, b)


def test_structure_read_from_the_config_changes_the_stream(models, ids):
    """A parallel and a sequential GPT-NeoX with the same weights differ only in the unmodified transformer; the
    windows of the sliding and local layers change what they attend to."""
    parallel, sequential = models["gpt_neox"], models["gpt_neox_sequential"]
    for name in VARIANT_NAMES:
        with variant(parallel, "gpt_neox", name), variant(sequential, "gpt_neox", name):
            a, b = residual_stream(parallel, "gpt_neox", ids)[-1], residual_stream(sequential, "gpt_neox", ids)[-1]
        if name == "transformer":
            assert (a - b).abs().max() > 1e-3
        else:
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    for case in ("qwen2", "mistral", "phi3", "gemma2", "modernbert"):
        model, family = models[case], family_of(case)
        stream = residual_stream(model, family, ids)
        cfg = model.config
        saved = (cfg.sliding_window, getattr(cfg, "local_attention", None))
        try:
            if case == "modernbert":
                cfg.local_attention = 64
            else:
                cfg.sliding_window = 64
            wide = residual_stream(model, family, ids)
        finally:
            cfg.sliding_window = saved[0]
            if case == "modernbert":
                cfg.local_attention = saved[1]
        assert (stream[-1] - wide[-1]).abs().max() > 1e-6, case


@pytest.mark.parametrize("case", list(CASES))
def test_transformer_variant_is_the_unmodified_model(models, ids, case):
    """Post-norm encoders: every hidden state of transformers is the recorded stream. Pre-norm models: all but the
    last, which transformers replaces by the output of the final norm; the stream is never normalised."""
    model, family = models[case], family_of(case)
    with variant(model, family, "transformer"):
        stream = residual_stream(model, family, ids)
    hidden = run(model, ids).hidden_states
    assert len(hidden) == len(stream) == model.config.num_hidden_layers + 1
    exact = {"rtol": 0, "atol": 0}
    final_norm = FAMILIES[family].final_norm
    if final_norm is None:
        for got, want in zip(stream, hidden, strict=True):
            torch.testing.assert_close(got, want, **exact)
        return
    for got, want in zip(stream[:-1], hidden[:-1], strict=True):
        torch.testing.assert_close(got, want, **exact)
    with torch.no_grad():
        torch.testing.assert_close(getattr(model, final_norm)(stream[-1]), hidden[-1], **exact)
    assert (stream[-1] - hidden[-1]).abs().max() > 1e-3


@pytest.mark.parametrize("case", list(CASES))
def test_leaving_a_variant_restores_the_model(models, ids, case):
    model, family = models[case], family_of(case)
    assert_variants_restore(model, family, ids, run)


@pytest.mark.parametrize("name", ("SAN", "SAN+MLP"))
@pytest.mark.parametrize("case", [c for c in CASES if FAMILIES[family_of(c)].row.causal])
def test_decoder_variants_stay_causal(models, ids, case, name):
    """Changing the last token leaves every earlier position of every layer unchanged."""
    model, family = models[case], family_of(case)
    changed = ids.clone()
    changed[:, -1] = 95 - ids[:, -1]
    with variant(model, family, name):
        a, b = residual_stream(model, family, ids), residual_stream(model, family, changed)
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x[:, :-1], y[:, :-1], **TOL)
        assert (x[:, -1] - y[:, -1]).abs().max() > 0


def test_mixture_of_experts_structure_from_the_config(models, ids):
    """The dense layers of a mixed model are dense modules (Qwen-MoE's ``mlp_only_layers`` and
    ``decoder_sparse_step``, DeepSeek-V3's ``first_k_dense_replace``); renormalising the routing changes the
    stream; gpt-oss's rows over real tokens sum to less than one (its sinks), Mixtral's to one."""
    sparse = {case: [hasattr(layer.mlp, "experts") for layer in models[case].layers]
              for case in ("qwen2_moe", "qwen3_moe", "deepseek_v3")}  # fmt: skip
    assert sparse == {"qwen2_moe": [False, True, True], "qwen3_moe": [False, True, False],
                      "deepseek_v3": [False, True, True]}  # fmt: skip
    plain, renormalised = models["olmoe"], models["olmoe_renormalised"]
    assert (
        residual_stream(plain, "olmoe", ids)[-1] - residual_stream(renormalised, "olmoe", ids)[-1]
    ).abs().max() > 1e-3
    for case, below_one in (("gpt_oss", True), ("mixtral", False)):
        with torch.no_grad():
            attentions = models[case](input_ids=ids, output_attentions=True).attentions
        sums = torch.stack([a.sum(-1) for a in attentions])
        if below_one:
            assert sums.max() < 1 - 1e-3
        else:
            torch.testing.assert_close(sums, torch.ones_like(sums), rtol=0, atol=1e-6)  # a float32 softmax


def test_the_test_variants_are_the_papers():
    """The variants the references use, as the paper defines them (Fig. 2), and the names the code runs."""
    from san.models.spec import VARIANTS

    assert VARIANT_SWITCHES == {
        "SAN": (False, False), "SAN+MLP": (False, True), "SAN+skip": (True, False), "transformer": (True, True)
    }  # fmt: skip
    assert set(VARIANTS) == set(VARIANT_NAMES)


def test_init_clears_only_token_ids_outside_the_bundled_vocabulary(tmp_path, caplog):
    """An init model gets the bundled 30,522-id tokenizer: GPT-2's end-of-text id 50,256 is cleared (recorded in
    the manifest), ids inside the vocabulary stay, and the weights are those the default config draws."""
    import json

    from safetensors.torch import load_file

    from san.models.store import materialise_init

    arch = {"n_embd": 16, "n_layer": 2, "n_head": 2, "n_positions": 64}
    manifest = materialise_init("gpt2", arch, 0, tmp_path / "gpt2")
    config = json.loads((tmp_path / "gpt2" / "config.json").read_text())
    assert manifest["cleared_token_ids"] == {"bos_token_id": 50256, "eos_token_id": 50256}
    assert config["bos_token_id"] is None and config["eos_token_id"] is None
    entry = FAMILIES["gpt2"]
    torch.manual_seed(0)
    reference = entry.model_cls(entry.config_cls(**arch, vocab_size=config["vocab_size"]))
    saved = load_file(tmp_path / "gpt2" / "model.safetensors")
    for name, tensor in reference.state_dict().items():
        if name in saved:
            assert torch.equal(saved[name], tensor), name
    assert set(saved) <= set(reference.state_dict())

    kept = materialise_init(
        "roberta",
        {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32},
        0,
        tmp_path / "roberta",
    )
    assert "cleared_token_ids" not in kept
    assert json.loads((tmp_path / "roberta" / "config.json").read_text())["pad_token_id"] == 1


def test_every_family_row_names_a_known_ablation_and_its_blocks():
    """The table names each family's ablation (looked up in san.models.ablations) and, for a pre-norm ablation, the
    block's parts."""
    from san.models.ablations import ABLATIONS
    from san.models.spec import FAMILY_TABLE

    for name, row in FAMILY_TABLE.items():
        assert row.ablation in ABLATIONS, name
        assert (row.pre_norm_parts is not None) == (row.ablation in ("gpt2", "pre_norm", "vision", "t5")), name
    assert not set(ABLATIONS) - {row.ablation for row in FAMILY_TABLE.values()}, "an ablation no family uses"


@pytest.mark.slow
def test_a_rank_collapse_job_holds_one_copy_of_the_weights(tmp_path, monkeypatch):
    """``run`` loads each weight set once per dtype, in the dtype asked, and only after the previous copy is gone:
    the four variants are overrides on one model, never four models (the memory a job needs is one copy of the
    weights; benchmarks/bench_rank_collapse.py --memory measures it on a 1B model)."""
    import gc
    import weakref

    import xarray as xr

    import san.rank_collapse.experiment as experiment
    from san.models.store import materialise_init

    arch = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 32}
    folders = {w: tmp_path / w for w in ("init", "pretrained")}
    for seed, folder in enumerate(folders.values()):
        materialise_init("llama", arch, seed, folder)
    inputs = {
        w: xr.Dataset(
            {"input_ids": (("sample", "token"), torch.randint(5, 90, (2, 6)).numpy())}, attrs={"input_sha256": w}
        )
        for w in folders
    }
    loaded, load = [], experiment.load_model

    def counting_load(folder, family, dtype):
        gc.collect()
        assert not [m for m in loaded if m() is not None], "a second copy of the weights while one is alive"
        model = load(folder, family, dtype)
        assert {p.dtype for p in model.parameters()} == {dtype}
        loaded.append(weakref.ref(model))
        return model

    monkeypatch.setattr(experiment, "load_model", counting_load)
    settings = {
        "variants": list(VARIANT_NAMES), "dtype": {"SAN": "float32", "SAN+MLP": "float32"}, "batch_size": 1,
        "albert_no_mlp": "identity_linears", "control_token_seed": 0, "massive_token_factor": 10.0,
    }  # fmt: skip
    ds = experiment.run("llama", folders, inputs, settings)
    assert len(loaded) == 4  # two weight sets x two dtypes
    assert list(ds["dtype"].values) == ["float32", "float32", "float64", "float64"]


# ------------------------------------------------------------------------------------------------ generated tables
def test_the_documents_family_tables_are_the_table():
    """README.md's list and docs/models.md's tables are generated from the family table: every family appears, and
    the committed documents' blocks are the table (``python -m san.report.readme sync``; tests/unit/report/)."""
    from helpers import ROOT

    readme, models = ((ROOT / p).read_text(encoding="utf-8") for p in ("README.md", "docs/models.md"))
    assert f"Families ({len(FAMILY_TABLE)}):" in readme
    for family in FAMILY_TABLE:
        assert f"`{family}`" in readme and f"| `{family}` |" in models, family


def test_a_new_row_is_in_every_generated_table(tmp_path):
    """A row added to the table reaches the list and both tables with its kind and block."""
    import dataclasses

    from san.models import tables

    new = dataclasses.replace(FAMILY_TABLE["mixtral"], notes="a new family", branch_multiplier="m")
    table = {**FAMILY_TABLE, "newmoe": new}
    assert f"Families ({len(FAMILY_TABLE) + 1}):" in tables.family_list(table)
    assert "`newmoe`" in tables.family_list(table)
    row_line = next(line for line in tables.family_table(table).splitlines() if line.startswith("| `newmoe`"))
    assert "mixture-of-experts decoder" in row_line and "`h = x + s Attn(N1(x))`, `y = h + s MoE(N2(h))`" in row_line


def test_the_generated_formulas_are_the_papers_variants():
    """The formulas of the generated tables, written out for one family of each kind of block."""
    from san.models.tables import block, variants

    expected = {
        "bert": ("`N1(Attn(x))`", "`N2(MLP(N1(Attn(x))))`", "`N1(x + Attn(x))`"),
        "llama": ("`Attn(N1(x))`", "`MLP(N2(Attn(N1(x))))`", "`x + Attn(N1(x))`"),
        "gemma2": ("`Na(Attn(N1(x)))`", "`Nm(MLP(N2(Na(Attn(N1(x))))))`", "`x + Na(Attn(N1(x)))`"),
        "olmo2": ("`Na(Attn(x))`", "`Nm(MLP(Na(Attn(x))))`", "`x + Na(Attn(x))`"),
        "phi": ("`Attn(N(x))`", "`MLP(N(Attn(N(x))))`", "`x + Attn(N(x))`"),
        "granitemoe": ("`s Attn(N1(x))`", "`s MoE(N2(s Attn(N1(x))))`", "`x + s Attn(N1(x))`"),
    }
    for family, (san, san_mlp, san_skip) in expected.items():
        got = variants(FAMILY_TABLE[family])
        assert (got["SAN"], got["SAN+MLP"], got["SAN+skip"]) == (san, san_mlp, san_skip), family
        assert got["transformer"] == block(FAMILY_TABLE[family])
    assert block(FAMILY_TABLE["phi"]) == "`y = x + Attn(N(x)) + MLP(N(x))`"
