"""Chain probe: every BatchNorm2d's input, output, output gradient and input gradient in MobileNetV2's first step
(tests/user_scripts/mobilenetv2_cifar.py), cltorch and torch float32 against torch float64, in forward order.
Prints per layer: max|a - f64| / max|f64| for cltorch and torch float32. Usage: python tools/norm_probe_chain.py"""
import numpy as np

from norm_probe import _load_script


def run(lib, build, init_state, batch, device=None, dtype=None):
    m = build(lib.nn)
    m.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in init_state.items()})
    for mm in m.modules():
        if isinstance(mm, lib.nn.ReLU6):
            mm.inplace = False
    x = lib.from_numpy(batch[0])
    m, x = (m.to(device), x.to(device)) if device is not None else (m.to(dtype), x.to(dtype))
    m.train()
    cap = {}
    np_ = lambda t: t.detach().cpu().double().numpy()
    for name, mm in m.named_modules():
        if isinstance(mm, lib.nn.BatchNorm2d):
            mm.register_forward_hook(lambda mo, i, o, n=name: cap.setdefault(n, {}).update(x=np_(i[0]), y=np_(o)))
            mm.register_full_backward_hook(lambda mo, gi, go, n=name: cap[n].update(g=np_(go[0]), gi=np_(gi[0])))
    feats = m.features(x)
    out = m.classifier(lib.nn.functional.adaptive_avg_pool2d(feats, 1).flatten(1))
    lib.nn.functional.cross_entropy(out, lib.from_numpy(batch[1]).to(x.device)).backward()
    return cap


def main():
    import torch as real_torch
    import cltorch
    mod = _load_script()
    cltorch.manual_seed(0)
    init_state = {k: v.detach().cpu().numpy().copy() for k, v in mod.build(cltorch.nn).state_dict().items()}
    b = mod.batches[0]
    ours = run(cltorch, mod.build, init_state, b, device=cltorch.device("cl"))
    t32 = run(real_torch, mod.build, init_state, b, dtype=real_torch.float32)
    t64 = run(real_torch, mod.build, init_state, b, dtype=real_torch.float64)
    print("%-20s | %-19s | %-19s | %-19s | %-19s" % ("layer (ours t32)", "x", "y", "grad_out", "grad_in"))
    for n in t64:
        row = []
        for k in ("x", "y", "g", "gi"):
            ref = t64[n][k]
            s = np.abs(ref).max() + 1e-30
            row.append("%9.3g %9.3g" % (np.abs(ours[n][k] - ref).max() / s, np.abs(t32[n][k] - ref).max() / s))
        print("%-20s | %s" % (n, " | ".join(row)))


if __name__ == "__main__":
    main()
