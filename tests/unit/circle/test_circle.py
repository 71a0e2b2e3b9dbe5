"""The circle experiment (the paper's Fig. 3): data, the two skip switches on hand-made layers, training, rollout,
collapse measures, gathering, the collapse table, config checks and figures."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import yaml

from san.circle.experiment import (
    CircleLayer,
    Variant,
    build_model,
    centre_distance,
    circle_dataset,
    circle_points,
    pair_offset,
    rollout,
    run_circle,
    step_loss,
    token_distance,
    train,
    training_sequences,
)
from san.circle.results import collapse_table, gather
from san.circle.spec import check_config
from san.core.config import ConfigError, validate_config

from helpers import ROOT

torch.set_num_threads(1)

F64 = torch.float64

SAN = Variant(layer_skip=False, step_skip=False, mlp=False)
SAN_MLP = Variant(layer_skip=False, step_skip=False, mlp=True)
SAN_SKIP = Variant(layer_skip=True, step_skip=True, mlp=False)
TRANSFORMER = Variant(layer_skip=True, step_skip=True, mlp=True)


# --------------------------------------------------------------------------------------------------------- data


def test_points_evenly_spaced_on_the_circle():
    n, r = 1000, 0.3
    pts = circle_points(n, r)
    assert pts.shape == (n, 2) and pts.dtype == F64
    assert torch.allclose(pts.norm(dim=-1), torch.full((n,), r, dtype=F64), atol=1e-15)
    chords = (torch.roll(pts, -1, dims=0) - pts).norm(dim=-1)  # includes the closing step n-1 -> 0
    assert torch.allclose(chords, torch.full((n,), 2 * r * math.sin(math.pi / n), dtype=F64), atol=1e-14)
    assert torch.allclose(pts[0], torch.tensor([r, 0.0], dtype=F64))
    assert pts[n // 4, 1] == pytest.approx(r)  # counter-clockwise


def test_examples_pair_opposite_arcs_and_targets_are_the_next_points():
    n, r = 1000, 0.3
    pts = circle_points(n, r)
    x, y = circle_dataset(n, r)
    assert pair_offset(n) == 499
    assert x.shape == y.shape == (499, 2, 2)
    assert torch.equal(x[0], torch.stack((pts[0], pts[499])))
    assert torch.equal(y[0], torch.stack((pts[1], pts[500])))
    assert torch.equal(x[-1], torch.stack((pts[498], pts[997])))
    assert torch.equal(y[-1], torch.stack((pts[499], pts[998])))
    assert torch.equal(y[:-1], x[1:])  # in order: each target is the next example's input
    # the two tokens are 499 steps apart: nearly opposite, one step short of the antipode
    angle = torch.atan2(x[:, 1, 1], x[:, 1, 0]) - torch.atan2(x[:, 0, 1], x[:, 0, 0])
    assert torch.allclose(torch.remainder(angle, 2 * math.pi), torch.full((499,), 2 * math.pi * 499 / n, dtype=F64))
    seq = training_sequences(x, y)
    assert seq.shape == (2, 500, 2)
    assert torch.equal(seq[0], pts[:500]) and torch.equal(seq[1], pts[499:999])


def test_odd_and_small_point_counts():
    x, y = circle_dataset(7, 1.0)
    assert x.shape == (2, 2, 2) and pair_offset(7) == 2
    with pytest.raises(ValueError, match="at least 4"):
        circle_points(3, 1.0)


# ------------------------------------------------------------------------------------------ hand-made layers


def hand_made(variant: Variant, eps: float = 1e-30) -> CircleLayer:
    """d = 4, H = 2: embedding E x = (x1, x2, -x1, -x2) (zero mean, so LayerNorm(E x) = sqrt(2) (x, -x) / |x|),
    a read-out of the first two features, and an attention block whose output is exactly zero (zero output map
    and bias)."""
    m = CircleLayer(4, 2, variant, ln_eps=eps).to(F64)
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.embed.weight.copy_(torch.tensor([[1.0, 0], [0, 1], [-1, 0], [0, -1]]))
        m.norm.weight.fill_(1.0)
        m.readout.weight.copy_(torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0]]))
        m.attn.qkv.weight.normal_()  # attention weights are irrelevant: the output map is zero
    return m


X = torch.tensor([[[0.3, 0.0], [0.0, -0.6]]], dtype=F64)
UNIT = X / X.norm(dim=-1, keepdim=True)


def test_zero_attention_without_layer_skip_outputs_the_readout_bias():
    m = hand_made(SAN)
    with torch.no_grad():
        m.readout.bias.copy_(torch.tensor([0.1, -0.2]))
    b = torch.tensor([0.1, -0.2], dtype=F64)
    assert torch.allclose(m.update(X), b.expand(1, 2, 2))
    assert torch.allclose(m(X), b.expand(1, 2, 2))  # no step skip: the next state is f(X): both tokens equal
    assert token_distance(m(X)).item() == 0.0


def test_zero_attention_with_layer_skip_passes_the_normalised_embedding():
    m = hand_made(Variant(layer_skip=True, step_skip=False, mlp=False))
    assert torch.allclose(m.update(X), math.sqrt(2) * UNIT, atol=1e-12)
    assert torch.allclose(m(X), math.sqrt(2) * UNIT, atol=1e-12)


def test_step_skip_adds_the_state():
    m = hand_made(SAN_SKIP)
    assert torch.allclose(m(X), X + math.sqrt(2) * UNIT, atol=1e-12)
    m = hand_made(Variant(layer_skip=False, step_skip=True, mlp=False))
    assert torch.allclose(m(X), X, atol=0)  # f = 0: the state is kept exactly


def test_attention_output_replaces_or_adds_to_the_stream():
    c = torch.tensor([0.5, -1.0, 2.0, 0.25], dtype=F64)
    for layer_skip, expected in ((False, c[:2].expand(1, 2, 2)), (True, math.sqrt(2) * UNIT + c[:2])):
        m = hand_made(Variant(layer_skip=layer_skip, step_skip=False, mlp=False))
        with torch.no_grad():
            m.attn.out.bias.copy_(c)  # SA(X) = 1 c^T
        assert torch.allclose(m.update(X), expected, atol=1e-12)


def test_mlp_switch_and_its_residual():
    b2 = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=F64)
    for layer_skip in (False, True):
        m = hand_made(Variant(layer_skip=layer_skip, step_skip=False, mlp=True))
        with torch.no_grad():
            for p in m.mlp.parameters():
                p.zero_()
            m.mlp[2].bias.copy_(b2)  # MLP(h) = b2 for every h
        expected = b2[:2] + (math.sqrt(2) * UNIT if layer_skip else 0)
        assert torch.allclose(m.update(X), expected.expand(1, 2, 2), atol=1e-12)
    assert hand_made(SAN).mlp is None


def test_pure_attention_keeps_equal_tokens_equal_and_contracts_differences():
    """A random pure-attention layer maps equal tokens to equal tokens (token uniformity is a fixed set) and, near
    it, shrinks the token difference at least quadratically (the softmax weights agree to first order)."""
    m = build_model(SAN, 16, 2, seed=3, init_std=None, dtype=F64)
    p = torch.tensor([[0.1, -0.2]], dtype=F64)
    same = torch.cat((p, p)).unsqueeze(0)
    assert token_distance(m(same)[0]).item() == 0.0
    ratios = []
    for delta in (1e-2, 1e-3, 1e-4):
        x = torch.cat((p, p + delta)).unsqueeze(0)
        ratios.append(token_distance(m(x)[0]).item() / token_distance(x[0]).item())
    assert ratios[1] < 0.2 * ratios[0] and ratios[2] < 0.2 * ratios[1]


# ------------------------------------------------------------------------------------------- init, training


def test_same_seed_gives_identical_shared_parameters_in_every_variant():
    models = [build_model(v, 8, 2, seed=7) for v in (SAN, SAN_MLP, SAN_SKIP, TRANSFORMER)]
    ref = dict(models[0].named_parameters())
    for m in models[1:]:
        for name, p in m.named_parameters():
            if not name.startswith("mlp."):
                assert torch.equal(p, ref[name]), name
    other = build_model(SAN, 8, 2, seed=8)
    assert not torch.equal(other.embed.weight, models[0].embed.weight)
    assert torch.equal(models[0].readout.bias, torch.zeros(2))  # BERT-style init: zero biases
    assert models[0].embed.weight.std().item() == pytest.approx(0.02, rel=0.6)


def test_loss_is_the_summed_squared_error_of_one_step():
    x, y = circle_dataset(20, 0.3)
    zero = hand_made(Variant(layer_skip=False, step_skip=True, mlp=False))  # X_{t+1} = X_t exactly
    assert step_loss(zero, x, y).item() == pytest.approx(((x - y) ** 2).sum().item(), rel=1e-12)
    no_skip = hand_made(SAN)  # X_{t+1} = 0
    assert step_loss(no_skip, x, y).item() == pytest.approx((y**2).sum().item(), rel=1e-12)


def test_training_is_deterministic_and_lowers_the_loss():
    x, y = circle_dataset(40, 0.3, torch.float32)
    runs = []
    for _ in range(2):
        m = build_model(SAN_SKIP, 16, 2, seed=1)
        runs.append((train(m, x, y, epochs=15, batch_size=6, lr=3e-3), m.readout.weight.detach().clone()))
    (loss_a, w_a), (loss_b, w_b) = runs
    assert torch.equal(loss_a, loss_b) and torch.equal(w_a, w_b)
    assert loss_a.shape == (15,) and loss_a[-1] < 0.2 * loss_a[0]


def test_rollout_applies_the_layer_recurrently():
    m = build_model(TRANSFORMER, 8, 2, seed=0, init_std=None, dtype=F64)
    x0 = circle_dataset(20, 0.3)[0][0]
    s = rollout(m, x0, 5)
    assert s.shape == (6, 2, 2) and torch.equal(s[0], x0)
    with torch.no_grad():
        for t in range(5):
            assert torch.allclose(s[t + 1], m(s[t].unsqueeze(0))[0], rtol=0, atol=1e-15)


def test_collapse_measures():
    s = torch.tensor([[[3.0, 4.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]], dtype=F64)
    assert torch.equal(token_distance(s), torch.tensor([5.0, 0.0], dtype=F64))
    assert torch.equal(centre_distance(s), torch.tensor([[5.0, 0.0], [math.sqrt(2), math.sqrt(2)]], dtype=F64))
    assert torch.allclose(centre_distance(s, (1.0, 1.0))[1], torch.zeros(2, dtype=F64))


# ------------------------------------------------------------------------------------ experiment and gather

TINY = dict(
    n_points=16,
    radius=0.3,
    n_heads=2,
    init_std=0.02,
    mlp_ratio=1.0,
    ln_eps=1e-5,
    epochs=3,
    batch_size=4,
    lr=1e-3,
    train_dtype=torch.float32,
    steps=6,
    rollout_dtype=F64,
)


@pytest.fixture(scope="module")
def runs():
    out = {}
    for name, v in (("SAN", SAN), ("transformer", TRANSFORMER)):
        for d in (4, 8):
            for s in (0, 1):
                out[(name, d, s)] = run_circle(v, d, s, **TINY)
    return out


def test_run_circle_dataset(runs):
    ds = runs[("SAN", 4, 0)]
    assert ds["trajectory"].dims == ("step", "token", "coord") and ds["trajectory"].shape == (7, 2, 2)
    assert ds["trajectory"].dtype == np.float64 and ds["loss"].sizes["epoch"] == 3
    x0 = circle_dataset(16, 0.3)[0][0].numpy()
    assert np.array_equal(ds["trajectory"].isel(step=0).values, x0)
    assert ds["token_distance"].isel(step=0).item() == pytest.approx(np.linalg.norm(x0[0] - x0[1]))
    assert np.allclose(ds["centre_distance"].isel(step=0).values, 0.3)
    assert ds.attrs["layer_skip"] == 0 and ds.attrs["hidden_dim"] == 4
    assert ds["init_loss"].item() > 0 and ds["final_loss"].item() > 0
    chord = 2 * 0.3 * math.sin(math.pi / 16)  # each of the 2 tokens moves one chord per step
    assert ds["copy_loss"].item() == pytest.approx(2 * chord**2, rel=1e-12)


def test_gather_full_grid_and_table(runs):
    ds = gather(runs)
    assert ds["trajectory"].dims == ("variant", "hidden_dim", "seed", "step", "token", "coord")
    assert list(ds.variant.values) == ["SAN", "transformer"] and list(ds.hidden_dim.values) == [4, 8]
    assert ds["loss"].dims == ("variant", "hidden_dim", "seed", "epoch")
    assert ds["sequence"].dims == ("token", "position", "coord") and ds["copy_loss"].dims == ()
    assert list(ds["step_skip"].values) == [0, 1] and list(ds["mlp"].values) == [0, 1]
    assert np.array_equal(
        ds["trajectory"].sel(variant="transformer", hidden_dim=8, seed=1).values,
        runs[("transformer", 8, 1)]["trajectory"].values,
    )
    partial = dict(runs)
    del partial[("SAN", 8, 1)]
    with pytest.raises(ValueError, match="missing"):
        gather(partial)


def test_collapse_table_counts_against_the_starting_distance(runs):
    ds = gather(runs)
    d = ds["token_distance"].copy()
    d.loc[{"step": 6}] = d.sel(step=0) * 0.5  # nobody collapsed ...
    d.loc[{"variant": "SAN", "hidden_dim": 4, "seed": 1, "step": 6}] = 0.0  # ... but this one
    d.loc[{"variant": "SAN", "hidden_dim": 8, "step": 6}] = d.sel(variant="SAN", hidden_dim=8, step=0) * 0.0099
    d.loc[{"variant": "transformer", "hidden_dim": 8, "step": 6}] = (
        d.sel(variant="transformer", hidden_dim=8, step=0) * 0.0101
    )
    ds["token_distance"] = d
    t = collapse_table(ds, [2, 6], 0.01).set_index(["variant", "hidden_dim"])
    assert t.loc[("SAN", 4), "n_collapsed"] == 1 and t.loc[("SAN", 8), "n_collapsed"] == 2
    assert t.loc[("transformer", 4), "n_collapsed"] == 0 and t.loc[("transformer", 8), "n_collapsed"] == 0
    ref = ds["token_distance"].sel(variant="SAN", hidden_dim=4, step=2).values
    assert t.loc[("SAN", 4), "dist_2_mean"] == pytest.approx(ref.mean())
    assert t.loc[("SAN", 4), "dist_6_max"] == pytest.approx(
        ds["token_distance"].sel(variant="SAN", hidden_dim=4, step=6).max().item()
    )
    ds["final_loss"].loc[{"variant": "SAN", "hidden_dim": 4}] = [0.5, 0.5 * ds["copy_loss"].item()]
    t = collapse_table(ds, [2, 6], 0.01).set_index(["variant", "hidden_dim"])
    assert t.loc[("SAN", 4), "n_beat_copy"] == 1
    with pytest.raises(ValueError, match="exceed"):
        collapse_table(ds, [7], 0.01)


# ---------------------------------------------------------------------------------------------------- config


@pytest.fixture(scope="module")
def config():
    with (ROOT / "config.yaml").open() as fh:
        return yaml.safe_load(fh)


def test_config_section_equals_the_schema_defaults(config):
    cfg = copy.deepcopy(config)
    del cfg["circle"]
    validate_config(cfg, ROOT / "workflow/schemas/config.schema.yaml")
    assert cfg["circle"] == config["circle"]


def test_config_cross_checks(config):
    c = copy.deepcopy(config["circle"])
    schemas = ROOT / "workflow" / "schemas"
    check_config({"circle": c}, schemas)
    for path, value, match in (
        (("hidden_dims",), [8, 33], "circle.hidden_dims.1"),
        (("report", "steps"), [10, 301], "circle.report.steps.1"),
        (("plot", "seed"), 9, "circle.plot.seed"),
    ):
        bad = copy.deepcopy(c)
        section = bad
        for key in path[:-1]:
            section = section[key]
        section[path[-1]] = value
        with pytest.raises(ConfigError, match=match):
            check_config({"circle": bad}, schemas)


def test_schema_rejects_bad_variants(config):
    cfg = copy.deepcopy(config)
    cfg["circle"]["variants"]["bad/name"] = {"layer_skip": True, "step_skip": False, "mlp": False}
    cfg["circle"]["variants"]["half"] = {"layer_skip": True}
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, ROOT / "workflow/schemas/config.schema.yaml")
    assert "bad/name" in str(err.value) and "'mlp' is a required property" in str(err.value)


# --------------------------------------------------------------------------------------------------- figures


@pytest.mark.slow
def test_figures(runs, tmp_path):
    from san.circle.plots import distance_figure, loss_figure, trajectory_figure
    from san.core.plotting import save

    ds = gather(runs)
    fig = trajectory_figure(ds, seed=1, axis_limit=0.6)
    assert len(fig.axes) == 4
    ax = fig.axes[0]
    # the panels are at least the configured half-width, widened to hold every trajectory (none leaves its panel)
    extent = float(np.abs(ds["trajectory"].sel(seed=1)).max())
    assert -ax.get_xlim()[0] == ax.get_xlim()[1] >= max(0.6, extent) and "hidden dim 4" in ax.get_title()
    save(fig, [tmp_path / "c.png"], 30)
    save(trajectory_figure(ds, axis_limit=None), [tmp_path / "c2.png"], 30)
    fig = distance_figure(ds, 0.01)
    assert len(fig.axes) == 2 and fig.axes[0].get_ylabel().startswith("token distance")
    save(fig, [tmp_path / "d.png"], 30)
    save(loss_figure(ds), [tmp_path / "l.png"], 30)
    assert all((tmp_path / f).stat().st_size > 0 for f in ("c.png", "c2.png", "d.png", "l.png"))


def test_run_slice_holds_only_what_changes_a_run(config):
    from san.circle.spec import run_slice

    c = config["circle"]
    san, transformer = run_slice(c, "SAN"), run_slice(c, "transformer")
    assert "mlp_ratio" not in san["model"] and transformer["model"]["mlp_ratio"] == c["model"]["mlp_ratio"]
    assert set(san) == {"variant", "data", "model", "train", "rollout"}  # no report, plot, seeds or dims
    assert san["variant"] == {"layer_skip": False, "step_skip": False, "mlp": False}
