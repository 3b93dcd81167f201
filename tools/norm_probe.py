"""Per-layer error probe of MobileNetV2's first training step (tests/user_scripts/mobilenetv2_cifar.py's model,
weights and batch): every parameter gradient of cltorch and of torch float32 against torch float64, as the
distance max|ours - f64| / max|f64|, and the ratio to torch float32's distance (the script's bar is 4x).

Usage: python tools/norm_probe.py [--all] [--filter SUBSTR] [--pin] [--no-inplace]
Prints the layers whose ratio exceeds 2 (all with --all), worst first. --pin makes torch's ReLU6 gradient masks
follow cltorch's: a pre-activation within rounding distance of 0 or 6 can take either branch, and one such flip
moves every gradient below it (session 7: the stripe-sum kernels of 2dee233 flipped one element of
features.13.conv.0's ReLU6, f64 value 3.8e-6; pinned, every gradient is within 2.5x torch float32). BatchNorm bias
gradients are sum(g) over
N*H*W, ~0 when the following layers' gradients have zero mean (the near-zero sums)."""
import argparse
import runpy
import sys
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _load_script():
    """build() and the batches of the user script, without running its training loop."""
    src = (ROOT / "tests/user_scripts/mobilenetv2_cifar.py").read_text()
    head = src.split("torch.manual_seed(0)")[0]
    mod = types.ModuleType("mnv2")
    exec(compile(head, "mobilenetv2_cifar.py", "exec"), mod.__dict__)
    return mod


def first_step(lib, build, init_state, batch, device=None, dtype=None, inplace=True, masks=None):
    """Parameter gradients of one step. masks: None, or a dict that a cltorch run fills with each ReLU6's branch
    mask (0 < x < 6) and a torch run then follows (the gradient passes exactly where cltorch's did)."""
    m = build(lib.nn)
    for name, mm in m.named_modules():
        if isinstance(mm, lib.nn.ReLU6):
            mm.inplace = inplace if device is not None else False
            if masks is not None and device is not None:
                mm.register_forward_hook(lambda mo, i, o, n=name: masks.__setitem__(
                    n, ((o > 0) & (o < 6)).cpu().numpy()))
            elif masks is not None:
                mm.register_forward_hook(lambda mo, i, o, n=name: lib.where(lib.from_numpy(masks[n]), i[0],
                                                                            o.detach()))
    m.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in init_state.items()})
    x = lib.from_numpy(batch[0])
    if device is not None:
        m, x = m.to(device), x.to(device)
    else:
        m, x = m.to(dtype), x.to(dtype)
    m.train()
    feats = m.features(x)
    out = m.classifier(lib.nn.functional.adaptive_avg_pool2d(feats, 1).flatten(1))
    lib.nn.functional.cross_entropy(out, lib.from_numpy(batch[1]).to(x.device)).backward()
    return {k: p.grad.cpu().double().numpy() for k, p in m.named_parameters()}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--filter", default="")
    ap.add_argument("--no-inplace", action="store_true", help="cltorch's ReLU6 out of place")
    ap.add_argument("--pin", action="store_true", help="torch's ReLU6 gradient masks follow cltorch's (no flips)")
    args = ap.parse_args(argv)
    import torch as real_torch
    import cltorch
    mod = _load_script()
    cltorch.manual_seed(0)
    model = mod.build(cltorch.nn)
    init_state = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
    batch = mod.batches[0]
    masks = {} if args.pin else None
    g_ours = first_step(cltorch, mod.build, init_state, batch, device=cltorch.device("cl"),
                        inplace=not args.no_inplace, masks=masks)
    g32 = first_step(real_torch, mod.build, init_state, batch, dtype=real_torch.float32, masks=masks)
    g64 = first_step(real_torch, mod.build, init_state, batch, dtype=real_torch.float64, masks=masks)
    rows = []
    for k in g64:
        if args.filter not in k:
            continue
        s = np.abs(g64[k]).max() + 1e-30
        do, d3 = np.abs(g_ours[k] - g64[k]).max(), np.abs(g32[k] - g64[k]).max()
        rows.append((do / (d3 + 1e-30), k, do / s, d3 / s, do, d3))
    rows.sort(reverse=True)
    print("%-32s %9s %10s %10s %10s %10s" % ("param", "ratio", "ours/max", "t32/max", "ours", "t32"))
    for r, k, ro, r3, do, d3 in rows:
        if args.all or r > 2:
            print("%-32s %9.3g %10.3g %10.3g %10.3g %10.3g" % (k, r, ro, r3, do, d3))
    return rows


if __name__ == "__main__":
    main()
