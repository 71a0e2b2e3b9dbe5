"""Where a job runs (san.core.device, san.core.gpus), with a faked torch.cuda on the CPU: device resolution and its
errors, one GPU per job, the float settings of a GPU job, what results record; and every random draw of the
experiments made on a CPU generator, so a seed draws the same numbers on any device."""

from __future__ import annotations

import fcntl
import json
import logging
import socket

import numpy as np
import pytest
import torch

from san.core import device as dev
from san.core import gpus
from san.core.provenance import provenance_attrs

from conftest import SCRUBBED_PREFIXES, hermetic_environment


@pytest.fixture
def fake_cuda(monkeypatch, tmp_path):
    """torch.cuda reports ``n`` GPUs (set ``fake_cuda.n``); set_device records its argument instead of running."""

    class Fake:
        n = 2
        current = []

    monkeypatch.setattr(torch.cuda, "is_available", lambda: Fake.n > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: Fake.n)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: Fake.current.append(torch.device(d)))
    monkeypatch.setattr(dev, "visible_gpus", lambda: [str(i) for i in range(Fake.n)])
    monkeypatch.setenv(gpus.LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(gpus, "_held", {})
    yield Fake
    gpus.release_gpus()


def test_auto_resolves_to_cuda_when_visible(fake_cuda):
    assert dev.resolve_device("auto") == torch.device("cuda", 0)


def test_explicit_index(fake_cuda):
    assert dev.resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(RuntimeError, match=r"compute\.rank_collapse\.device is 'cuda:3' but only 2 CUDA"):
        dev.resolve_device("cuda:3", key="compute.rank_collapse.device")


def test_cuda_without_cuda_is_an_error_naming_the_key(fake_cuda):
    fake_cuda.n = 0
    with pytest.raises(RuntimeError, match=r"compute\.paths_train\.device is 'cuda' but CUDA is not available"):
        dev.resolve_device("cuda", key="compute.paths_train.device")
    with pytest.raises(ValueError, match=r"compute\.x\.device: 'tpu' is not a device"):
        dev.resolve_device("tpu", key="compute.x.device")


def test_auto_on_the_cpu_says_so_when_a_gpu_was_reserved(fake_cuda, caplog):
    fake_cuda.n = 0
    with caplog.at_level(logging.INFO, logger="san"):
        assert dev.resolve_device("auto", key="compute.rank_collapse.device", gpu_declared=True).type == "cpu"
    assert "reserved a GPU but runs on the CPU" in caplog.text and "compute.rank_collapse.device" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="san"):
        dev.resolve_device("auto", gpu_declared=False)
    assert "reserved a GPU" not in caplog.text


def test_each_job_claims_its_own_gpu(fake_cuda, tmp_path):
    """A GPU held by another job (its lock taken) is skipped: jobs running at once get different devices."""
    folder = tmp_path / "locks"
    folder.mkdir()
    other_job = open(folder / f"{socket.gethostname()}-0.lock", "a")  # noqa: SIM115 - another job's claim on GPU 0
    fcntl.flock(other_job, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        assert dev.resolve_device("auto") == torch.device("cuda", 1)
        assert dev.resolve_device("cuda") == torch.device("cuda", 1), "a job keeps the GPU it claimed"
    finally:
        other_job.close()


def test_a_job_waits_when_every_gpu_is_held(fake_cuda, tmp_path, monkeypatch):
    fake_cuda.n = 1
    folder = tmp_path / "locks"
    folder.mkdir()
    holder = open(folder / f"{socket.gethostname()}-0.lock", "a")  # noqa: SIM115 - held by another job
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    sleeps = []

    def release_after_a_wait(seconds):
        sleeps.append(seconds)
        holder.close()  # the other job ends

    monkeypatch.setattr(gpus.time, "sleep", release_after_a_wait)
    assert gpus.claim_gpu(["0"]) == 0 and sleeps


def test_lock_names_follow_the_physical_device(fake_cuda, tmp_path):
    """Under CUDA_VISIBLE_DEVICES=2,3 (a SLURM allocation), index 0 is physical GPU 2: the lock says so."""
    assert gpus.claim_gpu(["2", "3"]) == 0
    assert (tmp_path / "locks" / f"{socket.gethostname()}-2.lock").exists()


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0,1", ["0", "1"]), ("", []), ("-1", []), ("2", ["2"]), ("GPU-abc,1,-1,3", ["GPU-abc", "1"])],
)
def test_visible_gpus_reads_cuda_visible_devices(value, expected):
    assert gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": value}) == expected


def test_visible_gpus_without_a_driver(monkeypatch):
    monkeypatch.setattr(gpus.shutil, "which", lambda name: None)
    monkeypatch.setattr(gpus, "DRIVER_GPUS", gpus.Path("/nonexistent/driver/gpus"))
    assert gpus.visible_gpus({}) == []


def test_a_gpu_training_job_computes_as_the_cpu_does(fake_cuda, monkeypatch):
    """TF32 off, deterministic algorithms on with cuBLAS's workspace setting, for a training on CUDA."""
    calls = {}
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda flag: calls.setdefault("deterministic", flag))
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    threads, tf32 = torch.get_num_threads(), torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        compute = {"device": "auto", "key": "compute.paths_train.device", "gpu": 1}
        assert dev.job_device(compute, 1, train=True) == torch.device("cuda", 0)
        assert torch.backends.cuda.matmul.allow_tf32 is False
    finally:
        torch.set_num_threads(threads)
        torch.backends.cuda.matmul.allow_tf32 = tf32
    assert calls == {"deterministic": True}
    assert fake_cuda.current == [torch.device("cuda", 0)]
    import os

    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == dev.CUBLAS_WORKSPACE


def test_results_record_the_compute_environment(fake_cuda, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: (9, 0))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda i: 3 * 2**30)
    attrs = json.loads(provenance_attrs({"x": 1})["compute"])
    assert attrs["gpu"] == "NVIDIA H100 80GB HBM3" and attrs["gpu_index"] == 1 and attrs["gpu_capability"] == "9.0"
    assert attrs["gpu_peak_memory_mib"] == 3072.0
    assert {"cuda_version", "tf32_matmul", "tf32_cudnn", "deterministic_algorithms", "torch"} <= set(attrs)
    assert attrs["device"] == "cuda"


def test_cpu_results_record_only_what_applies_to_the_cpu():
    """A CPU job records its device, torch and threads, and none of the CUDA flags (TF32, deterministic
    algorithms, cuBLAS, cuDNN), which do not act on its kernels, whatever they are set to."""
    tf32 = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True
        attrs = json.loads(provenance_attrs({"x": 1})["compute"])
    finally:
        torch.backends.cudnn.allow_tf32 = tf32
    assert attrs == {"device": "cpu", "torch": torch.__version__, "threads": torch.get_num_threads()}


# --- every random draw on a CPU generator ----------------------------------------------------------------------


class DrawAudit(torch.overrides.TorchFunctionMode):
    """Records every random draw: the generator's device (``global`` for torch's global generator, whose CUDA
    stream would differ from the CPU's) and the device the numbers were drawn on."""

    RANDOM = {"randn", "rand", "randint", "randperm", "normal", "bernoulli", "multinomial", "normal_", "uniform_",
              "bernoulli_", "random_", "exponential_", "dropout", "rand_like", "randn_like"}  # fmt: skip

    def __init__(self):
        super().__init__()
        self.draws = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in self.RANDOM:
            gen = kwargs.get("generator")
            on = kwargs.get("device") or next((a.device for a in args if isinstance(a, torch.Tensor)), "cpu")
            self.draws.append((name, "global" if gen is None else gen.device.type, torch.device(on).type))
        return func(*args, **kwargs)


def audit(fn):
    with DrawAudit() as mode:
        out = fn()
    return out, mode.draws


def test_propagation_draws_on_cpu_generators():
    from san.propagation import simulator
    from san.propagation.spec import PARAMS

    p = {**PARAMS, "width": 8, "seq_len": 6, "mlp": True}
    residual = {"skip": 1.0, "branch": 1.0}
    out, draws = audit(lambda: simulator.simulate(p, residual, depth=2, seeds=[0, 1]))
    assert draws and all(g == "cpu" and on == "cpu" for _, g, on in draws), draws
    again = simulator.simulate(p, residual, depth=2, seeds=[0, 1])
    assert all(np.array_equal(out[k], again[k], equal_nan=True) for k in out)
    # the device-independent path: the first seed's first layer is the CPU generator's own stream
    gen = torch.Generator().manual_seed(0)
    first = torch.randn((8, 8), generator=gen, dtype=simulator.DTYPE)
    w = simulator.draw_layer([torch.Generator().manual_seed(0)], p, 8, 6, "meta")
    assert w["wq"].device.type == "meta"
    w_cpu = simulator.draw_layer([torch.Generator().manual_seed(0)], p, 8, 6, "cpu")
    assert torch.equal(w_cpu["wq"][0], first * simulator.qk_std(p["beta"], 6, 8))


def test_circle_initialisation_draws_on_a_cpu_generator():
    """The layer is built on the CPU (the modules' own default init, then overwritten) and initialised from the
    seed's CPU generator: the weights do not depend on the global random state, and no draw happens on a GPU."""
    from san.circle.experiment import Variant, build_model

    variant = Variant(layer_skip=True, step_skip=True, mlp=True)
    a, draws = audit(lambda: build_model(variant, 8, 2, 0, 0.02, 1.0, 1e-5, torch.float32))
    assert draws and all(on == "cpu" for _, _, on in draws), draws
    assert any(g == "cpu" for _, g, _ in draws), "the seed's own CPU generator initialises the weights"
    torch.manual_seed(12345)  # another global state
    b = build_model(variant, 8, 2, 0, 0.02, 1.0, 1e-5, torch.float32)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


# --- the test suite's own environment ----------------------------------------------------------------------------


def test_the_suite_runs_without_the_callers_settings():
    """Whatever the caller exported (HF_HUB_OFFLINE=1, a CUDA_VISIBLE_DEVICES, a token), no test sees it."""
    import os

    leftover = {k for k in os.environ if k.startswith(SCRUBBED_PREFIXES)} - {"HF_HOME", "HF_HUB_DISABLE_TELEMETRY"}
    assert not leftover, leftover
    assert "san-tests-hf-home-" in os.environ["HF_HOME"]


def test_hermetic_environment_removes_the_callers_variables():
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "0", "HF_TOKEN": "x",
           "SAN_SLURM": "1", "PATH": "/bin"}  # fmt: skip
    removed = hermetic_environment(env, "/tmp/home")
    assert removed == ["CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE", "HF_TOKEN", "TRANSFORMERS_OFFLINE"]
    assert env == {"SAN_SLURM": "1", "PATH": "/bin", "HF_HOME": "/tmp/home", "HF_HUB_DISABLE_TELEMETRY": "1"}


def test_random_init_weights_are_drawn_on_the_cpu(tmp_path):
    """A model's ``init`` weights are drawn on the CPU (the acquisition job builds the model there, seeded) and
    saved; the analysis jobs load them onto any device, so every device analyses the same weights."""
    from safetensors.torch import load_file

    from san.models.store import materialise_init

    arch = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}
    _, draws = audit(lambda: materialise_init("bert", arch, 0, tmp_path / "a"))
    assert draws and all(on == "cpu" for _, _, on in draws), draws
    torch.manual_seed(999)
    materialise_init("bert", arch, 0, tmp_path / "b")
    a, b = (load_file(tmp_path / x / "model.safetensors") for x in "ab")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_theory_draws_are_a_numpy_generator_of_the_seed():
    """The theorem's weights come from a numpy generator of the config seed: host memory, no device involved (the
    attention products' path sampling and the path evaluation's sets are drawn the same way)."""
    from san.theory.experiment import draw_weights

    wa, wb = (draw_weights(np.random.default_rng(1), 2, 1, 4, 2) for _ in range(2))
    assert all(isinstance(x, np.ndarray) and np.array_equal(x, y) for x, y in zip(wa, wb, strict=True))
