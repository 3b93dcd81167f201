"""cltorch.func against torch.func (torch 2.13 CPU as the oracle): values of grad, grad_and_value, vjp, jvp,
linearize, jacrev, jacfwd, hessian, vmap (in_dims/out_dims pytrees, nesting, randomness), per-sample gradients of a
Linear model, stack_module_state ensembles, replace_all_batch_norm_modules_, and the errors."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cltorch
import cltorch.func as CF

torch = pytest.importorskip("torch")
import torch.func as TF  # noqa: E402

DEV = "cl"


def C(t):
    """A torch tensor as a cltorch one on DEV (same values)."""
    return cltorch.tensor(t.detach().numpy(), device=DEV)


def close(a, b, tol=1e-5):
    if isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b), (type(a), type(b))
        for x, y in zip(a, b):
            close(x, y, tol)
        return
    if isinstance(b, dict):
        assert isinstance(a, dict) and list(a) == list(b)
        for k in b:
            close(a[k], b[k], tol)
        return
    assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
    np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def both(fn_src, *names):
    """The same function body compiled once against each library (``T`` is cltorch or torch)."""
    out = []
    for lib in (cltorch, torch):
        ns = {"T": lib}
        exec(textwrap.dedent(fn_src), ns)
        out.append([ns[n] for n in names] if len(names) > 1 else ns[names[0]])
    return out


@pytest.fixture(scope="module")
def xs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(4, 3, generator=g, dtype=torch.float32) for _ in range(3)]


F_SRC = """
def f(x, y):
    return (T.sin(x) * y).sum() + (x * x * y).mean()
"""


def test_grad_argnums_and_value(xs):
    cf, tf = both(F_SRC, "f")
    x, y = xs[0], xs[1]
    close(CF.grad(cf)(C(x), C(y)), TF.grad(tf)(x, y))
    close(CF.grad(cf, argnums=1)(C(x), C(y)), TF.grad(tf, argnums=1)(x, y))
    close(CF.grad(cf, argnums=(0, -1))(C(x), C(y)), TF.grad(tf, argnums=(0, -1))(x, y))
    g, v = CF.grad_and_value(cf)(C(x), C(y))
    tg, tv = TF.grad_and_value(tf)(x, y)
    close(g, tg)
    close(v, tv)
    assert not g.requires_grad and not v.requires_grad      # top level: plain tensors, as torch's


def test_grad_has_aux_and_pytree_args(xs):
    src = """
def f(p, x):
    out = (p['w'] * x).sum() + p['b'].pow(2).sum()
    return out, {'o': out * 2, 'n': x.norm()}
"""
    cf, tf = both(src, "f")
    x = xs[0]
    p = {"w": xs[1], "b": xs[2][0]}
    (g, aux), (tg, taux) = CF.grad(cf, has_aux=True)({k: C(v) for k, v in p.items()}, C(x)), \
        TF.grad(tf, has_aux=True)(p, x)
    close(g, tg)
    close(aux, taux)


def test_grad_of_grad_and_unused_input(xs):
    cf, tf = both("def f(x):\n    return (x ** 3).sum() * T.cos(x).sum()\n", "f")
    x = xs[0][0]
    close(CF.grad(lambda x: CF.grad(cf)(x).sum())(C(x)), TF.grad(lambda x: TF.grad(tf)(x).sum())(x), 1e-4)
    z = CF.grad(lambda x, y: (x * 2).sum(), argnums=1)(C(x), C(x))
    assert z.tolist() == [0.0, 0.0, 0.0]


def test_grad_composes_with_autograd(xs):
    x = C(xs[0]).requires_grad_()
    g = CF.grad(lambda v: (v ** 3).sum())(x)            # 3 x^2, differentiable in x
    g.sum().backward()
    tx = xs[0].clone().requires_grad_()
    TF.grad(lambda v: (v ** 3).sum())(tx).sum().backward()
    close(x.grad, tx.grad)


def test_grad_errors():
    x = cltorch.ones(3, device=DEV)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1"):
        CF.grad(lambda v: v * 2)(x)
    with pytest.raises(RuntimeError, match="to return a Tensor, got <class 'float'>"):
        CF.grad(lambda v: 1.0)(x)
    with pytest.raises(RuntimeError, match="Got argnum=2, but only 1 positional inputs"):
        CF.grad(lambda v: v.sum(), argnums=2)(x)
    with pytest.raises(RuntimeError, match="argnums must be int or Tuple"):
        CF.grad(lambda v: v.sum(), argnums=[0])(x)
    with pytest.raises(RuntimeError, match="argnums elements must be unique"):
        CF.grad(lambda a, b: a.sum(), argnums=(0, 0))(x, x)
    with pytest.raises(RuntimeError, match="should be a tuple: \\(output, aux\\)"):
        CF.grad(lambda v: v.sum(), has_aux=True)(x)
    with pytest.raises(ValueError, match="must be Tensor, got <class 'int'>"):
        CF.grad(lambda a: a * 1.0)(3)


def test_vjp_jvp_linearize(xs):
    src = """
def f(x, y):
    return T.tanh(x) * y, (x @ y.t()).exp()
"""
    cf, tf = both(src, "f")
    x, y, v = xs
    (co, cfn), (to, tfn) = CF.vjp(cf, C(x), C(y)), TF.vjp(tf, x, y)
    close(co, to, 1e-4)
    ct = (v, torch.ones(4, 4))
    close(cfn(tuple(C(c) for c in ct)), tfn(ct), 1e-4)
    close(cfn(tuple(C(c) for c in ct)), tfn(ct), 1e-4)          # vjp_fn may be called again
    with pytest.raises(RuntimeError, match="structure of cotangents"):
        cfn(C(v))
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        cfn((C(v), cltorch.ones(4, 3, device=DEV)))
    tang = (v, x * 0.5)
    (co, cj), (to, tj) = CF.jvp(cf, (C(x), C(y)), tuple(C(t) for t in tang)), TF.jvp(tf, (x, y), tang)
    close(co, to, 1e-4)
    close(cj, tj, 1e-4)
    (co, cjfn), (to, tjfn) = CF.linearize(cf, C(x), C(y)), TF.linearize(tf, x, y)
    close(co, to, 1e-4)
    close(cjfn(*(C(t) for t in tang)), tjfn(*tang), 1e-4)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        CF.jvp(cf, C(x), C(v))
    with pytest.raises(RuntimeError, match="same shape"):
        CF.jvp(cf, (C(x), C(y)), (C(v), C(v[0])))


def test_jvp_strict_and_has_aux(xs):
    x = C(xs[0])
    _, t = CF.jvp(lambda a: cltorch.ones(2, device=DEV), (x,), (x,))
    assert t.tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="independent of the inputs"):
        CF.jvp(lambda a: cltorch.ones(2, device=DEV), (x,), (x,), strict=True)
    out, t, aux = CF.jvp(lambda a: (a.sin(), a.sum()), (x,), (cltorch.ones_like(x),), has_aux=True)
    close(t, torch.cos(xs[0]))
    close(aux, xs[0].sum())


def test_jacrev_jacfwd_hessian(xs):
    src = """
def f(x, y):
    return (T.sin(x) * y[0]).sum(1), x.pow(2).t()
def s(x):
    return (x.sin() * x.exp()).sum() + (x[0] * x[1] * x[2])
"""
    (cf, cs), (tf, ts) = both(src, "f", "s")
    x, y = xs[0], xs[1]
    for ours, theirs in ((CF.jacrev, TF.jacrev), (CF.jacfwd, TF.jacfwd)):
        close(ours(cf, argnums=(0, 1))(C(x), C(y)), theirs(tf, argnums=(0, 1))(x, y), 1e-4)
        close(ours(cf)(C(x), C(y)), theirs(tf)(x, y), 1e-4)
    close(CF.jacrev(cf, chunk_size=2)(C(x), C(y)), TF.jacrev(tf, chunk_size=2)(x, y), 1e-4)
    j, aux = CF.jacrev(lambda a: (a.sin(), a.sum()), has_aux=True)(C(x[0]))
    close(j, TF.jacrev(torch.sin)(x[0]))
    close(aux, x[0].sum())
    close(CF.hessian(cs)(C(x[0])), TF.hessian(ts)(x[0]), 1e-4)
    close(CF.hessian(cf, argnums=1)(C(x), C(y)), TF.hessian(tf, argnums=1)(x, y), 1e-4)
    with pytest.raises(ValueError, match="chunk_size"):
        CF.jacrev(cs, chunk_size=0)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        CF.jacfwd(lambda a: a * cltorch.rand(3, device=DEV))(C(x[0]))
    CF.jacfwd(lambda a: a * cltorch.rand(3, device=DEV), randomness="different")(C(x[0]))


def test_vmap_dims_and_structures(xs):
    x, y, z = xs
    src = """
def f(a, b, scale=1.0):
    return {'s': (a * b).sum() * scale, 'p': T.outer(a, b)}, a.mean()
"""
    cf, tf = both(src, "f")
    close(CF.vmap(cf)(C(x), C(y)), TF.vmap(tf)(x, y))
    close(CF.vmap(cf, in_dims=(1, 1), out_dims=({'s': 0, 'p': 2}, 0))(C(x), C(y), scale=3.0),
          TF.vmap(tf, in_dims=(1, 1), out_dims=({'s': 0, 'p': 2}, 0))(x, y, scale=3.0))
    close(CF.vmap(cf, in_dims=(0, None))(C(x), C(y[0])), TF.vmap(tf, in_dims=(0, None))(x, y[0]))
    close(CF.vmap(lambda d: d["a"] + d["b"], in_dims=({"a": -1, "b": None},))({"a": C(x), "b": C(z[:, 0])}),
          TF.vmap(lambda d: d["a"] + d["b"], in_dims=({"a": -1, "b": None},))({"a": x, "b": z[:, 0]}))
    # nested: an outer product per row pair, and vmap over vmap
    def mul(a, b):
        return a * b
    close(CF.vmap(CF.vmap(mul, in_dims=(0, None)), in_dims=(None, 0))(C(x[0]), C(y[0])),
          TF.vmap(TF.vmap(mul, in_dims=(0, None)), in_dims=(None, 0))(x[0], y[0]))
    r, n = CF.vmap(lambda a: (a.sum(), 3), out_dims=(0, None))(C(x))
    assert n == 3
    close(r, x.sum(1))


def test_vmap_errors():
    x = cltorch.ones(2, 3, device=DEV)
    with pytest.raises(ValueError, match="We cannot vmap over non-Tensor arguments"):
        CF.vmap(lambda a, s: a * s)(x, 2)
    with pytest.raises(ValueError, match="same size in the mapped dimension, got sizes \\[2, 3\\]"):
        CF.vmap(lambda a, b: a + b[0], in_dims=(0, 1))(x, x)
    with pytest.raises(ValueError, match="expected in_dim to satisfy -2 <= in_dim < 2"):
        CF.vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(ValueError, match="Expected at least one Tensor to vmap over"):
        CF.vmap(lambda a: a, in_dims=(None,))(x)
    with pytest.raises(ValueError, match="expected `in_dims` to be int or a"):
        CF.vmap(lambda a: a, in_dims=[0])(x)
    with pytest.raises(ValueError, match="in_dims is not compatible"):
        CF.vmap(lambda a: a, in_dims=(0, 0))(x)
    with pytest.raises(ValueError, match="must only return Tensors"):
        CF.vmap(lambda a: 3)(x)
    with pytest.raises(ValueError, match="out_dim is None"):
        CF.vmap(lambda a: a, out_dims=None)(cltorch.arange(2.0, device=DEV).view(2, 1))
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        CF.vmap(lambda a: a, randomness="other")
    with pytest.raises(ValueError, match="chunk_size should be None or greater than 0"):
        CF.vmap(lambda a: a, chunk_size=0)


def test_vmap_randomness():
    x = cltorch.zeros(3, 4, device=DEV)
    before = cltorch.get_rng_state().tolist()
    with pytest.raises(RuntimeError, match="called random operation while in randomness error mode"):
        CF.vmap(lambda a: a + cltorch.rand(4, device=DEV))(x)
    assert cltorch.get_rng_state().tolist() == before       # raised before the generator advanced
    with pytest.raises(RuntimeError, match="randomness error mode"):
        CF.vmap(lambda a: cltorch.nn.functional.dropout(a + 1, 0.5))(x)
    gen = cltorch.Generator().manual_seed(3)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        CF.vmap(lambda a: a + cltorch.rand(4, generator=gen, device=DEV))(x)
    cltorch.manual_seed(7)
    same = CF.vmap(lambda a: a + cltorch.rand(4, device=DEV), randomness="same")(x)
    assert all(row == same[0].tolist() for row in same.tolist())
    after_same = cltorch.rand(4, device=DEV).tolist()
    cltorch.manual_seed(7)
    first = cltorch.rand(4, device=DEV).tolist()
    assert same[0].tolist() == first                        # 'same' drew one sample's numbers...
    assert cltorch.rand(4, device=DEV).tolist() == after_same   # ...and left the generator one draw ahead
    diff = CF.vmap(lambda a: a + cltorch.rand(4, device=DEV), randomness="different")(x).tolist()
    assert diff[0] != diff[1] != diff[2]
    # the wrapper is removed again after vmap
    assert CF._vmap._ACTIVE == [] and cltorch.rand(2, device=DEV).shape == (2,)


def _model_and_data():
    g = torch.Generator().manual_seed(1)
    tm = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    cm = cltorch.nn.Sequential(cltorch.nn.Linear(5, 4), cltorch.nn.Tanh(), cltorch.nn.Linear(4, 3)).to(DEV)
    cm.load_state_dict({k: C(v) for k, v in tm.state_dict().items()})
    data = torch.randn(6, 5, generator=g)
    target = torch.randint(0, 3, (6,), generator=g)
    return tm, cm, data, target


def test_per_sample_grads_linear_model():
    tm, cm, data, target = _model_and_data()

    def loss_fn(lib, func, model):
        def compute(params, buffers, x, t):
            out = func.functional_call(model, (params, buffers), (x.unsqueeze(0),))
            return lib.nn.functional.cross_entropy(out, t.unsqueeze(0))
        return compute

    tp = {k: v.detach() for k, v in tm.named_parameters()}
    cp = {k: v.detach() for k, v in cm.named_parameters()}
    tg = TF.vmap(TF.grad(loss_fn(torch, TF, tm)), in_dims=(None, None, 0, 0))(tp, {}, data, target)
    cg = CF.vmap(CF.grad(loss_fn(cltorch, CF, cm)), in_dims=(None, None, 0, 0))(cp, {}, C(data), C(target))
    close(cg, tg, 1e-5)
    # the per-sample gradients average to the batch gradient
    cm.zero_grad()
    cltorch.nn.functional.cross_entropy(cm(C(data)), C(target)).backward()
    for k, p in cm.named_parameters():
        close(cg[k].mean(0), torch.from_numpy(p.grad.cpu().numpy()), 1e-5)


def test_stack_module_state_ensemble_and_batchnorm():
    g = torch.Generator().manual_seed(2)
    tms = [torch.nn.Linear(3, 2) for _ in range(3)]
    with torch.no_grad():
        for m in tms:
            for p in m.parameters():
                p.copy_(torch.randn(p.shape, generator=g))
    cms = []
    for m in tms:
        c = cltorch.nn.Linear(3, 2).to(DEV)
        c.load_state_dict({k: C(v) for k, v in m.state_dict().items()})
        cms.append(c)
    tp, tb = TF.stack_module_state(tms)
    cp, cb = CF.stack_module_state(cms)
    close(cp, tp)
    assert cb == {} and all(v.requires_grad and v.is_leaf for v in cp.values())
    x = torch.randn(4, 3, generator=g)
    base_t, base_c = tms[0], cms[0]
    to = TF.vmap(lambda p, b, x: TF.functional_call(base_t, (p, b), (x,)), in_dims=(0, 0, None))(tp, tb, x)
    co = CF.vmap(lambda p, b, x: CF.functional_call(base_c, (p, b), (x,)), in_dims=(0, 0, None))(cp, cb, C(x))
    close(co, to, 1e-5)
    with pytest.raises(RuntimeError, match="Expected at least one model"):
        CF.stack_module_state([])
    with pytest.raises(RuntimeError, match="same class"):
        CF.stack_module_state([cms[0], cltorch.nn.Sequential(cltorch.nn.Linear(3, 2))])
    cms[1].eval()
    with pytest.raises(RuntimeError, match="same training/eval mode"):
        CF.stack_module_state(cms)
    net = cltorch.nn.Sequential(cltorch.nn.Linear(3, 4), cltorch.nn.BatchNorm1d(4)).to(DEV)
    assert CF.replace_all_batch_norm_modules_(net) is net
    bn = net[1]
    assert bn.running_mean is None and bn.running_var is None and bn.num_batches_tracked is None
    assert not bn.track_running_stats
    net.eval()
    out = net(C(x))                                           # batch statistics even in eval mode
    close(out.mean(0), torch.zeros(4), 1e-5)


def test_functionalize_and_debug_unwrap():
    def f(a):
        b = a.clone()
        b.add_(1)
        return b * 2
    assert CF.functionalize(f) is f
    assert CF.functionalize(f, remove="mutations_and_views") is f
    with pytest.raises(RuntimeError, match="invalid argument for remove"):
        CF.functionalize(f, remove="views")
    x = cltorch.ones(2, device=DEV)
    assert CF.debug_unwrap(x) is x
    assert cltorch.func is CF and set(CF.__all__) == set(TF.__all__) - {"rearrange"}


def test_user_script_per_sample_grads_subprocess(tmp_path):
    script = tmp_path / "per_sample.py"
    script.write_text(textwrap.dedent("""
        import cltorch as torch
        from cltorch.func import functional_call, grad, vmap
        import torch as real_torch
        import torch.func as real_func

        real_torch.manual_seed(0)
        ref = real_torch.nn.Linear(4, 2)
        model = torch.nn.Linear(4, 2).to("cl")
        model.load_state_dict({k: torch.tensor(v.detach().numpy()).to("cl") for k, v in ref.state_dict().items()})
        xb, yb = real_torch.randn(5, 4), real_torch.randn(5, 2)

        def make(lib, fc, m):
            def loss(params, x, y):
                pred = fc(m, params, (x,))
                return ((pred - y) ** 2).mean()
            return loss

        params = {k: v.detach() for k, v in model.named_parameters()}
        ours = vmap(grad(make(torch, functional_call, model)), in_dims=(None, 0, 0))(
            params, torch.tensor(xb.numpy()).to("cl"), torch.tensor(yb.numpy()).to("cl"))
        theirs = real_func.vmap(real_func.grad(make(real_torch, real_func.functional_call, ref)),
                                in_dims=(None, 0, 0))({k: v.detach() for k, v in ref.named_parameters()}, xb, yb)
        for k in theirs:
            assert tuple(ours[k].shape) == (5,) + tuple(theirs[k].shape[1:]), k
            err = (real_torch.tensor(ours[k].cpu().numpy()) - theirs[k]).abs().max().item()
            assert err < 1e-5, (k, err)
        print("per-sample grads ok", sorted(theirs))
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "per-sample grads ok ['bias', 'weight']" in r.stdout


def test_maml_step_and_vmap_inside_grad(xs):
    """grad of a loss after an inner grad step (second order through the inner step, MAML), and grad of a vmapped
    function; both against torch.func."""
    src = """
def inner(p, x, y):
    return ((x @ p['w'] + p['b'] - y) ** 2).mean()
def outer(p, x, y, x2, y2, grad):
    g = grad(inner)(p, x, y)
    return inner({k: p[k] - 0.3 * g[k] for k in p}, x2, y2)
def rowsum(v):
    return (v.sin() * v).sum()
"""
    (ci, co, cr), (ti, to, tr) = both(src, "inner", "outer", "rowsum")
    g = torch.Generator().manual_seed(5)
    p = {"w": torch.randn(3, 2, generator=g), "b": torch.randn(2, generator=g)}
    x, x2 = xs[0], xs[1]
    y, y2 = torch.randn(4, 2, generator=g), torch.randn(4, 2, generator=g)
    ours = CF.grad(co)({k: C(v) for k, v in p.items()}, C(x), C(y), C(x2), C(y2), CF.grad)
    theirs = TF.grad(to)(p, x, y, x2, y2, TF.grad)
    close(ours, theirs, 1e-5)
    first_order = CF.grad(ci)({k: C(v) for k, v in p.items()}, C(x2), C(y2))
    assert not np.allclose(ours["w"].cpu().numpy(), first_order["w"].cpu().numpy())   # the second-order term is there
    close(CF.grad(lambda v: CF.vmap(cr)(v).sum())(C(xs[2])), TF.grad(lambda v: TF.vmap(tr)(v).sum())(xs[2]), 1e-5)


def test_closure_parameters_keep_their_history(xs):
    """As torch.func composes with torch.autograd: a module captured by the function keeps its parameters'
    history in grad's and jacrev's results (and only then do results require grad)."""
    tm, cm, data, _ = _model_and_data()
    tg = TF.grad(lambda v: tm(v).pow(2).sum())(data[0])
    cg = CF.grad(lambda v: cm(v).pow(2).sum())(C(data[0]))
    close(cg, tg, 1e-5)
    assert cg.requires_grad and tg.requires_grad
    tg.sum().backward()
    cg.sum().backward()
    for (k, tp), (_, cp) in zip(tm.named_parameters(), cm.named_parameters()):
        close(cp.grad, tp.grad, 1e-5)
    tj = TF.jacrev(lambda v: tm(v))(data[1])
    cj = CF.jacrev(lambda v: cm(v))(C(data[1]))
    close(cj, tj, 1e-5)
    assert cj.requires_grad
    with cltorch.no_grad():
        assert not CF.grad(lambda v: cm(v).sum())(C(data[0])).requires_grad
    assert not CF.grad(lambda v: (v * C(data[2])).sum())(C(data[0])).requires_grad
