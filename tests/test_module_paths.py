"""Guard: every module path of PyTorch's public API that a script can import also imports under ``cltorch``.

``tests/torch_public_modules.txt`` (written by ``tools/torch_public_modules.py`` from torch 2.13) lists the paths.
``NOT_PROVIDED`` is the one table of paths cltorch deliberately does not provide, each with its reason; an entry
covers the path and everything under it. Every other listed path must import. Paths that other work is building
(amp, cuda.amp, multiprocessing, nn.modules.rnn, nn.utils.rnn, the optimizers) are not in the table: they must exist.
"""
import importlib
import pathlib

import pytest

_QUANT = "quantization is not provided (no quantized dtypes, observers or kernels)"
_NOT_USED = "{} is not used by cltorch (its kernels are OpenCL C from its own templates)"
_CUDA = "CUDA internals: cltorch has no CUDA (cltorch.cuda answers is_available() False; use cltorch.cl)"
_YET = "not provided yet"
_PROF = "profiler event internals: cltorch records no op-level profiler events (see cltorch.profiler)"
_DP = "multi-device DataParallel internals: DataParallel runs on one device here"
_NS = "op namespace not provided yet (the ops cltorch has are at the top level, e.g. cltorch.einsum)"

NOT_PROVIDED = {
    "ao": _QUANT, "quantization": _QUANT, "nn.quantized": _QUANT, "nn.qat": _QUANT, "nn.intrinsic": _QUANT,
    "nn.quantizable": _QUANT, "backends.quantized": _QUANT,
    "autograd.forward_ad": "forward-mode AD is not provided (reverse mode only; autograd.functional.jvp uses the "
                           "double-vjp trick)",
    "autograd.profiler_legacy": _PROF, "autograd.profiler_util": _PROF, "profiler.itt": _PROF,
    "profiler.python_tracer": _PROF,
    "backends.cudnn.rnn": "cuDNN RNN internals (no cuDNN)",
    "backends.cusparselt": _NOT_USED.format("cuSPARSELt"), "backends.kleidiai": _NOT_USED.format("KleidiAI"),
    "backends.mha": "PyTorch's native MHA fast-path switch: cltorch's MultiheadAttention has one path",
    "backends.miopen": _NOT_USED.format("MIOpen"), "backends.nnpack": _NOT_USED.format("NNPACK"),
    "backends.python_native": "PyTorch's Python-native op overrides switch (internal)",
    "backends.xeon": "launcher for Xeon CPUs (a command-line tool)", "backends.xnnpack": _NOT_USED.format("XNNPACK"),
    "contrib": "an empty package in PyTorch",
    "mps": "Apple MPS device module: no MPS here (Apple GPUs are reached through OpenCL)",
    "xpu": "Intel XPU device module: no SYCL here (Intel GPUs are reached through OpenCL)",
    "mtia": "Meta MTIA device module: no such device", "numa": "NUMA binding for PyTorch's launcher",
    "cuda.comm": _CUDA, "cuda.gds": _CUDA, "cuda.graphs": _CUDA, "cuda.green_contexts": _CUDA,
    "cuda.jiterator": _CUDA, "cuda.memory": _CUDA, "cuda.nccl": _CUDA, "cuda.nvtx": _CUDA, "cuda.profiler": _CUDA,
    "cuda.random": _CUDA, "cuda.sparse": _CUDA, "cuda.streams": _CUDA, "cuda.tunable": _CUDA,
    **{"distributions." + m: "distribution " + "needs a gamma sampler (cltorch has no _standard_gamma)" for m in ['beta', 'chi2', 'dirichlet', 'fishersnedecor', 'gamma', 'inverse_gamma', 'studentT', 'wishart', 'lkj_cholesky', 'negative_binomial', 'kumaraswamy']},
    **{"distributions." + m: _YET for m in ['binomial', 'cauchy', 'constraint_registry', 'continuous_bernoulli', 'generalized_pareto', 'geometric', 'gumbel', 'half_cauchy', 'half_normal', 'logistic_normal', 'lowrank_multivariate_normal', 'mixture_same_family', 'multinomial', 'pareto', 'relaxed_bernoulli', 'relaxed_categorical', 'von_mises', 'weibull']},
    "export": "graph capture (torch.export) is not provided", "fx": "graph capture (torch.fx) is not provided",
    "package": "torch.package archives are not provided",
    "library": "custom-op registration into PyTorch's dispatcher (use cltorch.autograd.Function)",
    "nested": "nested tensors are not provided", "masked": "masked tensors are not provided",
    "sparse": "sparse tensors are not provided", "overrides": "__torch_function__ overrides are not provided",
    "futures": "TorchScript/RPC futures are not provided", "monitor": "PyTorch's event-monitoring hooks",
    "signal": _NS, "functional": _NS,
    "quasirandom": "Sobol engine not provided yet", "return_types": "named-tuple return types module (internal)",
    "storage": "typed/untyped storage classes are not public API here", "torch_version": "internal version class",
    "nn.attention.bias": "cltorch.nn.attention is one module (sdpa_kernel, SDPBackend); causal bias objects not "
                         "provided", "nn.attention.experimental": "experimental attention APIs",
    "nn.attention.flex_attention": "flex attention needs graph compilation", "nn.attention.varlen": _YET,
    "nn.backends": "internal", "nn.cpp": "C++ module wrappers",
    "nn.parallel.comm": _DP, "nn.parallel.parallel_apply": _DP, "nn.parallel.replicate": _DP,
    "nn.parallel.scatter_gather": _DP,
    "nn.utils.memory_format": _YET,
    "utils.backcompat": "internal", "utils.backend_registration": "PyTorch's privateuse1 backend registration",
    "utils.benchmark": _YET + ": timing utilities", "utils.bundled_inputs": "TorchScript bundled inputs",
    "utils.collect_env": "PyTorch's environment report script", "utils.cpp_backtrace": "C++ backtraces",
    "utils.cpp_extension": "C++/CUDA extensions cannot be built into cltorch",
    "utils.data.backward_compatibility": "internal", "utils.data.datapipes": "DataPipes (deprecated in PyTorch)",
    "utils.data.graph": "DataPipe graphs", "utils.data.graph_settings": "DataPipe graphs",
    "utils.debug_log": "internal", "utils.deterministic": "internal", "utils.dlpack": _YET + ": DLPack exchange",
    "utils.file_baton": "internal build lock", "utils.flop_counter": "needs op-level dispatch hooks",
    "utils.jit": "TorchScript internals", "utils.mkldnn": _NOT_USED.format("oneDNN"),
    "utils.mobile_optimizer": "TorchScript mobile", "utils.module_tracker": "needs op-level dispatch hooks",
    "utils.serialization": "internal", "utils.show_pickle": "TorchScript archive inspector",
    "utils.throughput_benchmark": "TorchScript benchmark", "utils.weak": "internal",
}

_LIST = pathlib.Path(__file__).with_name("torch_public_modules.txt")
PATHS = [ln.strip() for ln in _LIST.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def _rest(path):
    return path[len("torch."):] if path != "torch" else ""


def _not_provided(rest):
    return any(rest == k or rest.startswith(k + ".") for k in NOT_PROVIDED)


@pytest.mark.parametrize("path", [p for p in PATHS if not _not_provided(_rest(p))])
def test_module_path_imports(path):
    importlib.import_module("cltorch" + path[len("torch"):])


def test_table_entries_are_real_and_current():
    """Every table entry names a listed torch path, and none of them imports (else the entry is stale)."""
    rests = {_rest(p) for p in PATHS}
    unknown = [k for k in NOT_PROVIDED if k not in rests]
    assert not unknown, f"NOT_PROVIDED names paths torch does not list: {unknown}"
    stale = []
    for k in NOT_PROVIDED:
        try:
            importlib.import_module("cltorch." + k)
        except ImportError:
            continue
        stale.append(k)
    assert not stale, f"these now import; remove them from NOT_PROVIDED: {stale}"
