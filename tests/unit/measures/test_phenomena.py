"""The per-layer measures of massive activations, high-norm tokens and spectral compression against plain numpy on
a tiny model's ``output_hidden_states`` (a post-norm BERT, whose hidden states are the residual stream): the
functions of :mod:`san.measures.phenomena` and the rank-collapse job's variables, each written out here once more
(the spectrum from the singular values, not the Gram matrix's eigenvalues; the residual's norms as sums)."""

import numpy as np
import pytest
import torch
import xarray as xr

from san.measures.phenomena import PHENOMENA, layer_phenomena, patch_neighbour_similarity
from san.models.load import load_model
from san.models.store import materialise_init

from reference import assert_phenomena

FACTOR = 3.0
ARCH = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32}


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    folder = tmp_path_factory.mktemp("phenomena") / "bert"
    materialise_init("bert", ARCH, 0, folder)
    return folder


@pytest.fixture(scope="module")
def hidden(bert):
    """The tiny BERT's hidden states (layers + 1 tensors of 3 sequences x 12 tokens x 16), the first token of the
    last layer made massive so that the residual without massive tokens leaves it out."""
    model = load_model(bert, "bert", torch.float64)
    ids = torch.randint(5, 1000, (3, 12), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        states = list(model(input_ids=ids, output_hidden_states=True).hidden_states)
    states[-1] = states[-1].clone()
    states[-1][1, 0] *= 40.0
    return ids, states


def test_layer_measures_equal_numpy_on_hidden_states(hidden):
    _, states = hidden
    arr = layer_phenomena(states, FACTOR)
    assert arr.shape == (len(PHENOMENA), len(states), 3) and arr.dtype == np.float64
    assert_phenomena(dict(zip(PHENOMENA, arr, strict=True)), [s.numpy() for s in states], FACTOR)
    got = dict(zip(PHENOMENA, arr, strict=True))
    assert got["massive_token"][-1, 1] == 0, "the planted massive token carries the largest activation"
    assert got["first_token_norm_ratio"][-1, 1] > 10 and got["sigma1_share"][-1, 1] > 0.9


def test_residual_without_massive_tokens_is_the_whole_where_none_exceeds(hidden):
    from san.measures.residual import relative_residual

    _, states = hidden
    whole = torch.stack([relative_residual(s) for s in states])
    got = layer_phenomena(states, FACTOR, whole)[list(PHENOMENA).index("residual_ratio_no_massive")]
    norms = [torch.linalg.vector_norm(s, dim=-1) for s in states]
    exceeds = np.array([[(n[i] > FACTOR * n[i].median()).any().item() for i in range(3)] for n in norms])
    assert exceeds[-1, 1] and not exceeds[0].any()
    np.testing.assert_array_equal(got[~exceeds], whole.numpy()[~exceeds])  # to the bit
    assert got[-1, 1] != whole[-1, 1]


def test_spectral_measures_of_a_tall_matrix_count_min_t_d_values():
    """More tokens than dimensions: the ``d`` eigenvalues of ``X^T X``, the entropy normalised by ``log d``."""
    x = torch.randn(1, 40, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    got = dict(zip(PHENOMENA, layer_phenomena([x], FACTOR)[:, 0, 0], strict=True))
    s2 = np.linalg.svd(x[0].numpy(), compute_uv=False) ** 2
    p = s2 / s2.sum()
    assert got["sigma1_share"] == pytest.approx(p[0], rel=1e-12)
    assert got["matrix_entropy"] == pytest.approx(-(p * np.log(p)).sum() / np.log(6), rel=1e-12)


def test_spectral_measures_of_rank_one_and_flat_matrices():
    rank_one = torch.outer(torch.arange(1.0, 6.0, dtype=torch.float64), torch.ones(4, dtype=torch.float64))
    flat = torch.eye(4, dtype=torch.float64)
    arr = layer_phenomena([rank_one[None], flat[None]], FACTOR)
    got = dict(zip(PHENOMENA, arr[:, :, 0], strict=True))
    assert got["sigma1_share"][0] == pytest.approx(1.0) and got["matrix_entropy"][0] == pytest.approx(0.0, abs=1e-12)
    assert got["sigma1_share"][1] == pytest.approx(0.25) and got["matrix_entropy"][1] == pytest.approx(1.0)


def test_patch_neighbour_similarity_equals_a_loop_over_the_grid():
    rng = np.random.default_rng(2)
    rows, cols = 3, 4
    x = rng.normal(size=(2, rows * cols, 5))
    got = patch_neighbour_similarity(torch.as_tensor(x), (rows, cols)).numpy()
    for image in range(2):
        for r in range(rows):
            for c in range(cols):
                p = x[image, r * cols + c]
                sims = [
                    p @ x[image, rr * cols + cc] / np.linalg.norm(p) / np.linalg.norm(x[image, rr * cols + cc])
                    for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1))
                    if 0 <= rr < rows and 0 <= cc < cols
                ]
                assert got[image, r * cols + c] == pytest.approx(np.mean(sims), rel=1e-12)
    with pytest.raises(ValueError, match="do not fill a 3 x 3 grid"):
        patch_neighbour_similarity(torch.as_tensor(x), (3, 3))


@pytest.mark.slow
def test_the_rank_collapse_job_records_the_measures_of_the_hidden_states(bert, hidden):
    """The job's unmodified model (transformer variant, float64) against numpy on the same model's hidden states."""
    from san.rank_collapse.experiment import run

    ids, _ = hidden
    model = load_model(bert, "bert", torch.float64)
    with torch.inference_mode():
        states = [s.numpy() for s in model(input_ids=ids, output_hidden_states=True).hidden_states]
    inputs = {"init": xr.Dataset({"input_ids": (("sample", "token"), ids.numpy())}, attrs={"input_sha256": "x"})}
    settings = {"variants": ["SAN", "transformer"], "dtype": "float64", "batch_size": 2, "albert_no_mlp": "remove",
                "control_token_seed": 0, "massive_token_factor": FACTOR}  # fmt: skip
    ds = run("bert", {"init": bert}, inputs, settings)
    got = {name: ds[name].sel(weights="init", variant="transformer").values for name in PHENOMENA}
    assert_phenomena(got, states, FACTOR)
    for name, var in PHENOMENA.items():
        assert ds[name].dims == ("weights", "variant", "layer", "sample")
        assert ds[name].attrs["formula"] == var.formula and ds[name].attrs["references"] == var.references
        assert ds[name].dtype == (np.int64 if name in ("massive_token", "massive_dim") else np.float64)
