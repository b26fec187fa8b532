"""What MKL (linked into torch's CPU wheel) decided on this CPU: its reproducibility branch (as
set by MKL_CBWR), its CPU detection, whether it thinks the CPU is Intel, and ATen's capability.

    MKL_CBWR=COMPATIBLE python notes/cpu_probe/mklprobe.py
"""

import ctypes
import os

import torch


def call(lib: ctypes.CDLL, name: str, *args: int) -> int:
    fn = getattr(lib, name)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int] * len(args)
    return fn(*args)


lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
print("cbwr branch", call(lib, "mkl_serv_cbwr_get", 1), "all", call(lib, "mkl_serv_cbwr_get", -1))
print("cbwr auto branch", call(lib, "mkl_serv_cbwr_get_auto_branch"))
print("cpu_detect", call(lib, "mkl_serv_cpu_detect"))
print("intel_cpu", call(lib, "mkl_serv_intel_cpu"))
print("aten capability", torch.backends.cpu.get_cpu_capability())
