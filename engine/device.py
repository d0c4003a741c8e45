"""Is the device the engine is asked for there?  Asked of the NVIDIA driver without torch (importing torch and
asking `torch.cuda.is_available()` takes ~2 s), so a CLI on a machine without a GPU refuses `--device cuda` before
it reads the book.  Engine.load asks torch itself, for the case the driver cannot see (a torch without CUDA)."""
from __future__ import annotations

import ctypes
import os

CUDA_DRIVER_LIBS = ("libcuda.so.1", "libcuda.so")   # the NVIDIA driver's CUDA library (what torch loads too)
CUDA_ERROR_NO_DEVICE = 100                           # CUresult: the driver sees no device


def cuda_problem() -> str | None:
    """Why the engine cannot run on CUDA here, or None when the NVIDIA driver shows this process a device
    (CUDA_VISIBLE_DEVICES applies).  Asks the driver's library through ctypes, in milliseconds, instead of
    importing torch (~2 s): a machine without a GPU is refused before the book is read.  It only ever refuses
    what torch would refuse too (torch reaches the GPU through this driver); a torch built without CUDA on a
    GPU machine is refused when the engine loads (Engine.load: DeviceUnavailable)."""
    for name in CUDA_DRIVER_LIBS:
        try:
            driver = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return "no CUDA device is available (no NVIDIA driver on this machine); use --device cpu"
    count = ctypes.c_int(0)
    rc = driver.cuInit(0)
    if rc == 0:
        rc = driver.cuDeviceGetCount(ctypes.byref(count))
    if rc == CUDA_ERROR_NO_DEVICE or (rc == 0 and count.value < 1):
        return ("no CUDA device is available to this process (CUDA_VISIBLE_DEVICES="
                f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}); use --device cpu")
    if rc != 0:
        return f"the NVIDIA driver cannot start CUDA (cuInit error {rc}); use --device cpu"
    return None
