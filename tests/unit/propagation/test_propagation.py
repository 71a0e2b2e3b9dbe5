"""Propagation study: block variants against a hand-written recomputation, centred attention, stable rank, and the
Giorlandino & Goldt recursion against values computed by hand from the paper's equations."""

import math

import numpy as np
import pytest
import torch
import yaml

from san.propagation import simulator as sim
from san.propagation import spec, theory

from helpers import ROOT


def _softmax(z):
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


def _ln(v):
    return (v - v.mean()) / math.sqrt(v.var() + spec.NORM_EPS)


def _rms(v):
    return v / math.sqrt((v**2).mean() + spec.NORM_EPS)


def _reference_layer(x, w, a, b, norm, mlp, heads, allowed, centred):
    """One layer token by token with numpy loops (independent of the simulator's batched code)."""
    t, d = x.shape
    dh = d // heads
    nrm = {"none": lambda v: v, "pre_ln": _ln, "post_ln": lambda v: v, "rmsnorm": _rms}[norm]

    def attn(y):
        out = np.zeros_like(y)
        q, k, v = y @ w["wq"], y @ w["wk"], y @ w["wv"] + w["bv"][0]
        for h in range(heads):
            s = slice(h * dh, (h + 1) * dh)
            for i in range(t):
                keys = [j for j in range(t) if allowed[i, j]]
                p = _softmax(np.array([q[i, s] @ k[j, s] / math.sqrt(dh) for j in keys]))
                if centred:
                    p = p - 1.0 / len(keys)
                out[i, s] = sum(pj * v[j, s] for pj, j in zip(p, keys, strict=True))
        return out

    def mlp_f(y):
        return np.maximum(y @ w["w1"] + w["b1"][0], 0) @ w["w2"] + w["b2"][0]

    def sub(y, f):
        if norm == "post_ln":
            return np.stack([_ln(r) for r in a * y + b * f(y)])
        return a * y + b * f(np.stack([nrm(r) for r in y]))

    x = sub(x, attn)
    return sub(x, mlp_f) if mlp else x


@pytest.mark.parametrize(
    "norm,a,b,mlp,mask,centred,heads",
    [
        ("none", 0.0, 1.0, False, "full", False, 1),
        ("none", 1.0, 1.0, True, "causal", False, 2),
        ("post_ln", 1.0, 1.0, True, "full", False, 1),
        ("post_ln", 0.0, 1.0, False, "sliding", True, 2),
        ("pre_ln", 1.0, 0.25, True, "full", True, 1),
        ("rmsnorm", 0.5, 1.0, True, "sliding", False, 2),
    ],
)
def test_block_variants_match_hand_recomputation(norm, a, b, mlp, mask, centred, heads):
    t, d, depth = 6, 8, 3
    p = dict(spec.PARAMS, norm=norm, mlp=mlp, mask=mask, window=1, centred=centred, heads=heads, seq_len=t, width=d)
    p |= {"var_b": 0.01, "beta": 2.0, "var_v": 1.0, "var_w": 2.0, "input": "gaussian"}
    residual = {"skip": a, "branch": b}
    out = sim.simulate(p, residual, depth, [7])
    # replay the same draws: same generator order as simulate (input, then each layer's weights)
    g = [torch.Generator().manual_seed(7)]
    x = sim.make_input(g, "gaussian", t, d, p["input_correlation"], "cpu")[0].numpy()
    allowed = sim.allowed_keys(t, mask, 1).numpy()
    cos = [sim.mean_cosine(torch.as_tensor(x)).item()]
    for _ in range(depth):
        w = {k: v[0].numpy() for k, v in sim.draw_layer(g, p, d, t, "cpu").items()}
        x = _reference_layer(x, w, a, b, norm, mlp, heads, allowed, centred)
        u = x / np.linalg.norm(x, axis=1, keepdims=True)
        gm = u @ u.T
        cos.append((gm.sum() - np.trace(gm)) / (t * (t - 1)))
    np.testing.assert_allclose(out["cosine"][0], cos, rtol=1e-9, atol=1e-12)


def test_masks():
    np.testing.assert_array_equal(sim.allowed_keys(4, "causal", 0).numpy(), np.tril(np.ones((4, 4), bool)))
    band = sim.allowed_keys(5, "sliding", 1).numpy()
    assert band[2].tolist() == [False, True, True, True, False]
    one_way = sim.allowed_keys(5, "sliding_causal", 1).numpy()
    assert one_way[2].tolist() == [False, True, True, False, False]
    assert sim.allowed_keys(3, "full", 0).all()


def test_mu_is_the_frobenius_norm_of_the_centred_tokens():
    x = torch.tensor([[[1.0, 0.0], [3.0, 0.0]]], dtype=torch.float64)
    assert float(sim.mu(x)[0]) == pytest.approx(math.sqrt(2.0))
    assert float(sim.mu(2 * x)[0]) == pytest.approx(2 * math.sqrt(2.0))  # absolute, unlike the relative residual


def _overlaps(seq_len: int, draws: int = 4000):
    from san.core.rng import cpu_generator, randn

    return theory.FiniteOverlaps(randn((draws, 2, seq_len), cpu_generator(0), torch.float64).numpy())


def test_finite_t_overlaps_tend_to_the_rem_limit():
    # below critical the T-key softmax spreads: about 1/T at beta -> 0; never below 1/T
    y, y_cross = _overlaps(64)(1e-6, 0.2)
    assert y == pytest.approx(1 / 64, rel=1e-4) and y_cross == pytest.approx(1 / 64, rel=1e-4)
    # above critical the participation approaches 1 - beta_c / beta as T grows (from above: a finite softmax is
    # more condensed than its REM limit)
    beta, p = 4.0, 0.2
    rem = theory.attention_overlap(beta, p)
    gaps = [_overlaps(t, 1000)(beta, p)[0] - rem for t in (16, 256, 2048)]
    assert gaps[0] > gaps[1] > gaps[2] > 0
    # the finite-T recursion differs from the infinite-T one, with no fitted parameter
    block = {"var_v": 0.2, "var_b": 4e-4, "var_w": 0.2, "skip": 1.0, "branch": 1.0, "mlp": True}
    finite = theory.recursion(0.2, beta, 6, overlaps=_overlaps(128), **block)
    limit = theory.recursion(0.2, beta, 6, **block)
    assert abs(finite[-1] - limit[-1]) > 1e-3


def test_critical_statistic_reads_the_rem_law():
    betas = np.array([1.0, 2.0, 4.0, 8.0])
    y = np.clip(1 - 1.5 / betas, 0, None)
    assert theory.critical_statistic(betas, y, 0.2) == pytest.approx(1.5)
    assert np.isnan(theory.critical_statistic(betas, np.zeros(4), 0.2))


def test_construction_is_an_attracting_rank2_equilibrium_with_layernorm_only():
    from san.propagation import construction
    from san.propagation.masks_claims import staying_fraction

    star = construction.fixed_point(6, 5, 0.1)
    a, v = construction.causal_uniform(6), construction.value_matrix(5, 0.1)
    assert float((construction.layer(star, a, v, "sphere") - star).abs().max()) < 1e-10
    assert float(construction.rank2_ratio(star)) > 0.1
    cfg = {"tokens": 6, "width": 5, "rest": 0.1, "perturbation": 0.1, "draws": 16, "seed": 0}
    out = construction.run(cfg, 40)["ratio"][:, :, -1]
    fractions = dict(zip(construction.NORMS, (staying_fraction(r, 0.1) for r in out), strict=True))
    assert fractions["sphere"] >= 0.9 and fractions["layer_norm"] >= 0.9
    assert fractions["none"] == 0.0


@pytest.mark.parametrize("mask", spec.MASKS)
def test_centred_attention_has_zero_row_sums(mask):
    torch.manual_seed(0)
    q, k = torch.randn(2, 9, 4, dtype=torch.float64), torch.randn(2, 9, 4, dtype=torch.float64)
    allowed = sim.allowed_keys(9, mask, 2)
    a = sim.softmax_attention(q, k, allowed)
    np.testing.assert_allclose(a.sum(-1).numpy(), 1.0, atol=1e-14)
    c = sim.centre_attention(a, allowed)
    np.testing.assert_allclose(c.sum(-1).numpy(), 0.0, atol=1e-14)
    if mask == "full":  # exactly A - 1 1^T / T
        np.testing.assert_allclose(c.numpy(), (a - 1.0 / 9).numpy(), atol=1e-15)


def test_stable_rank_of_rank_one_is_one_and_of_identity_is_n():
    u, v = torch.randn(7, 1, dtype=torch.float64), torch.randn(1, 5, dtype=torch.float64)
    assert sim.stable_rank(u @ v).item() == pytest.approx(1.0, abs=1e-10)
    assert sim.stable_rank_gram(u @ v).item() == pytest.approx(1.0, abs=1e-10)
    assert sim.stable_rank(torch.eye(6, dtype=torch.float64)).item() == pytest.approx(6.0)
    # diag(2, 1): s^2 = 4, 1 -> 5/4; Gram: 16, 1 -> 17/16
    m = torch.diag(torch.tensor([2.0, 1.0], dtype=torch.float64))
    assert sim.stable_rank(m).item() == pytest.approx(1.25)
    assert sim.stable_rank_gram(m).item() == pytest.approx(17 / 16)


def test_cosine_and_isometric_input():
    g = [torch.Generator().manual_seed(1)]
    x = sim.make_input(g, "isometric", 5, 9, 0.0, "cpu")[0]
    np.testing.assert_allclose((x @ x.T).numpy(), 9 * np.eye(5), atol=1e-12)
    assert sim.mean_cosine(x).item() == pytest.approx(0.0, abs=1e-12)
    same = torch.ones(4, 3, dtype=torch.float64)
    assert sim.mean_cosine(same).item() == pytest.approx(1.0)


def test_qk_scaling_gives_logit_std_beta_sqrt_log_t():
    d, t, beta = 400, 64, 1.5
    g = torch.Generator().manual_seed(0)
    x = torch.randn(t, d, generator=g, dtype=torch.float64)
    s = sim.qk_std(beta, t, d)
    wq = torch.randn(d, d, generator=g, dtype=torch.float64) * s
    wk = torch.randn(d, d, generator=g, dtype=torch.float64) * s
    logits = (x @ wq) @ (x @ wk).T / math.sqrt(d)
    assert logits.std().item() == pytest.approx(beta * math.sqrt(math.log(t)), rel=0.1)


# --- theory: values computed by hand from the equations (G&G Sec. 3; REM beta_c = sqrt(2/(1-p))) ---------------


def test_critical_beta_and_overlap_by_hand():
    assert theory.critical_beta(0.5) == pytest.approx(2.0)  # sqrt(2 / 0.5)
    assert theory.critical_beta(0.0) == pytest.approx(math.sqrt(2))
    assert theory.attention_overlap(1.0, 0.5) == 0.0  # below beta_c: no condensation
    assert theory.attention_overlap(4.0, 0.5) == pytest.approx(0.5)  # 1 - 2/4


def test_attention_step_by_hand():
    # beta = 4 > beta_c(0.5) = 2: q_att = 0.5 + 0.5 * 0.5 = 0.75, p_att = 0.5
    # skip 1, var_v 1, var_b 0: (0.5 + 0.5) / (0.75 + 1) = 4/7
    assert theory.attention_step(0.5, 4.0, 1.0, 0.0, 1.0) == pytest.approx(4 / 7)
    # no skip: 0.5 / 0.75 = 2/3
    assert theory.attention_step(0.5, 4.0, 1.0, 0.0, 0.0) == pytest.approx(2 / 3)
    # below beta_c with no skip: every output equals the common value component -> 1 (rank collapse)
    assert theory.attention_step(0.5, 1.0, 1.0, 0.0, 0.0) == pytest.approx(1.0)


def test_block_step_by_hand():
    # p = 0.5, beta = 1 (< beta_c = 2), var_v = 1, var_b = 0, var_w = 2, skip 1:
    # attention: (0.5 + 0.5) / (0.5 + 1) = 2/3; MLP pre-activations q1 = 2, p1 = 4/3, c = 2/3,
    # rho(2/3) = (sqrt(5/9) + 2/3 (pi - arccos 2/3)) / pi = 0.725441; p_M = 2 * 2 * 0.725441 / 2 = 1.450882,
    # q_M = 2 * 2 / 2 = 2; block: (1.450882 + 2/3) / (2 + 1) = 0.705850
    p = theory.block_step(0.5, 1.0, var_v=1.0, var_b=0.0, var_w=2.0, skip=1.0)
    assert p == pytest.approx(0.705850, abs=2e-6)
    assert theory.relu_kernel(1.0) == pytest.approx(1.0)
    assert theory.relu_kernel(0.0) == pytest.approx(1 / math.pi)


def test_recursion_fixed_point_and_critical_depth():
    # without skip, below beta_c, one block makes tokens identical (G&G's rank-collapse side)
    r = theory.recursion(0.2, 0.5, 3, skip=0.0, mlp=False)
    np.testing.assert_allclose(r, [0.2, 1.0, 1.0, 1.0])
    # one layer from p0 = 0: condensation of the only attention layer iff beta > beta_c(0) = sqrt(2)
    assert theory.critical_beta_at_depth(0.0, 1) == pytest.approx(math.sqrt(2), rel=1e-6)


def test_branch_weight_and_spec_schema_in_sync():
    assert spec.branch_weight(spec.INV_SQRT_DEPTH, 16) == pytest.approx(0.25)
    schema = yaml.safe_load((ROOT / "workflow/schemas/propagation.schema.yaml").read_text())
    assert tuple(schema["$defs"]["norm"]["enum"]) == spec.NORMS
    assert tuple(schema["$defs"]["mask"]["enum"]) == spec.MASKS
    assert tuple(schema["$defs"]["input"]["enum"]) == spec.INPUTS
    assert tuple(schema["properties"]["sweeps"]["propertyNames"]["enum"]) == spec.SWEEPS
    assert set(schema["$defs"]["sweep"]["properties"]["fixed"]["properties"]) == set(spec.PARAMS)
    assert schema["properties"]["finite_size"]["default"] == spec.FINITE_SIZE
    assert set(schema["$defs"]["sweep"]["properties"]["construction"]["properties"]) == set(spec.CONSTRUCTION)
    assert schema["properties"]["residuals"]["default"] == spec.DEFAULT_RESIDUALS


def test_run_dataset_layout():
    from san.propagation.experiment import run

    sweep = {
        "depth": 2,
        "seeds": [0, 1],
        "grid": {"norm": ["post_ln", "none"], "seq_len": [8, 16]},
        "fixed": {"width": 16, "mlp": False},
        "residuals": spec.DEFAULT_RESIDUALS,
    }
    ds = run("depth", sweep, "cpu")
    with pytest.raises(spec.ConfigError, match="construction"):
        spec.check_sweep("depth", {**sweep, "construction": dict(spec.CONSTRUCTION)}, spec.DEFAULT_RESIDUALS)
    deeper = run("depth", {**sweep, "grid": {"residual": ["inv_sqrt_depth", "skip"]}, "depths": [3]}, "cpu")
    assert deeper["final_cosine"].dims == ("residual", "model_depth", "seed")
    assert deeper.model_depth.values.tolist() == [2, 3]
    assert np.isfinite(deeper["final_cosine"].sel(residual="inv_sqrt_depth")).all()
    assert np.isnan(deeper["final_cosine"].sel(residual="skip")).all()
    masks = {**sweep, "grid": {"norm": ["none"]}, "construction": {**spec.CONSTRUCTION, "draws": 4}}
    built = run("masks", masks, "cpu")
    assert built["construction_ratio"].dims == ("construction_norm", "draw", "layer")
    assert ds["cosine"].dims == ("norm", "seq_len", "layer", "seed")
    assert ds["cosine"].shape == (2, 2, 3, 2)
    assert np.isfinite(ds["theory_cosine"].sel(norm="post_ln")).all()
    assert np.isnan(ds["theory_cosine"].sel(norm="none")).all()
    assert np.isfinite(ds["finite_cosine"].sel(norm="post_ln")).all()
    assert ds["finite_overlap"].dims == ds["cosine"].dims
    for name, var in ds.variables.items():
        assert "long_name" in var.attrs and "units" in var.attrs, name
