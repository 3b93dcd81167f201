"""Writes the golden checkpoints that tests/test_serialization.py loads without torch.

Run once, with torch 2.13 (and numpy) installed, from the repository root:

    python tests/golden/make_golden_pt.py

It writes, next to this script:

- ``golden_v1.pt``: ``torch.save`` of a state-dict-like object (default settings): float32, float64,
  float16, int64, int32, int16, int8, uint8 and bool tensors, two non-contiguous views that share storage
  with other entries, a 0-d tensor, an empty tensor, a Parameter, a tensor that requires grad, nested
  dict/list/tuple, an ``nn.Module`` state dict (an OrderedDict with ``_metadata``) and an Adam optimizer
  state dict after one step;
- ``golden_p4.pt``: a small object saved with ``pickle_protocol=4`` (other pickle opcodes);
- ``golden_cuda.pt``: a small object whose storages torch tagged with the location ``cuda:0``;
- ``golden_legacy.pt``: a small object in torch's legacy (pre-1.6, non-zip) format, which cltorch refuses;
- ``golden_v1.npz``: every tensor's values, keyed by its path in the object (``nested/list/0``);
- ``golden_v1.json``: the object's skeleton: per tensor its dtype, shape, stride, storage offset,
  requires_grad, class and storage key; other leaves as values.
"""
import collections
import json
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def build():
    torch.manual_seed(0)
    f32 = torch.randn(3, 4)
    f64 = torch.randn(6, dtype=torch.float64)
    lin = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    opt = torch.optim.Adam(lin.parameters(), lr=1e-3, betas=(0.9, 0.99))
    lin(torch.randn(4, 3)).square().sum().backward()
    opt.step()
    obj = collections.OrderedDict()
    obj["f32"] = f32
    obj["f64"] = f64
    obj["f16"] = torch.randn(5).half()
    obj["i64"] = torch.arange(-3, 4)
    obj["i32"] = torch.tensor([2 ** 31 - 1, -2 ** 31, 7], dtype=torch.int32)
    obj["i16"] = torch.tensor([-32768, 12, 32767], dtype=torch.int16)
    obj["i8"] = torch.tensor([-128, 0, 127], dtype=torch.int8)
    obj["u8"] = torch.arange(250, 256, dtype=torch.uint8).reshape(2, 3)
    obj["bool"] = torch.tensor([True, False, True, True])
    obj["view_t"] = f32.t()                 # non-contiguous view of f32's storage
    obj["view_step"] = f64[1::2]            # offset 1, stride 2 into f64's storage
    obj["scalar0d"] = torch.tensor(3.25)
    obj["empty"] = torch.zeros(0, 3)
    obj["param"] = torch.nn.Parameter(torch.randn(2, 2))
    obj["grad_leaf"] = torch.randn(2).requires_grad_()
    obj["nested"] = {
        "list": [torch.randn(2, 2), 1, "a", (2.5, None)],
        "tuple": (torch.tensor([5, 6]), True, -7),
        "deep": {"x": [{"y": torch.tensor([[1.5]])}]},
        "bigint": 2 ** 70,
        "bytes": b"\x00\xff",
    }
    obj["module"] = lin.state_dict()
    obj["optim"] = opt.state_dict()
    obj["dtype"] = torch.float16
    obj["device"] = torch.device("cpu")
    obj["size"] = torch.Size([2, 3])
    return obj


def skeleton(x, path, arrays, keys):
    if isinstance(x, torch.Tensor):
        arrays[path] = x.detach().numpy()
        st = x.untyped_storage()
        return {"tensor": True, "cls": type(x).__name__, "dtype": str(x.dtype).replace("torch.", ""),
                "shape": list(x.shape), "stride": list(x.stride()), "offset": x.storage_offset(),
                "requires_grad": x.requires_grad, "storage": keys.setdefault(st.data_ptr(), len(keys))}
    if isinstance(x, dict):
        items = [[k, skeleton(v, f"{path}/{k}", arrays, keys)] for k, v in x.items()]
        return {"dict": type(x).__name__, "items": items,
                "attrs": {k: v for k, v in vars(x).items()} if type(x) is collections.OrderedDict else {}}
    if isinstance(x, torch.Size):
        return {"size": list(x)}
    if isinstance(x, (list, tuple)):
        return {type(x).__name__: [skeleton(v, f"{path}/{i}", arrays, keys) for i, v in enumerate(x)]}
    if isinstance(x, torch.dtype):
        return {"torch_dtype": str(x).replace("torch.", "")}
    if isinstance(x, torch.device):
        return {"torch_device": str(x)}
    if isinstance(x, bytes):
        return {"bytes": list(x)}
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) > 2 ** 53:
        return {"bigint": str(x)}
    return {"value": x}


def main():
    print("torch", torch.__version__)
    obj = build()
    torch.save(obj, os.path.join(HERE, "golden_v1.pt"))
    arrays, keys = {}, {}
    skel = skeleton(obj, "", arrays, keys)
    np.savez(os.path.join(HERE, "golden_v1.npz"), **{k.lstrip("/"): v for k, v in arrays.items()})
    with open(os.path.join(HERE, "golden_v1.json"), "w") as f:
        json.dump({"torch": torch.__version__, "skeleton": skel}, f, indent=1, sort_keys=True)

    small = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "n": [1, "x"]}
    torch.save(small, os.path.join(HERE, "golden_p4.pt"), pickle_protocol=4)
    torch.save(small, os.path.join(HERE, "golden_legacy.pt"), _use_new_zipfile_serialization=False)

    # storages tagged 'cuda:0', as a GPU machine would write them (tagger registered first in priority)
    torch.serialization.register_package(-100, lambda s: "cuda:0", lambda s, loc: None)
    torch.save(small, os.path.join(HERE, "golden_cuda.pt"))
    for n in sorted(os.listdir(HERE)):
        print(n, os.path.getsize(os.path.join(HERE, n)))


if __name__ == "__main__":
    main()
