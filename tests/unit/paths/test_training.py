"""Training of the path-effectiveness SANs: schedules, optimisers, dropout masks, learning and reproducibility."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from san.paths.model import SAN, DropoutMasks, SANConfig
from san.paths.tasks import chance_accuracy, make_task
from san.paths.training import lr_factor, make_optimizer, train

from helpers import PATHS_SORT, PATHS_TRAIN

torch.set_num_threads(1)


def test_multistep_schedule_matches_torch_multisteplr():
    sched = {"kind": "multistep", "milestones": [15, 30, 40, 50, 60], "gamma": 0.91}
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    ref = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=sched["milestones"], gamma=sched["gamma"])
    for epoch in range(70):
        assert lr_factor(sched, epoch, 0, 1) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-12), epoch
        opt.step()
        ref.step()


def test_linear_schedule_matches_the_transformers_trainer():
    from transformers import get_linear_schedule_with_warmup

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    ref = get_linear_schedule_with_warmup(opt, num_warmup_steps=0, num_training_steps=50)
    for step in range(50):
        assert lr_factor({"kind": "linear"}, 0, step, 50) == pytest.approx(opt.param_groups[0]["lr"]), step
        opt.step()
        ref.step()
    assert lr_factor({"kind": "constant"}, 9, 99, 100) == 1.0
    with pytest.raises(ValueError):
        lr_factor({"kind": "cosine"}, 0, 0, 1)


def test_optimisers_are_fused_with_the_configured_decay():
    model = torch.nn.Linear(3, 2)
    adam = make_optimizer(model, {**PATHS_TRAIN, "weight_decay": 1e-3}, torch.device("cpu"))
    assert type(adam) is torch.optim.Adam and adam.defaults["fused"] and adam.defaults["weight_decay"] == 1e-3
    adamw = make_optimizer(model, {**PATHS_TRAIN, "optimizer": "adamw"}, torch.device("cpu"))
    assert type(adamw) is torch.optim.AdamW
    with pytest.raises(ValueError):
        make_optimizer(model, {**PATHS_TRAIN, "optimizer": "sgd"}, torch.device("cpu"))


def test_dropout_masks_have_the_requested_rate_scale_and_seed():
    like = torch.zeros(())
    m = DropoutMasks(3).mask(torch.Size([400, 500]), 0.1, like)
    assert m.shape == (400, 500) and m.dtype == torch.float32
    assert torch.unique(m).tolist() == pytest.approx([0.0, 1 / 0.9])
    assert float((m == 0).double().mean()) == pytest.approx(0.1, abs=0.003)  # 200k draws: std 0.0007
    assert float(m.double().mean()) == pytest.approx(1.0, abs=0.004)  # inverted dropout keeps the mean
    assert torch.equal(m, DropoutMasks(3).mask(torch.Size([400, 500]), 0.1, like))
    assert not torch.equal(m, DropoutMasks(4).mask(torch.Size([400, 500]), 0.1, like))


def test_training_attention_equals_the_attention_module():
    cfg = SANConfig("tokens", 2, 3, 12, 4, vocab_size=9, max_len=6, dropout=0.0)
    layer = SAN(cfg, [0, 1]).double().layers[0]
    x = torch.randn(2, 5, 6, 12, dtype=torch.float64)
    mask = torch.ones(2, 5, 6, dtype=torch.bool)
    mask[1, 1, 4:] = False
    for m in (None, mask):
        layer.train()
        train_out = layer.autograd_forward(x, m, None, None)
        layer.eval()
        torch.testing.assert_close(train_out, layer(x, m))


@pytest.mark.slow
def test_training_learns_sorting_well_above_chance():
    task = make_task("sorting", PATHS_SORT)
    model = SAN(task.model_config, [0])
    epochs = []
    result = train(model, [task.train], PATHS_TRAIN, on_epoch=lambda *a: epochs.append(a))
    assert len(result.loss) == len(epochs) == PATHS_TRAIN["epochs"] and not model.training
    loss = np.asarray(result.loss)[:, 0]  # one seed
    assert loss[-1] < 0.7 * loss[0]
    with torch.no_grad():
        acc = float((model(task.eval.inputs[None])[0].argmax(-1) == task.eval.labels).float().mean())
    chance = chance_accuracy(task.train.labels, task.eval.labels, 4)
    assert acc > chance + 0.15, (acc, chance)


def test_training_is_reproducible_and_seeded():
    task = make_task("sorting", PATHS_SORT)
    cfg = {**PATHS_TRAIN, "epochs": 2, "max_grad_norm": 1.0, "schedule": {"kind": "linear"}}

    def run(seed: int) -> list[torch.Tensor]:
        model = SAN(task.model_config, [seed])
        train(model, [task.train], cfg)
        return [p.detach().clone() for p in model.parameters()]

    a, b, c = run(1), run(1), run(2)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a, c, strict=True))


def test_training_ignores_padding_labels():
    task = make_task("sorting", PATHS_SORT)
    data = task.train
    data.labels[:, -1] = -100  # no target at the last position
    result = train(SAN(task.model_config, [0]), [data], {**PATHS_TRAIN, "epochs": 1})
    assert np.isfinite(result.loss).all()


@pytest.mark.parametrize("seeds", [[1], [1, 2]], ids=["one_seed", "two_seeds"])
def test_fused_and_autograd_training_reach_the_same_model(seeds):
    task = make_task("sorting", {**PATHS_SORT, "data": {**PATHS_SORT["data"], "n_train": 64}})
    params = []
    for fused in (True, False):
        model = SAN(task.model_config, seeds).double()
        train(model, [task.train] * len(seeds), {**PATHS_TRAIN, "epochs": 3, "fused": fused})
        params.append([p.detach() for p in model.parameters()])
    for a, b in zip(*params, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)
