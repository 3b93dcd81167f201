"""``cltorch.backends``: PyTorch's ``torch.backends`` flags, so that scripts' first lines run.

Each submodule is importable as in PyTorch (``import cltorch.backends.cudnn as cudnn``) and is also an attribute
of this package (``cltorch.backends.cudnn.benchmark = True``).

The flags are accepted and change nothing: cltorch has no cuDNN, CUDA, MPS, oneDNN or MKL. They are plain
module attributes that keep what a script sets, so a script that reads back its own setting sees it. The
libraries' ``is_available()`` answer False; ``opencl.is_available()`` reports cltorch's own OpenCL runtime.
"""
from . import cudnn, cuda, mps, mkldnn, mkl, openmp, opt_einsum, cpu, opencl  # noqa: F401

__all__ = ["cudnn", "cuda", "mps", "mkldnn", "mkl", "openmp", "opt_einsum", "cpu", "opencl"]
