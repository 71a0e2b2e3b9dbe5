"""Seeds trained as one batched model (san.paths.ensemble): each seed as its single-seed run, resumable training, and
the path claims' verdicts over seeds."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import xarray as xr

from san.paths.claims import over_seeds, seed_verdict
from san.paths.ensemble import EnsembleSAN
from san.paths.experiment import init_model, train
from san.paths.model import SAN, DropoutMasks, load_seeds, save_seeds
from san.paths.tasks import make_task
from san.paths.training import Checkpoint, EnsembleLearner, SingleLearner, train_ensemble, train_model

torch.set_num_threads(1)

TRAIN = {
    "epochs": 3,
    "batch_size": 12,
    "optimizer": "adam",
    "lr": 3e-3,
    "betas": [0.9, 0.999],
    "eps": 1e-8,
    "weight_decay": 1e-3,
    "schedule": {"kind": "multistep", "milestones": [1], "gamma": 0.5},
    "max_grad_norm": None,
    "shuffle": True,
    "compile": False,
    "fused": True,
}
SORT = {
    "task": "sorting",
    "seeds": [3, 5],
    "data": {"seq_len": 6, "vocab_size": 5, "n_train": 40, "n_eval": 16},
    "model": {"n_layers": 2, "n_heads": 2, "dim": 8, "dropout": 0.1},
    "train": TRAIN,
}
HULL = {
    "task": "convex_hull",
    "seeds": [3, 5],
    "data": {"n_points": 6, "low": 0.0, "high": 10.0, "shift_std": 3.3, "n_train": 40, "n_eval": 16},
    "model": {"n_layers": 2, "n_heads": 2, "dim": 8, "dropout": 0.1, "point_mlp": True},
    "train": {**TRAIN, "optimizer": "adamw", "max_grad_norm": 0.5, "schedule": {"kind": "linear"}},
}


def _task(cfg: dict, seed: int):
    return make_task(cfg["task"], {**cfg, "seed": seed})


def _state(model: SAN) -> dict[str, torch.Tensor]:
    return {k: v.detach() for k, v in model.state_dict().items()}


def test_each_member_starts_from_its_single_seed_initialisation():
    cfg = _task(SORT, 3).model_config
    ens = EnsembleSAN(cfg, [3, 5])
    for i, seed in enumerate([3, 5]):
        alone = _state(init_model(_task(SORT, seed), seed))
        member = _state(ens.member(i))
        assert all(torch.equal(alone[k], member[k]) for k in alone)
    assert not torch.equal(ens.w("classifier.weight")[0], ens.w("classifier.weight")[1])


@pytest.mark.parametrize("cfg", [SORT, HULL], ids=["tokens", "points"])
def test_first_batches_and_masks_are_those_of_the_single_seed_runs(cfg, monkeypatch):
    """Seed s in an ensemble sees the batches and dropout masks of the run of seed s alone, so its first step's
    logits agree to float32 rounding (batched instead of single matrix products)."""
    seen: dict[str, list] = {"single": [], "ensemble": []}
    real_single, real_ensemble = SingleLearner.loss, EnsembleLearner.loss

    def spy_single(self, rows):
        seen["single"].append((self.data.inputs[rows[0]].clone(), self.model(self.data.inputs[rows[0]]).detach()))
        self.model.dropout_masks.seed(self.model._seed)  # the spy's forward drew masks: start over
        return real_single(self, rows)

    def spy_ensemble(self, rows):
        states = [m.get_state() for m in self.masks]
        seen["ensemble"].append((self.inputs[rows].clone(), self.model(self.inputs[rows]).detach()))
        for m, st in zip(self.masks, states, strict=True):
            m.set_state(st)
        return real_ensemble(self, rows)

    monkeypatch.setattr(SingleLearner, "loss", spy_single)
    monkeypatch.setattr(EnsembleLearner, "loss", spy_ensemble)
    one_epoch = {**cfg["train"], "epochs": 1}
    tasks = [_task(cfg, s) for s in cfg["seeds"]]
    for task, seed in zip(tasks, cfg["seeds"], strict=True):
        model = init_model(task, seed)
        model._seed = seed
        train_model(model, task.train, one_epoch, seed)
    ens = EnsembleSAN(tasks[0].model_config, cfg["seeds"])
    train_ensemble(ens, [t.train for t in tasks], one_epoch)
    n_steps = len(seen["ensemble"])
    assert n_steps == 4 and len(seen["single"]) == 2 * n_steps
    for i in range(len(cfg["seeds"])):
        x_alone, logits_alone = seen["single"][i * n_steps]
        x_ens, logits_ens = seen["ensemble"][0]
        assert torch.equal(x_alone, x_ens[i])
        torch.testing.assert_close(logits_ens[i], logits_alone, rtol=1e-5, atol=1e-6)


def test_ensemble_masks_follow_each_seeds_stream():
    """A step's masks, drawn at once per seed, are the masks the single-seed model asks for one by one (embedding,
    each layer's attention and output, classifier), across pool refills (a small pool forces several)."""
    cfg = _task(SORT, 3).model_config
    ens = EnsembleSAN(cfg, [3, 5])
    ens.masks = [DropoutMasks(seed, pool_size=500) for seed in (3, 5)]
    like = torch.zeros(1)
    b, n, d, h = 4, 6, cfg.dim, cfg.n_heads
    shapes = [(b * n, d)] + [(b * h, n, n), (b * n, d)] * cfg.n_layers + [(b * n, d)]
    refs = [DropoutMasks(seed, pool_size=500) for seed in (3, 5)]
    for _ in range(3):
        got = ens.step_masks(like, b, n)
        assert [tuple(g.shape[1:]) for g in got] == shapes
        for i, ref in enumerate(refs):
            for g, shape in zip(got, shapes, strict=True):
                assert torch.equal(g[i], ref.mask(torch.Size(shape), 0.1, like))


@pytest.mark.parametrize("cfg", [SORT, HULL], ids=["sorting_adam", "hull_adamw_clipped"])
def test_ensemble_training_matches_single_seed_runs_to_rounding(cfg):
    """After 3 epochs each member matches its single-seed run: per-seed losses to 1e-6 relative, every weight that
    acts on the output to 1e-5 absolute (float32 rounding of batched products, amplified a little by Adam). The key
    bias is left out: softmax ignores a constant per row, so its true gradient is 0 and Adam turns the rounding
    noise of its computed gradient into steps of about lr, in a single-seed run as well; it has no effect on the
    output, which the eval logits check."""
    ens = train(cfg)
    d = cfg["model"]["dim"]
    for i, seed in enumerate(cfg["seeds"]):
        alone = train({**cfg, "seeds": [seed]})
        np.testing.assert_allclose(np.asarray(ens.result.loss)[:, i], np.asarray(alone.result.loss)[:, 0], rtol=1e-6)
        a, b = _state(alone.models[0]), _state(ens.models[i])
        for k in a:
            if k.endswith("qkv.bias"):
                a[k], b[k] = torch.cat([a[k][:d], a[k][2 * d :]]), torch.cat([b[k][:d], b[k][2 * d :]])
            torch.testing.assert_close(b[k], a[k], rtol=0, atol=1e-5, msg=k)
        x = ens.tasks[i].eval.inputs
        with torch.no_grad():
            torch.testing.assert_close(ens.models[i](x), alone.models[0](x), rtol=0, atol=1e-4)


def test_one_seed_trains_exactly_as_train_model():
    cfg = {**SORT, "seeds": [5]}
    a = train(cfg)
    task = _task(SORT, 5)
    model = init_model(task, 5)
    result = train_model(model, task.train, TRAIN, 5)
    assert a.result.loss == result.loss
    assert all(torch.equal(x, y) for x, y in zip(_state(a.models[0]).values(), _state(model).values(), strict=True))


def test_per_seed_clipping_is_clip_grad_norm_of_each_member():
    tasks = [_task(HULL, s) for s in HULL["seeds"]]
    ens = EnsembleSAN(tasks[0].model_config, HULL["seeds"])
    learner = EnsembleLearner(ens, [t.train for t in tasks], torch.device("cpu"))
    loss, _ = learner.loss(torch.arange(12).repeat(2, 1) + learner.offset)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in zip(ens.names, ens.weights, strict=True)}
    learner.clip(0.01)
    for i in range(2):
        ref = [torch.nn.Parameter(torch.zeros_like(g[i])) for g in grads.values()]
        for r, g in zip(ref, grads.values(), strict=True):
            r.grad = g[i].clone()
        torch.nn.utils.clip_grad_norm_(ref, 0.01)
        for r, p in zip(ref, ens.weights, strict=True):
            torch.testing.assert_close(p.grad[i], r.grad, rtol=1e-5, atol=1e-9)


class Stop(Exception):
    pass


@pytest.mark.parametrize("seeds", [[3], [3, 5]], ids=["single", "ensemble"])
def test_a_stopped_training_resumes_to_the_same_result(tmp_path, seeds):
    cfg = {**SORT, "seeds": seeds, "train": {**TRAIN, "epochs": 4, "max_grad_norm": 1.0}}
    whole = train(cfg)
    ckpt = Checkpoint(tmp_path / "run.pt", 0.0, "key")

    def stop_after_two(epoch, *_):
        if epoch == 1:
            raise Stop

    with pytest.raises(Stop):
        train(cfg, checkpoint=ckpt, on_epoch=stop_after_two)
    assert torch.load(ckpt.path, weights_only=False)["epoch"] == 2
    resumed = train(cfg, checkpoint=ckpt)
    assert resumed.result.loss == whole.result.loss
    for a, b in zip(whole.models, resumed.models, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(_state(a).values(), _state(b).values(), strict=True))
    # a checkpoint of another configuration is ignored
    assert Checkpoint(ckpt.path, 0.0, "other").load() is None


def test_seed_file_round_trip(tmp_path):
    models = [init_model(_task(SORT, s), s) for s in (3, 5)]
    save_seeds(models, [3, 5], str(tmp_path / "m.safetensors"), {"task": "sorting"})
    loaded, seeds, meta = load_seeds(str(tmp_path / "m.safetensors"))
    assert seeds == [3, 5] and meta["task"] == "sorting"
    for a, b in zip(models, loaded, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(_state(a).values(), _state(b).values(), strict=True))


# ----------------------------------------------------------------------------------------------------------------
# Verdicts over seeds


def _results(short_best_by_seed: list[float]) -> xr.Dataset:
    """A synthetic path result with a seed dimension: accuracy by path length 0..3, full 0.9, chance 0.1; the
    short paths (length 1) reach ``short_best_by_seed``, the longest 0.2."""
    acc = np.array([[0.1, s, 0.3, 0.2] for s in short_best_by_seed])[:, None, :, None]
    return xr.Dataset(
        {
            "accuracy": (("seed", "n_paths", "path_length", "repeat"), acc),
            "full_model_accuracy": (("seed",), np.full(len(short_best_by_seed), 0.9)),
            "chance_accuracy": (("seed",), np.full(len(short_best_by_seed), 0.1)),
        },
        coords={"seed": np.arange(len(short_best_by_seed)), "n_paths": [5], "path_length": np.arange(4)},
    )


def test_seed_verdict_rules():
    assert seed_verdict([True, True], "every_seed", 1.0)
    assert not seed_verdict([True, False], "every_seed", 1.0)
    assert seed_verdict([True, True, False], "share", 0.6)
    assert not seed_verdict([True, False, False], "share", 0.6)
    assert not seed_verdict([], "every_seed", 1.0)
    with pytest.raises(ValueError, match="report.paths.seeds.rule"):
        seed_verdict([True], "majority", 0.5)


def test_path_claim_holds_in_every_seed():
    from san.paths.claims import path_effectiveness_claims

    out = over_seeds(path_effectiveness_claims, {"t": _results([0.8, 0.7, 0.85])}, short=1, most=0.5)
    assert out["short_reach_most"] and out["short_beats_long"]
    assert out["per_seed"]["t"]["1"]["short_reach_most"]


def test_path_claim_fails_when_one_seed_fails_though_the_mean_passes():
    from san.paths.claims import path_effectiveness_claims

    results = {"t": _results([0.9, 0.9, 0.4])}  # mean short best 0.73: 79% of the gain; seed 2: 38%
    mean_only = path_effectiveness_claims({"t": results["t"].mean("seed")}, short=1, most=0.5)
    assert mean_only["short_reach_most"]
    out = over_seeds(path_effectiveness_claims, copy.deepcopy(results), short=1, most=0.5)
    assert not out["short_reach_most"] and not out["per_seed"]["t"]["2"]["short_reach_most"]
    assert over_seeds(path_effectiveness_claims, results, rule="share", min_share=0.6, short=1, most=0.5)[
        "short_reach_most"
    ]
