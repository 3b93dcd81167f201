"""Writes ``tests/torch_public_modules.txt``: the module paths of PyTorch's public API that a script can import.

Run once against the installed torch (a test-only oracle), with ``python tools/torch_public_modules.py``; the
list is checked in so the guard test (``tests/test_module_paths.py``) needs no torch.

The walk reads torch's package folders with ``pkgutil.iter_modules`` (nothing is imported) and keeps every module
whose dotted path has no ``_``-prefixed component. Two kinds of tree are then pruned:

- ``DROP``: implementation trees no script imports (build tools, code generators, generated opset tables); the path
  and everything under it is left out.
- ``ROOT_ONLY``: public trees that are one feature (quantization, fx, export, the distributed stack, ONNX's
  exporter internals, ...); only their root is listed, so the guard checks the entry point a script imports
  (``import torch.distributed as dist``) without listing hundreds of files behind it.
"""
import os
import pathlib
import pkgutil
import sys

DROP = {
    "torch.utils.hipify": "build tool converting CUDA sources to HIP",
    "torch.utils.model_dump": "TorchScript model inspector (web UI)",
    "torch.utils.viz": "memory-snapshot visualiser for CUDA",
    "torch.utils.bottleneck": "command-line profiler front end",
    "torch.onnx.symbolic_opset7": "", "torch.nativert": "native runtime for exported programs",
    "torch.csrc": "C++ sources", "torch.include": "C++ headers", "torch.share": "CMake files",
    "torch.test": "", "torch.bin": "", "torch.lib": "",
}
for _v in range(7, 21):
    DROP[f"torch.onnx.symbolic_opset{_v}"] = "TorchScript-ONNX opset tables (exporter internals)"

ROOT_ONLY = [
    "torch.ao", "torch.quantization", "torch.nn.quantized", "torch.nn.qat", "torch.nn.intrinsic",
    "torch.nn.quantizable", "torch.fx", "torch.export", "torch.package", "torch.distributed", "torch.onnx",
    "torch.jit", "torch.utils.benchmark", "torch.masked", "torch.compiler", "torch.mtia", "torch.numa",
    "torch.utils.data.datapipes", "torch.utils.serialization", "torch.utils.jit", "torch.backends.xeon",
    "torch.nn.backends", "torch.accelerator", "torch.xpu", "torch.mps", "torch.cpu", "torch.signal",
]


def walk(path, prefix, out):
    for m in pkgutil.iter_modules([path]):
        if m.name.startswith("_"):
            continue
        name = f"{prefix}.{m.name}"
        if any(name == d or name.startswith(d + ".") for d in DROP):
            continue
        if any(name.startswith(r + ".") for r in ROOT_ONLY):
            continue
        out.append(name)
        if m.ispkg:
            walk(os.path.join(path, m.name), name, out)


def main():
    import importlib.util
    spec = importlib.util.find_spec("torch")
    if spec is None:
        sys.exit("torch is not installed (it is the test-only oracle: pip install torch)")
    root = os.path.dirname(spec.origin)
    from importlib.metadata import version
    out = ["torch"]
    walk(root, "torch", out)
    dest = pathlib.Path(__file__).resolve().parents[1] / "tests" / "torch_public_modules.txt"
    header = (f"# PyTorch {version('torch')}'s public module paths a script can import, written by "
              f"tools/torch_public_modules.py (see its docstring for what is pruned). One path a line.\n")
    dest.write_text(header + "\n".join(sorted(out)) + "\n")
    print(f"{len(out)} paths -> {dest}")


if __name__ == "__main__":
    main()
