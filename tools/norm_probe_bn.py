"""Isolated BatchNorm probe: every BatchNorm2d of MobileNetV2's first step (tests/user_scripts/mobilenetv2_cifar.py),
fed the input and output gradient torch float64 sees there (rounded to float32), run alone in cltorch, torch float32
and torch float64 (on the same float32 values); prints each layer's y, grad_input, grad_weight, grad_bias distance
from float64 (max abs over max |f64|) for cltorch and torch float32. Usage: python tools/norm_probe_bn.py"""
import numpy as np

from norm_probe import _load_script


def main():
    import torch as real_torch
    import cltorch
    mod = _load_script()
    cltorch.manual_seed(0)
    init_state = {k: v.detach().cpu().numpy().copy() for k, v in mod.build(cltorch.nn).state_dict().items()}
    m = mod.build(real_torch.nn)
    m.load_state_dict({k: real_torch.from_numpy(v.copy()) for k, v in init_state.items()})
    m = m.double().train()
    for mm in m.modules():
        if isinstance(mm, real_torch.nn.ReLU6):
            mm.inplace = False      # the backward hooks need the BatchNorm outputs unmodified (same values)
    cap = {}
    for name, mm in m.named_modules():
        if isinstance(mm, real_torch.nn.BatchNorm2d):
            mm.register_forward_hook(lambda mo, i, o, n=name: cap.setdefault(n, {}).update(x=i[0].detach().numpy()))
            mm.register_full_backward_hook(lambda mo, gi, go, n=name: cap[n].update(g=go[0].detach().numpy()))
    feats = m.features(real_torch.from_numpy(mod.batches[0][0]).double())
    out = m.classifier(real_torch.nn.functional.adaptive_avg_pool2d(feats, 1).flatten(1))
    real_torch.nn.functional.cross_entropy(out, real_torch.from_numpy(mod.batches[0][1])).backward()
    print("%-20s %-16s | %-9s %9s | %-9s %9s | %-9s %9s | %-9s %9s" % ("layer", "shape", "y", "t32", "gi", "t32", "gw",
                                                                     "t32", "gb/|g|", "t32"))
    for name, d in cap.items():
        x32, g32 = d["x"].astype(np.float32), d["g"].astype(np.float32)
        res = {}
        for lib, dt, key in ((real_torch, real_torch.float64, "64"), (real_torch, real_torch.float32, "32"),
                             (cltorch, None, "cl")):
            if dt is not None:
                x = lib.from_numpy(x32).to(dt).requires_grad_()
                g = lib.from_numpy(g32).to(dt)
                w = lib.ones(x.shape[1], dtype=dt, requires_grad=True)
                b = lib.zeros(x.shape[1], dtype=dt, requires_grad=True)
            else:
                dev = cltorch.device("cl")
                x = lib.from_numpy(x32).to(dev).requires_grad_()
                g = lib.from_numpy(g32).to(dev)
                w = lib.ones(x.shape[1], device=dev, requires_grad=True)
                b = lib.zeros(x.shape[1], device=dev, requires_grad=True)
            y = lib.nn.functional.batch_norm(x, None, None, w, b, training=True)
            y.backward(g)
            res[key] = [t.detach().cpu().double().numpy() for t in (y, x.grad, w.grad, b.grad)]
        row = []
        for i in range(4):
            ref = res["64"][i]
            s = np.abs(ref).max() + 1e-30
            if i == 3:      # gb ~ 0: relative to sum |g| per channel
                s = np.abs(g32.astype(np.float64)).sum((0, 2, 3)).max()
            row += [np.abs(res["cl"][i] - ref).max() / s, np.abs(res["32"][i] - ref).max() / s]
        print("%-20s %-16s | " % (name, tuple(x32.shape)) + " | ".join("%9.3g %9.3g" % tuple(row[2 * i:2 * i + 2])
                                                                       for i in range(4)))


if __name__ == "__main__":
    main()
