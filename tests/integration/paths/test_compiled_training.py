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

from helpers import PATHS_SORT, PATHS_TRAIN

torch.set_num_threads(1)


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="inductor needs a C++ compiler")
def test_compiled_training_runs_the_autograd_formulation():
    task = make_task("sorting", {**PATHS_SORT, "data": {**PATHS_SORT["data"], "n_train": 64}})
    losses = []
    for compile_ in (True, False):
        model = SAN(task.model_config, [1])
        cfg = {**PATHS_TRAIN, "epochs": 2, "compile": compile_, "fused": True}
        losses.append(train(model, [task.train], cfg).loss)
        assert model.fused == (not compile_)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)  # same masks, same arithmetic up to rounding
