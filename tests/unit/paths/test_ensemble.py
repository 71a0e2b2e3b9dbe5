"""Seeds stacked in one SAN (san.paths.model): each seed's draws from its own CPU generators, each seed as its one-seed
run, resumable training keyed on config, code and libraries (the path claims over seeds: test_paths_claims.py)."""

from __future__ import annotations

import json
import logging
import os

import numpy as np
import pytest
import torch

from san.core.device import deterministic
from san.core.rng import cpu_generator
from san.paths.experiment import train
from san.paths.model import SAN, DropoutMasks
from san.paths.tasks import make_task
from san.paths.training import Checkpoint, Learner, training_key

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


def _torch_nn_init(cfg, seed: int) -> dict[str, torch.Tensor]:
    """The documented initialisation written with torch.nn modules after torch.manual_seed (an independent
    reference): the constructors' default draws, then BERT's N(0, 0.02) and Kaiming-uniform value/output maps."""
    from torch import nn

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        d = cfg.dim
        mods = {"embedding.word": nn.Embedding(cfg.vocab_size, d), "embedding.position": nn.Embedding(cfg.max_len, d)}
        mods |= {"embedding.linear": nn.Linear(d, d), "embedding.norm": nn.LayerNorm(d)}
        for i in range(cfg.n_layers):
            mods |= {f"layers.{i}.attn.qkv": nn.Linear(d, 3 * d), f"layers.{i}.attn.out": nn.Linear(d, d)}
            mods[f"layers.{i}.norm"] = nn.LayerNorm(d)
        mods["classifier"] = nn.Linear(d, cfg.n_classes)
        with torch.no_grad():
            for m in mods.values():
                if isinstance(m, nn.Linear | nn.Embedding):
                    nn.init.normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)
            for i in range(cfg.n_layers):
                nn.init.uniform_(mods[f"layers.{i}.attn.qkv"].weight[2 * d :], -(d**-0.5), d**-0.5)
                nn.init.uniform_(mods[f"layers.{i}.attn.out"].weight, -(d**-0.5), d**-0.5)
        return {f"{name}.{k}": v for name, m in mods.items() for k, v in m.state_dict().items()}


def test_each_seed_draws_its_weights_from_its_own_cpu_generator():
    """Every seed's initial weights are the documented draws of its own CPU generator, whatever the other seeds,
    and leave torch's global generator untouched; on the CPU device they are those draws, unchanged."""
    cfg = _task(SORT, 3).model_config
    torch.manual_seed(123)
    before = torch.get_rng_state()
    stack = SAN(cfg, [3, 5])
    assert torch.equal(torch.get_rng_state(), before)
    for i, seed in enumerate([3, 5]):
        ref = _torch_nn_init(cfg, seed)
        alone = _state(SAN(cfg, [seed]).to("cpu"))
        assert all(torch.equal(_state(stack)[k][i], ref[k]) and torch.equal(alone[k][0], ref[k]) for k in ref)
    assert not torch.equal(stack.classifier.weight[0], stack.classifier.weight[1])


def test_batches_and_masks_are_drawn_on_the_cpu_then_moved():
    """Batch orders come from CPU generators seeded with each seed, dropout masks from numpy; the masks asked for a
    tensor on a device are the CPU draws moved there (the meta device stands for an accelerator: same key, pool on
    the device)."""
    masks, ref = DropoutMasks(3), DropoutMasks(3)
    cpu = masks.mask(torch.Size((4, 5)), 0.1, torch.zeros(1))
    assert torch.equal(cpu, ref.mask(torch.Size((4, 5)), 0.1, torch.zeros(1, dtype=torch.float64)).float())
    meta = DropoutMasks(3).mask(torch.Size((4, 5)), 0.1, torch.zeros(1, device="meta"))
    assert meta.device.type == "meta" and meta.shape == cpu.shape
    state = masks.get_state()
    state["key"] = (0.1, torch.float32, torch.device("meta"))  # a checkpoint read on the CPU of a run on a device
    masks.set_state(state)
    assert masks.mask(torch.Size((2,)), 0.1, torch.zeros(1, device="meta")).device.type == "meta"
    order = torch.randperm(10, generator=cpu_generator(3))
    assert torch.equal(order, torch.randperm(10, generator=torch.Generator(device="cpu").manual_seed(3)))


def test_a_step_draws_each_seeds_masks_in_its_own_stream():
    """A step's masks, drawn at once per seed, are the masks a lone seed asks for one by one (embedding, each
    layer's attention and output, classifier), across pool refills (a small pool forces several)."""
    cfg = _task(SORT, 3).model_config
    model = SAN(cfg, [3, 5])
    model.masks = [DropoutMasks(seed, pool_size=500) for seed in (3, 5)]
    like = torch.zeros(1)
    b, n, d, h = 4, 6, cfg.dim, cfg.n_heads
    shapes = [(b * n, d)] + [(b * h, n, n), (b * n, d)] * cfg.n_layers + [(b * n, d)]
    refs = [DropoutMasks(seed, pool_size=500) for seed in (3, 5)]
    for _ in range(3):
        got = model.step_masks(like, b, n)
        assert [tuple(g.shape[1:]) for g in got] == shapes
        for i, ref in enumerate(refs):
            for g, shape in zip(got, shapes, strict=True):
                assert torch.equal(g[i], ref.mask(torch.Size(shape), 0.1, like))


@pytest.mark.parametrize("cfg", [SORT, HULL], ids=["sorting_adam", "hull_adamw_clipped"])
def test_seeds_trained_together_match_each_seed_alone_to_rounding(cfg):
    """After 3 epochs each seed of a stack matches its one-seed run: per-seed losses to 1e-6 relative, every weight
    that acts on the output to 1e-5 absolute (float32 rounding of batched products, amplified a little by Adam). The
    key bias is left out: softmax ignores a constant per row, so its true gradient is 0 and Adam turns the rounding
    noise of its computed gradient into steps of about lr, in a one-seed run as well; it has no effect on the
    output, which the eval logits check."""
    stack = train(cfg)
    d = cfg["model"]["dim"]
    for i, seed in enumerate(cfg["seeds"]):
        alone = train({**cfg, "seeds": [seed]})
        np.testing.assert_allclose(np.asarray(stack.result.loss)[:, i], np.asarray(alone.result.loss)[:, 0], rtol=1e-6)
        a, b = _state(alone.model), _state(stack.model.member(i))
        for k in a:
            if k.endswith("qkv.bias"):
                a[k], b[k] = (
                    torch.cat([a[k][:, :d], a[k][:, 2 * d :]], 1),
                    torch.cat([b[k][:, :d], b[k][:, 2 * d :]], 1),
                )
            torch.testing.assert_close(b[k], a[k], rtol=0, atol=1e-5, msg=k)
        x = stack.tasks[i].eval.inputs[None]
        with torch.no_grad():
            torch.testing.assert_close(stack.model.member(i)(x), alone.model(x), rtol=0, atol=1e-4)


def test_per_seed_clipping_is_clip_grad_norm_of_each_seed():
    tasks = [_task(HULL, s) for s in HULL["seeds"]]
    model = SAN(tasks[0].model_config, HULL["seeds"])
    learner = Learner(model, [t.train for t in tasks], TRAIN, torch.device("cpu"))
    loss, _ = learner.loss(torch.arange(12).repeat(2, 1) + learner.offset)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    learner.clip(0.01)
    for i in range(2):
        ref = [torch.nn.Parameter(torch.zeros_like(g[i])) for g in grads]
        for r, g in zip(ref, grads, strict=True):
            r.grad = g[i].clone()
        torch.nn.utils.clip_grad_norm_(ref, 0.01)
        for r, p in zip(ref, model.parameters(), strict=True):
            torch.testing.assert_close(p.grad[i], r.grad, rtol=1e-5, atol=1e-9)


class Stop(Exception):
    pass


def _stop_after_two(epoch, *_):
    if epoch == 1:
        raise Stop


@pytest.mark.parametrize("seeds", [[3], [3, 5]], ids=["one_seed", "two_seeds"])
def test_a_stopped_training_resumes_to_the_same_result(tmp_path, seeds):
    cfg = {**SORT, "seeds": seeds, "train": {**TRAIN, "epochs": 4, "max_grad_norm": 1.0}}
    whole = train(cfg)
    ckpt = Checkpoint(tmp_path / "run.pt", 0.0, training_key(cfg, "cpu"))
    with pytest.raises(Stop):
        train(cfg, checkpoint=ckpt, on_epoch=_stop_after_two)
    assert torch.load(ckpt.path, weights_only=False)["epoch"] == 2
    resumed = train(cfg, checkpoint=ckpt)
    assert resumed.result.loss == whole.result.loss
    assert all(
        torch.equal(x, y) for x, y in zip(_state(whole.model).values(), _state(resumed.model).values(), strict=True)
    )


def test_a_checkpoint_of_other_code_or_libraries_is_discarded(tmp_path, caplog):
    """The key holds the config, a hash of the imported san modules, the torch version and the device; a checkpoint
    written under another key is discarded with a log line, and the run starts afresh."""
    cfg = {**SORT, "seeds": [3], "train": {**TRAIN, "epochs": 4}}
    key = json.loads(training_key(cfg, "cpu"))
    assert set(key) == {"config", "code", "torch", "device"} and key["torch"] == torch.__version__
    assert len(key["code"]) == 64 and training_key(cfg, "cpu") != training_key(cfg, "cuda:0")
    ckpt = Checkpoint(tmp_path / "run.pt", 0.0, training_key(cfg, "cpu"))
    with pytest.raises(Stop):
        train(cfg, checkpoint=ckpt, on_epoch=_stop_after_two)
    other_code = Checkpoint(ckpt.path, 0.0, json.dumps({**key, "code": "0" * 64}, sort_keys=True))
    with caplog.at_level(logging.WARNING, logger="san"):
        assert other_code.load() is None
    assert "discarding checkpoint" in caplog.text and "another code" in caplog.text
    assert not ckpt.path.exists()


def test_an_unkeyed_checkpoint_takes_the_trainings_key(tmp_path):
    cfg = {**SORT, "seeds": [3], "train": {**TRAIN, "epochs": 1}}
    ckpt = Checkpoint(tmp_path / "run.pt", 0.0)
    train(cfg, checkpoint=ckpt)
    key = json.loads(ckpt.key)
    assert key["config"] == json.loads(json.dumps(cfg)) and key["device"] == "cpu"
    assert torch.load(ckpt.path, weights_only=False)["key"] == ckpt.key


def test_cuda_trainings_use_deterministic_algorithms(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda on: calls.append(on))
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    deterministic(torch.device("cpu"))
    assert calls == [] and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    deterministic(torch.device("cuda", 0))
    assert calls == [True] and os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_a_non_finite_state_is_never_checkpointed(tmp_path):
    cfg = {**SORT, "seeds": [3], "train": {**TRAIN, "epochs": 3, "lr": float("inf")}}
    ckpt = Checkpoint(tmp_path / "run.pt", 0.0, training_key(cfg, "cpu"))
    with pytest.raises(FloatingPointError, match="non-finite"):
        train(cfg, checkpoint=ckpt)
    assert not ckpt.path.exists()


def test_seed_file_round_trip(tmp_path):
    model = SAN(_task(SORT, 3).model_config, [3, 5])
    model.save(str(tmp_path / "m.safetensors"), {"task": "sorting"})
    loaded, meta = SAN.load(str(tmp_path / "m.safetensors"))
    assert loaded.seeds == [3, 5] and meta["task"] == "sorting" and not loaded.training
    assert all(torch.equal(x, y) for x, y in zip(_state(model).values(), _state(loaded).values(), strict=True))
