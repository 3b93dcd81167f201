## Fused optimizer steps: one template for every algorithm of cltorch.optim, in place on parameter and state.
##
## Parameters (all fixed at build time; everything that changes per step is a kernel argument):
##   algo   : "sgd" | "adam" | "rmsprop" | "adagrad" | "adamax" | "nadam" | "radam"
##   flags  : dict of booleans (wd, maximize, decoupled, amsgrad, momentum, nesterov, centered)
##   states : names of the per-parameter state tensors, in argument order (e.g. ["exp_avg", "exp_avg_sq"])
##   scalars: names of the scalar arguments, in argument order (lr, bias corrections, ...)
##   st, ct : storage and compute OpenCL types ("float"/"double")
##   slots  : tensors per launch (multi-tensor). Slot s owns work-groups [gs_s, gs_{s+1}); slot 0 starts at 0.
##   elems  : elements per work-item, strided by the local size so neighbouring work-items touch neighbouring
##            elements (coalesced on GPUs, vectorisable across work-items on PoCL); no grid-stride loop.
##   split_barrier: put a (no-op) work-group barrier at the top of each slot's branch. The slot condition depends
##            only on the group id, so every work-item of a group takes the same branch and the barrier is legal.
##            PoCL builds its work-item loops between barriers: with the barrier each slot gets its own
##            vectorised loop; without it PoCL if-converts all slots' bodies into one loop (measured on AdamW,
##            10M params in 100 tensors, 8 slots: 24 ms of CPU per step with it, several times more without).
##
## Formulas: the pseudo-code of PyTorch's torch.optim documentation (2.x), in the operation order of its
## single-tensor implementations (lerp for the first moment, eps added after the square root, ...).
<%namespace name="c" file="common.cl.mako"/>
${c.preamble([st, ct])}
<% F = flags %>
## PoCL (measured, LLVM 14) compiles OpenCL's sqrt(), fabs() and isnan() as out-of-line calls, which keeps it
## from vectorising the work-item loop: the whole kernel runs scalar. clang's __builtin_sqrt[f], __builtin_fabs[f]
## and __builtin_isnan are LLVM intrinsics with the same IEEE results (sqrt correctly rounded) and vectorise.
## Other compilers use the OpenCL builtins.
<% SIM = context.get("simulator", False) %>
## simulator (Oclgrind): its interpreter has no llvm.sqrt/llvm.fabs intrinsics, so it gets the OpenCL builtins.
#if defined(__clang__) && !${int(bool(SIM))}
#define OSQRT(x) ${"__builtin_sqrt" if ct == "double" else "__builtin_sqrtf"}(x)
#define OFABS(x) ${"__builtin_fabs" if ct == "double" else "__builtin_fabsf"}(x)
#define OISNAN(x) __builtin_isnan(x)
#else
#define OSQRT(x) sqrt(x)
#define OFABS(x) fabs(x)
#define OISNAN(x) isnan(x)
#endif
## torch.maximum propagates NaN (fmax would drop it)
#define NANMAX(a, b) (OISNAN(a) ? (a) : (OISNAN(b) ? (b) : ((a) > (b) ? (a) : (b))))

<% S = {name: f"S{k}" for k, name in enumerate(states)} %>
## restrict: the update's pointers do not alias. Left out under `simulator` (Oclgrind), whose interpreter has no
## llvm.experimental.noalias.scope.decl (what inlining a restrict function emits) and fails to create the kernel.
<% R = "" if SIM else "restrict" %>
## The update of elements i0, i0 + ls, ... (elems of them) of one tensor. Called from one branch per slot with
## the slot's own kernel arguments, so each branch is a straight loop over work-items with uniform pointers.
inline __attribute__((always_inline)) void optim_update(__global ${st}* ${R} P, __global const ${st}* ${R} G,
% for k in range(len(states)):
    __global ${st}* ${R} S${k},
% endfor
% for name in scalars:
    const ${ct} ${name},
% endfor
    const long n, const long i0, const long ls)
{
% for e in range(elems):
    {
    const long i = i0 + ${e} * ls;
    if (i < n) {
        ${ct} p = (${ct})P[i];
        ${ct} g = ${"-" if F["maximize"] else ""}(${ct})G[i];
% if algo == "sgd":
% if F["wd"]:
        g = g + weight_decay * p;
% endif
% if F["momentum"]:
        ${ct} b = (first != 0) ? g : (${ct})${S["momentum_buffer"]}[i] * momentum + one_minus_dampening * g;
        ${S["momentum_buffer"]}[i] = (${st})b;
% if F["nesterov"]:
        g = g + momentum * b;
% else:
        g = b;
% endif
% endif
        p = p + neg_lr * g;
% elif algo in ("adam", "nadam", "radam"):
% if F["wd"]:
% if F["decoupled"]:
        p = p * decay;
% else:
        g = g + weight_decay * p;
% endif
% endif
        ${ct} m = (${ct})${S["exp_avg"]}[i];
        m = m + one_minus_beta1 * (g - m);
        ${ct} v = (${ct})${S["exp_avg_sq"]}[i] * beta2 + one_minus_beta2 * g * g;
        ${S["exp_avg"]}[i] = (${st})m;
        ${S["exp_avg_sq"]}[i] = (${st})v;
% if algo == "adam":
% if F["amsgrad"]:
        ${ct} vm = NANMAX((${ct})${S["max_exp_avg_sq"]}[i], v);
        ${S["max_exp_avg_sq"]}[i] = (${st})vm;
        ${ct} d = OSQRT(vm) / bc2_sqrt + eps;
% else:
        ${ct} d = OSQRT(v) / bc2_sqrt + eps;
% endif
        p = p + neg_step_size * (m / d);
% elif algo == "nadam":
        ${ct} d = OSQRT(v / bc2) + eps;
        p = p + coef_grad * (g / d);
        p = p + coef_avg * (m / d);
% else:
        ## radam: rectified when rho_t > 5 (host decides, passes rectify = 0/1)
        ${ct} bm = m / bc1;
        if (rectify != 0) {
            p = p - bm * lr * (bc2_sqrt / (OSQRT(v) + eps)) * rect;
        } else {
            p = p - bm * lr;
        }
% endif
% elif algo == "rmsprop":
% if F["wd"]:
        g = g + weight_decay * p;
% endif
        ${ct} sq = (${ct})${S["square_avg"]}[i] * alpha + one_minus_alpha * g * g;
        ${S["square_avg"]}[i] = (${st})sq;
% if F["centered"]:
        ${ct} ga = (${ct})${S["grad_avg"]}[i];
        ga = ga + one_minus_alpha * (g - ga);
        ${S["grad_avg"]}[i] = (${st})ga;
        ${ct} avg = OSQRT(sq - ga * ga) + eps;
% else:
        ${ct} avg = OSQRT(sq) + eps;
% endif
% if F["momentum"]:
        ${ct} b = (${ct})${S["momentum_buffer"]}[i] * momentum + g / avg;
        ${S["momentum_buffer"]}[i] = (${st})b;
        p = p + neg_lr * b;
% else:
        p = p + neg_lr * (g / avg);
% endif
% elif algo == "adagrad":
% if F["wd"]:
        g = g + weight_decay * p;
% endif
        ${ct} sm = (${ct})${S["sum"]}[i] + g * g;
        ${S["sum"]}[i] = (${st})sm;
        p = p + neg_clr * (g / (OSQRT(sm) + eps));
% elif algo == "adamax":
% if F["wd"]:
        g = g + weight_decay * p;
% endif
        ${ct} m = (${ct})${S["exp_avg"]}[i];
        m = m + one_minus_beta1 * (g - m);
        ${ct} u = NANMAX((${ct})${S["exp_inf"]}[i] * beta2, OFABS(g) + eps);
        ${S["exp_avg"]}[i] = (${st})m;
        ${S["exp_inf"]}[i] = (${st})u;
        p = p + neg_clr * (m / u);
% else:
<% raise ValueError("unknown optimizer algorithm " + algo) %>
% endif
        P[i] = (${st})p;
    }
    }
% endfor
}

__kernel void optim_step(
% for s in range(slots):
    __global ${st}* p${s}, long po${s}, __global const ${st}* g${s}, long go${s},
% for k in range(len(states)):
    __global ${st}* s${k}_${s}, long so${k}_${s},
% endfor
    long n${s},
% if s > 0:
    int gs${s},
% endif
% endfor
% for name in scalars:
    ${ct} ${name},
% endfor
    int unused_)
{
    const int grp = get_group_id(0);
    const long ls = get_local_size(0);
    const long lid = get_local_id(0);
% for s in range(slots):
    ${"if" if s == 0 else "else if"} (${f"grp < gs{s + 1}" if s + 1 < slots else "1"}) {
% if split_barrier:
        barrier(CLK_LOCAL_MEM_FENCE);
% endif
        optim_update(p${s} + po${s}, g${s} + go${s},
% for k in range(len(states)):
            s${k}_${s} + so${k}_${s},
% endfor
% for name in scalars:
            ${name},
% endfor
            n${s}, (long)(grp - ${"0" if s == 0 else f"gs{s}"}) * ls * ${elems} + lid, ls);
    }
% endfor
}
