"""The path-effectiveness SAN trained through torch.compile (inductor compiles C++ in processes of its own) runs the
autograd formulation and gives the eager losses up to rounding."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from san.paths.model import SAN
from san.paths.tasks import make_task
from san.paths.training import train

torch.set_num_threads(1)

TRAIN = {
    "epochs": 2,
    "batch_size": 16,
    "optimizer": "adam",
    "lr": 3e-3,
    "betas": [0.9, 0.999],
    "eps": 1e-8,
    "weight_decay": 0.0,
    "schedule": {"kind": "constant"},
    "max_grad_norm": None,
    "shuffle": True,
}
SORT = {
    "seed": 0,
    "data": {"seq_len": 5, "vocab_size": 4, "n_train": 64, "n_eval": 128},
    "model": {"n_layers": 2, "n_heads": 2, "dim": 16, "dropout": 0.1},
}


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="inductor needs a C++ compiler")
def test_compiled_training_runs_the_autograd_formulation():
    task = make_task("sorting", SORT)
    losses = []
    for compile_ in (True, False):
        model = SAN(task.model_config, [1])
        cfg = {**TRAIN, "compile": compile_, "fused": True}
        losses.append(train(model, [task.train], cfg).loss)
        assert model.fused == (not compile_)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)  # same masks, same arithmetic up to rounding
