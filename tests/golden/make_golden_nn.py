"""Make ``tests/golden/nn_golden.npz``: outputs and gradients of PyTorch 2.13's nn layers, for cltorch's tests.

Run once, with PyTorch installed (not needed by the tests):

    /tmp/torchvenv/bin/python tests/golden/make_golden_nn.py

``CASES`` below is the single description of every case; the tests (``tests/test_nn_golden.py``) import it
from this file (this module imports torch only inside ``main``) and build the same layer from cltorch.nn.

For each case the script builds ``torch.nn.<cls>(*args, **kwargs)``, perturbs its parameters (so ones/zeros
initialisations still test the affine terms) and, if asked, its buffers, draws the inputs with numpy, runs
``steps`` forwards in train or eval mode, and stores the state dict BEFORE the forwards (the tests load it
with ``load_state_dict``, which also checks PyTorch's key names), the inputs, the outputs, the buffers
after the forwards, and the gradients of ``sum(out_i * gout_i)`` with respect to every float input and
every parameter.

Keys in the npz: ``<case>|<kind>|<name>`` with kind in sd (state dict), in (positional inputs, by index),
kw (keyword tensor inputs), out (outputs, by index), buf (buffers after), gout, gin, gkw, gparam.
"""
import os

import numpy as np

# name: dict(cls, args, kwargs, inputs=[spec...], kw={name: spec}, call={non-tensor kwargs}, train, steps,
#            perturb_buffers, grad (indices of inputs that require grad, see grad_inputs), weight/pos_weight
#            (spec of a tensor passed to the constructor), self_attention (query = key = value), build, rtol, atol)
# input spec: (kind, shape[, extra]); kinds:
#   f: N(0, 1) float32; fk: floats on a grid that includes the activation kinks (0, +-1, +-3, 6, ...);
#   i: int64 in [0, extra); b: bool with P(True) = extra; u: U(0.05, 0.95) float32; pm1: +-1 float32;
#   prob: rows (last dim) summing to 1; logp: log of such rows; bin: {0, 1} float32; pos: U(0.5, 2) float32
KINKS = [-4.0, -3.0, -2.5, -1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.5, 6.0, 7.0, -0.75]

CASES = {
    # ---------------------------------------------------------------- core
    "linear": dict(cls="Linear", args=(5, 3), inputs=[("f", (4, 5))]),
    "linear_3d_nobias": dict(cls="Linear", args=(4, 6), kwargs=dict(bias=False), inputs=[("f", (2, 3, 4))]),
    "bilinear": dict(cls="Bilinear", args=(3, 4, 2), inputs=[("f", (5, 3)), ("f", (5, 4))]),
    "conv1d": dict(cls="Conv1d", args=(3, 4, 3), kwargs=dict(stride=2, padding=1), inputs=[("f", (2, 3, 9))]),
    "conv1d_reflect": dict(cls="Conv1d", args=(2, 3, 3), kwargs=dict(padding=1, padding_mode="reflect"),
                           inputs=[("f", (2, 2, 7))]),
    "conv2d": dict(cls="Conv2d", args=(3, 4, 3), kwargs=dict(padding=1), inputs=[("f", (2, 3, 6, 5))]),
    "conv2d_groups_dilation": dict(cls="Conv2d", args=(4, 6, 3), kwargs=dict(padding=2, dilation=2, groups=2),
                                   inputs=[("f", (2, 4, 7, 6))]),
    "conv2d_same": dict(cls="Conv2d", args=(2, 3, (3, 2)), kwargs=dict(padding="same"), inputs=[("f", (1, 2, 5, 6))]),
    "conv2d_stride_nobias": dict(cls="Conv2d", args=(3, 2, (2, 3)), kwargs=dict(stride=(2, 1), bias=False),
                                 inputs=[("f", (2, 3, 7, 6))]),
    "convt2d": dict(cls="ConvTranspose2d", args=(3, 2, 3), kwargs=dict(stride=2, padding=1, output_padding=1),
                    inputs=[("f", (2, 3, 4, 4))]),
    "convt2d_output_size": dict(cls="ConvTranspose2d", args=(2, 4, 3), kwargs=dict(stride=2, groups=2),
                                inputs=[("f", (1, 2, 3, 5))], call=dict(output_size=[8, 12])),
    "maxpool2d": dict(cls="MaxPool2d", args=(3,), kwargs=dict(stride=2, padding=1, ceil_mode=True),
                      inputs=[("f", (2, 3, 7, 7))]),
    "maxpool2d_plain": dict(cls="MaxPool2d", args=(2,), inputs=[("f", (2, 2, 6, 5))]),
    "avgpool2d": dict(cls="AvgPool2d", args=(3,), kwargs=dict(stride=2, padding=1, count_include_pad=False),
                      inputs=[("f", (2, 3, 7, 6))]),
    "avgpool2d_incl": dict(cls="AvgPool2d", args=(2,), kwargs=dict(padding=1), inputs=[("f", (1, 2, 5, 5))]),
    "adaptiveavgpool2d": dict(cls="AdaptiveAvgPool2d", args=((3, 2),), inputs=[("f", (2, 3, 7, 5))]),
    "adaptiveavgpool2d_1": dict(cls="AdaptiveAvgPool2d", args=(1,), inputs=[("f", (2, 4, 3, 3))]),
    # ---------------------------------------------------------------- normalisation
    "batchnorm1d_train": dict(cls="BatchNorm1d", args=(4,), inputs=[("f", (8, 4))], steps=2),
    "batchnorm1d_3d_train": dict(cls="BatchNorm1d", args=(3,), kwargs=dict(momentum=None),
                                 inputs=[("f", (4, 3, 5))], steps=3),
    "batchnorm1d_eval": dict(cls="BatchNorm1d", args=(4,), inputs=[("f", (6, 4))], train=False,
                             perturb_buffers=True),
    "batchnorm2d_train": dict(cls="BatchNorm2d", args=(3,), kwargs=dict(momentum=0.3),
                              inputs=[("f", (4, 3, 5, 5))], steps=2),
    "batchnorm2d_eval": dict(cls="BatchNorm2d", args=(3,), inputs=[("f", (2, 3, 4, 4))], train=False,
                             perturb_buffers=True),
    "batchnorm2d_nostats": dict(cls="BatchNorm2d", args=(3,), kwargs=dict(track_running_stats=False, affine=False),
                                inputs=[("f", (3, 3, 2, 2))], train=False),
    "layernorm": dict(cls="LayerNorm", args=((3, 4),), inputs=[("f", (2, 3, 4))]),
    "layernorm_nobias": dict(cls="LayerNorm", args=(5,), kwargs=dict(eps=1e-3, bias=False), inputs=[("f", (3, 5))]),
    "groupnorm": dict(cls="GroupNorm", args=(2, 6), inputs=[("f", (3, 6, 4))]),
    "rmsnorm": dict(cls="RMSNorm", args=(5,), inputs=[("f", (3, 5))]),
    "rmsnorm_eps": dict(cls="RMSNorm", args=((2, 3),), kwargs=dict(eps=0.1), inputs=[("f", (4, 2, 3))]),
    # ---------------------------------------------------------------- embedding
    "embedding": dict(cls="Embedding", args=(10, 4), kwargs=dict(padding_idx=2), inputs=[("i", (3, 5), 10)]),
    # ---------------------------------------------------------------- activations (inputs include the kinks)
    "relu": dict(cls="ReLU", inputs=[("fk", (2, 16))]),
    "relu6": dict(cls="ReLU6", inputs=[("fk", (2, 16))]),
    "leakyrelu": dict(cls="LeakyReLU", args=(0.2,), inputs=[("fk", (2, 16))]),
    "elu": dict(cls="ELU", args=(0.7,), inputs=[("fk", (2, 16))]),
    "celu": dict(cls="CELU", args=(1.5,), inputs=[("fk", (2, 16))]),
    "selu": dict(cls="SELU", inputs=[("fk", (2, 16))]),
    "gelu": dict(cls="GELU", inputs=[("fk", (2, 16))]),
    "gelu_tanh": dict(cls="GELU", kwargs=dict(approximate="tanh"), inputs=[("fk", (2, 16))]),
    "silu": dict(cls="SiLU", inputs=[("fk", (2, 16))]),
    "mish": dict(cls="Mish", inputs=[("fk", (2, 16))]),
    "tanh": dict(cls="Tanh", inputs=[("fk", (2, 16))]),
    "sigmoid": dict(cls="Sigmoid", inputs=[("fk", (2, 16))]),
    "softplus": dict(cls="Softplus", kwargs=dict(beta=2.0, threshold=5.0), inputs=[("fk", (2, 16))]),
    "hardtanh": dict(cls="Hardtanh", args=(-0.5, 1.5), inputs=[("fk", (2, 16))]),
    "hardsigmoid": dict(cls="Hardsigmoid", inputs=[("fk", (2, 16))]),
    "hardswish": dict(cls="Hardswish", inputs=[("fk", (2, 16))]),
    "softsign": dict(cls="Softsign", inputs=[("fk", (2, 16))]),
    "tanhshrink": dict(cls="Tanhshrink", inputs=[("fk", (2, 16))]),
    "logsigmoid": dict(cls="LogSigmoid", inputs=[("fk", (2, 16))]),
    "softshrink": dict(cls="Softshrink", args=(0.5,), inputs=[("fk", (2, 16))]),
    "hardshrink": dict(cls="Hardshrink", args=(1.0,), inputs=[("fk", (2, 16))]),
    "threshold": dict(cls="Threshold", args=(0.25, -2.0), inputs=[("fk", (2, 16))]),
    "prelu": dict(cls="PReLU", args=(3,), inputs=[("f", (2, 3, 4))]),
    "glu": dict(cls="GLU", args=(1,), inputs=[("f", (3, 4, 2))]),
    "softmax": dict(cls="Softmax", kwargs=dict(dim=1), inputs=[("f", (3, 5, 2))]),
    "logsoftmax": dict(cls="LogSoftmax", kwargs=dict(dim=-1), inputs=[("f", (3, 5))]),
    "softmin": dict(cls="Softmin", kwargs=dict(dim=0), inputs=[("f", (4, 3))]),
    # ---------------------------------------------------------------- shape
    "upsample_nearest": dict(cls="Upsample", kwargs=dict(scale_factor=2, mode="nearest"),
                             inputs=[("f", (1, 2, 3, 4))]),
    "upsample_bilinear": dict(cls="Upsample", kwargs=dict(size=(5, 7), mode="bilinear"),
                              inputs=[("f", (2, 1, 3, 4))]),
    "upsample_bilinear_ac": dict(cls="Upsample", kwargs=dict(scale_factor=2, mode="bilinear", align_corners=True),
                                 inputs=[("f", (1, 2, 3, 3))]),
    "pixelshuffle": dict(cls="PixelShuffle", args=(2,), inputs=[("f", (2, 8, 2, 3))]),
    "pixelunshuffle": dict(cls="PixelUnshuffle", args=(2,), inputs=[("f", (1, 2, 4, 6))]),
    "channelshuffle": dict(cls="ChannelShuffle", args=(3,), inputs=[("f", (2, 6, 2, 2))]),
    "unfold": dict(cls="Unfold", args=((2, 3),), kwargs=dict(dilation=(1, 2), padding=1, stride=(2, 1)),
                   inputs=[("f", (2, 3, 5, 6))]),
    "unfold_unbatched": dict(cls="Unfold", args=(2,), inputs=[("f", (2, 4, 3))]),
    # ---------------------------------------------------------------- attention and transformers
    "mha_self_masks": dict(cls="MultiheadAttention", args=(8, 2), inputs=[("f", (5, 3, 8))], self_attention=True,
                           kw=dict(key_padding_mask=("kpm", (3, 5)), attn_mask=("b", (5, 5), 0.2))),
    "mha_cross_heads": dict(cls="MultiheadAttention", args=(8, 4), inputs=[("f", (4, 2, 8)), ("f", (6, 2, 8)),
                                                                           ("f", (6, 2, 8))],
                            call=dict(average_attn_weights=False), kw=dict(attn_mask=("f", (4, 6)))),
    "mha_batch_first_noweights": dict(cls="MultiheadAttention", args=(6, 3), kwargs=dict(batch_first=True),
                                      inputs=[("f", (2, 4, 6)), ("f", (2, 5, 6)), ("f", (2, 5, 6))],
                                      call=dict(need_weights=False), kw=dict(key_padding_mask=("kpm", (2, 5)))),
    "mha_kdim_vdim": dict(cls="MultiheadAttention", args=(8, 2), kwargs=dict(kdim=5, vdim=3, bias=False),
                          inputs=[("f", (3, 2, 8)), ("f", (4, 2, 5)), ("f", (4, 2, 3))]),
    "mha_unbatched": dict(cls="MultiheadAttention", args=(4, 2), inputs=[("f", (3, 4)), ("f", (5, 4)),
                                                                         ("f", (5, 4))]),
    "mha_bias_kv_zero_attn": dict(cls="MultiheadAttention", args=(4, 2), kwargs=dict(add_bias_kv=True,
                                                                                      add_zero_attn=True),
                                  inputs=[("f", (3, 2, 4)), ("f", (5, 2, 4)), ("f", (5, 2, 4))],
                                  kw=dict(key_padding_mask=("kpm", (2, 5)))),
    "encoder_layer": dict(cls="TransformerEncoderLayer", args=(8, 2), kwargs=dict(dim_feedforward=16, dropout=0.0),
                          inputs=[("f", (5, 3, 8))], kw=dict(src_key_padding_mask=("kpm", (3, 5)))),
    "encoder_layer_prenorm_gelu": dict(cls="TransformerEncoderLayer", args=(8, 4),
                                       kwargs=dict(dim_feedforward=12, dropout=0.0, norm_first=True,
                                                   activation="gelu", batch_first=True),
                                       inputs=[("f", (2, 5, 8))], kw=dict(src_mask=("causal", (5, 5)))),
    "encoder": dict(cls="TransformerEncoder", build="encoder", inputs=[("f", (4, 2, 8))],
                    kw=dict(mask=("causal", (4, 4))), call=dict(is_causal=True)),
    "decoder_layer": dict(cls="TransformerDecoderLayer", args=(8, 2), kwargs=dict(dim_feedforward=16, dropout=0.0),
                          inputs=[("f", (4, 2, 8)), ("f", (5, 2, 8))],
                          kw=dict(tgt_mask=("causal", (4, 4)), memory_key_padding_mask=("kpm", (2, 5)))),
    "decoder_prenorm": dict(cls="TransformerDecoder", build="decoder", inputs=[("f", (2, 4, 8)), ("f", (2, 3, 8))],
                            kw=dict(tgt_mask=("causal", (4, 4)))),
    # ---------------------------------------------------------------- losses
    "mse": dict(cls="MSELoss", inputs=[("f", (4, 3)), ("f", (4, 3))]),
    "mse_none": dict(cls="MSELoss", kwargs=dict(reduction="none"), inputs=[("f", (4, 3)), ("f", (4, 3))]),
    "l1_sum": dict(cls="L1Loss", kwargs=dict(reduction="sum"), inputs=[("f", (5,)), ("f", (5,))]),
    "ce_index": dict(cls="CrossEntropyLoss", inputs=[("f", (6, 4)), ("i", (6,), 4)]),
    "ce_weight_ignore_smooth": dict(cls="CrossEntropyLoss", kwargs=dict(ignore_index=1, label_smoothing=0.1),
                                    weight=("pos", (4,)), inputs=[("f", (6, 4)), ("i", (6,), 4)]),
    "ce_spatial_none": dict(cls="CrossEntropyLoss", kwargs=dict(reduction="none"),
                            inputs=[("f", (2, 3, 4)), ("i", (2, 4), 3)]),
    "ce_prob": dict(cls="CrossEntropyLoss", kwargs=dict(label_smoothing=0.2), inputs=[("f", (4, 3)),
                                                                                    ("prob", (4, 3))]),
    "nll": dict(cls="NLLLoss", weight=("pos", (3,)), inputs=[("logp", (5, 3)), ("i", (5,), 3)]),
    "nll_sum_ignore": dict(cls="NLLLoss", kwargs=dict(reduction="sum", ignore_index=0),
                           inputs=[("logp", (5, 3)), ("i", (5,), 3)]),
    "bce": dict(cls="BCELoss", inputs=[("u", (4, 3)), ("bin", (4, 3))]),
    "bce_weight": dict(cls="BCELoss", weight=("pos", (3,)), kwargs=dict(reduction="sum"),
                       inputs=[("u", (4, 3)), ("u", (4, 3))]),
    "bce_logits": dict(cls="BCEWithLogitsLoss", inputs=[("f", (4, 3)), ("bin", (4, 3))]),
    "bce_logits_posw": dict(cls="BCEWithLogitsLoss", pos_weight=("pos", (3,)), kwargs=dict(reduction="none"),
                            inputs=[("f", (4, 3)), ("u", (4, 3))]),
    "kldiv_batchmean": dict(cls="KLDivLoss", kwargs=dict(reduction="batchmean"),
                            inputs=[("logp", (4, 5)), ("prob", (4, 5))]),
    "kldiv_logtarget": dict(cls="KLDivLoss", kwargs=dict(reduction="sum", log_target=True),
                            inputs=[("logp", (4, 5)), ("logp", (4, 5))]),
    "smoothl1": dict(cls="SmoothL1Loss", kwargs=dict(beta=0.5), inputs=[("f", (4, 3)), ("f", (4, 3))]),
    "huber": dict(cls="HuberLoss", kwargs=dict(delta=0.7, reduction="sum"), inputs=[("f", (4, 3)), ("f", (4, 3))]),
    "poissonnll": dict(cls="PoissonNLLLoss", kwargs=dict(full=True), inputs=[("f", (4, 3)), ("pos", (4, 3))]),
    "gaussiannll": dict(cls="GaussianNLLLoss", grad=(0, 2), inputs=[("f", (4, 3)), ("f", (4, 3)), ("pos", (4, 3))]),
    "marginranking": dict(cls="MarginRankingLoss", kwargs=dict(margin=0.3), grad=(0, 1),
                          inputs=[("f", (6,)), ("f", (6,)), ("pm1", (6,))]),
    "hingeembedding": dict(cls="HingeEmbeddingLoss", inputs=[("f", (6,)), ("pm1", (6,))]),
    "softmargin": dict(cls="SoftMarginLoss", inputs=[("f", (6,)), ("pm1", (6,))]),
    "cosineembedding": dict(cls="CosineEmbeddingLoss", kwargs=dict(margin=0.1), grad=(0, 1),
                            inputs=[("f", (4, 5)), ("f", (4, 5)), ("pm1", (4,))]),
    "tripletmargin": dict(cls="TripletMarginLoss", kwargs=dict(swap=True), grad=(0, 1, 2),
                          inputs=[("f", (4, 5)), ("f", (4, 5)), ("f", (4, 5))]),
    "multilabelsoftmargin": dict(cls="MultiLabelSoftMarginLoss", inputs=[("f", (4, 3)), ("bin", (4, 3))]),
}


def build(nn, name, case):
    """The module of ``case`` from the library ``nn`` (torch.nn or cltorch.nn); same code for both."""
    kind = case.get("build")
    if kind == "encoder":
        layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
        return nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))
    if kind == "decoder":
        layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=12, dropout=0.0, norm_first=True, batch_first=True,
                                           activation="gelu")
        return nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(8))
    return getattr(nn, case["cls"])(*case.get("args", ()), **case.get("kwargs", {}))


def _draw(rng, spec):
    kind, shape = spec[0], spec[1]
    if kind == "f":
        return rng.standard_normal(shape).astype(np.float32)
    if kind == "fk":
        n = int(np.prod(shape))
        vals = np.array((KINKS * (n // len(KINKS) + 1))[:n], dtype=np.float32)
        vals[len(KINKS):] += rng.uniform(-0.1, 0.1, n - len(KINKS)).astype(np.float32) if n > len(KINKS) else 0
        return vals.reshape(shape)
    if kind == "i":
        return rng.integers(0, spec[2], shape).astype(np.int64)
    if kind == "b":
        return rng.random(shape) < spec[2]
    if kind == "kpm":  # key padding: the last keys of each batch row padded (never all keys)
        m = np.zeros(shape, dtype=bool)
        for r in range(shape[0]):
            m[r, shape[1] - 1 - (r % (shape[1] - 1)):] = True
        return m
    if kind == "causal":
        return np.triu(np.ones(shape, dtype=bool), 1)
    if kind == "u":
        return rng.uniform(0.05, 0.95, shape).astype(np.float32)
    if kind == "pos":
        return rng.uniform(0.5, 2.0, shape).astype(np.float32)
    if kind == "pm1":
        return np.where(rng.random(shape) < 0.5, -1.0, 1.0).astype(np.float32)
    if kind == "bin":
        return (rng.random(shape) < 0.5).astype(np.float32)
    if kind in ("prob", "logp"):
        z = rng.standard_normal(shape)
        p = np.exp(z - z.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        return (p if kind == "prob" else np.log(p)).astype(np.float32)
    raise ValueError(kind)


def grad_inputs(case):
    """Indices of the positional inputs that require grad: every float input, except that a loss's target
    (and any input after the first, unless ``grad`` says otherwise) does not."""
    if "grad" in case:
        return tuple(case["grad"])
    n = len(case["inputs"])
    if case["cls"].endswith("Loss"):
        return (0,)
    return tuple(range(n))


def _seed(name):
    return sum((i + 1) * ord(c) for i, c in enumerate(name)) % (2 ** 31)


def main(path=None):
    import torch
    import torch.nn as nn
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_golden.npz")
    out = {}
    for name, case in CASES.items():
        rng = np.random.default_rng(_seed(name))
        torch.manual_seed(_seed(name))
        extra = {}
        for key in ("weight", "pos_weight"):
            if key in case:
                extra[key] = torch.from_numpy(_draw(rng, case[key]))
        if extra:
            m = getattr(nn, case["cls"])(*case.get("args", ()), **case.get("kwargs", {}), **extra)
        else:
            m = build(nn, name, case)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32)) * 0.1)
            if case.get("perturb_buffers"):
                m.running_mean.copy_(torch.from_numpy(rng.standard_normal(tuple(m.running_mean.shape))
                                                      .astype(np.float32)))
                m.running_var.copy_(torch.from_numpy(rng.uniform(0.5, 2.0, tuple(m.running_var.shape))
                                                     .astype(np.float32)))
                m.num_batches_tracked.fill_(7)
        m.train(case.get("train", True))
        for k, v in m.state_dict().items():
            out[f"{name}|sd|{k}"] = v.numpy().copy()
        ins = [_draw(rng, s) for s in case["inputs"]]
        kws = {k: _draw(rng, s) for k, s in case.get("kw", {}).items()}
        for i, a in enumerate(ins):
            out[f"{name}|in|{i}"] = a
        for k, a in kws.items():
            out[f"{name}|kw|{k}"] = a
        gi = grad_inputs(case)
        t_in = [torch.tensor(a, requires_grad=a.dtype == np.float32 and i in gi) for i, a in enumerate(ins)]
        if case.get("self_attention"):
            t_in = [t_in[0]] * 3
        t_kw = {k: torch.tensor(a, requires_grad=a.dtype == np.float32) for k, a in kws.items()}
        res = None
        for _ in range(case.get("steps", 1)):
            res = m(*t_in, **t_kw, **case.get("call", {}))
        res = res if isinstance(res, tuple) else (res,)
        total = 0
        for i, r in enumerate(res):
            if r is None:
                continue
            out[f"{name}|out|{i}"] = r.detach().numpy().copy()
            g = rng.standard_normal(tuple(r.shape)).astype(np.float32)
            out[f"{name}|gout|{i}"] = g
            if r.requires_grad:
                total = total + (r * torch.from_numpy(g)).sum()
        for k, b in m.named_buffers():
            if b is not None:
                out[f"{name}|buf|{k}"] = b.numpy().copy()
        if isinstance(total, torch.Tensor):
            total.backward()
            for i, t in enumerate(t_in[:1] if case.get("self_attention") else t_in):
                if t.grad is not None:
                    out[f"{name}|gin|{i}"] = t.grad.numpy().copy()
            for k, t in t_kw.items():
                if t.grad is not None:
                    out[f"{name}|gkw|{k}"] = t.grad.numpy().copy()
            for k, p in m.named_parameters():
                if p.grad is not None:
                    out[f"{name}|gparam|{k}"] = p.grad.numpy().copy()
    np.savez_compressed(path, **out)
    print(f"wrote {len(out)} arrays for {len(CASES)} cases to {path} ({os.path.getsize(path)} bytes) with torch "
          f"{torch.__version__}")


if __name__ == "__main__":
    main()
