"""engine/device.py: whether CUDA is there, asked of the NVIDIA driver (no torch), and Engine.load's own check
for a torch that cannot use the GPU the driver shows."""
from __future__ import annotations

import ctypes

import pytest

from engine.api import DeviceUnavailable, EngineOptions
from engine.device import CUDA_DRIVER_LIBS, cuda_problem


class FakeDriver:
    """The two calls of the CUDA driver API that cuda_problem makes, answering as told."""

    def __init__(self, init_rc: int = 0, count: int = 1):
        self.init_rc, self.count = init_rc, count

    def cuInit(self, flags):
        return self.init_rc

    def cuDeviceGetCount(self, ref):
        ref._obj.value = self.count                 # ctypes.byref(c_int): the int it points at
        return 0


@pytest.mark.parametrize("driver, words", [
    (None, "no NVIDIA driver on this machine"),
    (FakeDriver(init_rc=100), "no CUDA device is available to this process"),     # CUDA_ERROR_NO_DEVICE
    (FakeDriver(count=0), "no CUDA device is available to this process"),
    (FakeDriver(init_rc=999), "cuInit error 999"),
    (FakeDriver(count=2), None),
])
def test_cuda_problem_asks_the_driver_without_torch(monkeypatch, driver, words):
    def cdll(name):
        assert name in CUDA_DRIVER_LIBS
        if driver is None:
            raise OSError(f"{name}: cannot open shared object file")
        return driver

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    problem = cuda_problem()
    assert problem is None if words is None else words in problem and problem.endswith("use --device cpu")


def test_a_torch_that_cannot_use_the_gpu_is_refused_at_engine_load(monkeypatch):
    """The driver shows a GPU but torch cannot use it (a CPU build of torch): one line, DeviceUnavailable (exit 3),
    before any model is loaded."""
    torch = pytest.importorskip("torch")
    from engine import engine as eng

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(eng, "load_chattts", lambda *a: pytest.fail("the model was loaded"))
    with pytest.raises(DeviceUnavailable, match=r"^--device cuda: torch cannot use a CUDA device here") as e:
        eng.Engine.load(EngineOptions(model="random-tiny", device="cuda"))
    assert "\n" not in str(e.value)
