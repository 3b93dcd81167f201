"""Launch geometry: the one place where a kernel launch's sizes are fitted to the device and checked.

Every launch goes through :meth:`Runtime.launch`, which calls :func:`check` the first time it sees a
(kernel, global size, local size) triple, before the enqueue. A launch outside the limits raises
:class:`LaunchError` naming the kernel, its sizes, the limit and where the limit comes from, instead of the
driver's bare ``INVALID_WORK_GROUP_SIZE`` / ``INVALID_KERNEL_ARGS`` (or, on some drivers, a dead context).

The limits are the smallest of three sources:

- the device: ``CL_DEVICE_MAX_WORK_GROUP_SIZE``, ``CL_DEVICE_MAX_WORK_ITEM_SIZES`` (NVIDIA: 64 in the third
  dimension), ``CL_DEVICE_LOCAL_MEM_SIZE``;
- the device profile's ``[limits]`` table (``devices/*.toml``): what a vendor's driver enforces but does not
  report (NVIDIA: at most 65,535 work-groups in dimensions 1 and 2, as CUDA's grid), and, because a profile is
  also a configuration, the way the tests emulate a vendor's limits on a CPU device
  (``CLTORCH_PROFILE_ONLY=1`` with the vendor's files: ``tests/test_kernel_configs.py``);
- the kernel: ``CL_KERNEL_WORK_GROUP_SIZE`` (below the device's when a kernel needs many registers) and
  ``CL_KERNEL_LOCAL_MEM_SIZE`` plus its ``__local`` arguments.

Launch plans ask for geometry here rather than computing it beside the enqueue:

- :func:`local1` fits a wished 1-d work-group size (the profile's ``local_size``) to the limits, memoised per
  (kernel, size), so the launch path pays a dict lookup; :func:`fit_local` fits a local shape, or spreads a size
  over 2 or 3 extents dimension 0 first, and cuts it to the extents; :func:`grid` rounds the extents up to whole
  work-groups; :func:`nd` does both (1-d: 0.4 us);
- :func:`pieces` splits a launch with more work-groups in a dimension than the device allows (NVIDIA: 65,535 in
  dimensions 1 and 2) into parts, each given its origin as a kernel argument (the pool, padding, resampling and
  FFT kernels). Large extents belong in dimension 0, which has no such limit worth the name (2^31 - 1);
- :func:`cap` is the largest work-group a kernel may have, and :func:`template_local` builds a kernel whose
  work-group size is a template value (local arrays sized at compile time), asks the built kernel's limit and
  rebuilds it smaller while it allows fewer work-items.
"""
from dataclasses import dataclass

__all__ = ["LaunchError", "Limits", "limits", "limits_for", "kernel_limits", "cap", "local1", "fit_local", "grid",
           "nd", "pieces", "template_local", "check", "launch_failed"]

_UNLIMITED = 2 ** 63 - 1


class LaunchError(RuntimeError):
    """A kernel launch that the device cannot run: sizes outside the device's or the kernel's limits, or an
    enqueue the driver refused. The message names the kernel (and its template), the global and local sizes,
    and the limit or the driver's error."""


@dataclass(frozen=True)
class Limits:
    """The launch limits of one device (the smallest of the device's and its profile's ``[limits]``).

    ``max_work_group_size``: work-items per group; ``max_work_item_sizes``: per dimension (3 entries);
    ``local_mem_size``: bytes of local memory per group; ``max_groups``: work-groups per dimension (3 entries);
    ``sources``: for each field, "device" or the profile file that lowered it."""
    max_work_group_size: int
    max_work_item_sizes: tuple
    local_mem_size: int
    max_groups: tuple
    sources: dict

    def why(self, field):
        return self.sources.get(field, "device")


def _profile_limits(profile):
    """The profile's ``[limits]`` table and the file that set each key (the last file naming it)."""
    table = dict(profile.get("limits", {}) or {})
    src = {}
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    for path in getattr(profile, "sources", ()):
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except OSError:
            continue
        for key in data.get("limits", {}) or {}:
            src[key] = path.rsplit("/", 1)[-1]
    return table, src


def limits(rt):
    """The :class:`Limits` of a runtime's device (memoised on the runtime). Uses the device's own profile
    (``native_profile``), so deterministic mode keeps the vendor's limits."""
    lim = getattr(rt, "_limits", None)
    if lim is None:
        lim = rt._limits = limits_for(rt.info, getattr(rt, "native_profile", rt.profile))
    return lim


def limits_for(info, profile):
    """The :class:`Limits` of a DeviceInfo under a profile (see :func:`limits`)."""
    table, src = _profile_limits(profile)
    sources = {}

    def lower(field, device_value, key):
        v = table.get(key)
        if v is None:
            return device_value
        if isinstance(device_value, tuple):
            v = tuple(int(x) for x in v) + (_UNLIMITED,) * (3 - len(v))
            out = tuple(min(a, b) for a, b in zip(device_value, v))
            if out != device_value:
                sources[field] = f"{src.get(key, 'profile')} [limits] {key}"
            return out
        if int(v) < device_value:
            sources[field] = f"{src.get(key, 'profile')} [limits] {key}"
            return int(v)
        return device_value

    wg = int(info.max_work_group_size) or 1
    items = tuple(int(v) for v in (info.max_work_item_sizes or ()))
    items = (items + (wg,) * 3)[:3] if items else (wg, wg, wg)
    local = int(info.local_mem) or _UNLIMITED
    return Limits(max_work_group_size=lower("max_work_group_size", wg, "max_work_group_size"),
                  max_work_item_sizes=lower("max_work_item_sizes", items, "max_work_item_sizes"),
                  local_mem_size=lower("local_mem_size", local, "local_mem_size"),
                  max_groups=lower("max_groups", (_UNLIMITED,) * 3, "max_groups"),
                  sources=sources)


def kernel_limits(rt, k):
    """(work-group size, static local memory in bytes) that the compiled kernel ``k`` allows on ``rt``'s
    device (``CL_KERNEL_WORK_GROUP_SIZE``, ``CL_KERNEL_LOCAL_MEM_SIZE``), memoised on the kernel object."""
    info = getattr(k, "_cltorch_wg", None)
    if info is None:
        import pyopencl as cl
        dev = rt.info.cl_device
        try:
            wg = int(k.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, dev))
        except cl.Error:
            wg = _UNLIMITED
        try:
            lm = int(k.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, dev))
        except cl.Error:
            lm = 0
        info = (wg or _UNLIMITED, lm)
        try:
            k._cltorch_wg = info
        except AttributeError:
            pass
    return info


def cap(rt, k=None):
    """The largest work-group (work-items) a launch may use: the device's limit, and the kernel's if given."""
    c = limits(rt).max_work_group_size
    if k is not None:
        c = min(c, kernel_limits(rt, k)[0])
    return c


def _memo(rt):
    """The runtime's memo of fitted geometry (``(kernel, want)`` -> 1-d local size; ``(kernel, extents, want)``
    -> (global, local)), emptied when it grows past 4,096 entries."""
    m = getattr(rt, "_geometry_memo", None)
    if m is None or len(m) > 4096:
        m = rt._geometry_memo = {}
    return m


def local1(rt, want, k=None):
    """The 1-d work-group size for a wished ``want`` (usually the profile's ``local_size``): at most the device's
    dimension-0 and work-group limits and the kernel's ``CL_KERNEL_WORK_GROUP_SIZE``, halved from ``want``
    until it fits (so a power of two stays one). Memoised per (kernel, want): the launch path pays a dict
    lookup."""
    m = _memo(rt)
    key = (k, want)
    v = m.get(key)
    if v is None:
        lim = limits(rt)
        v = max(1, min(int(want), lim.max_work_item_sizes[0]))
        c = cap(rt, k)
        while v > c:
            v = max(1, v // 2)
        m[key] = v
    return v


def fit_local(rt, want, extents=None, k=None):
    """A local size (tuple) fitted from ``want`` (usually the profile's value) to the device's and the kernel's
    (``k``) limits and, with ``extents``, to the extents (a work-group wider than the range only idles).

    ``want`` a tuple: a local shape; each dimension is cut to the device's per-dimension limit and its extent,
    then the largest dimension is halved until the group fits the work-group limits. ``want`` an int: a
    work-group size; with one extent (or none) the 1-d size of :func:`local1` cut to the extent; with 2 or 3
    extents it is spread over them dimension 0 first (as many work-items along dim 0 as the extent allows,
    then dim 1 with what is left, then dim 2), each dimension within its per-dimension limit. Never below 1
    per dimension."""
    lim = limits(rt)
    if isinstance(want, int):
        if extents is None or len(extents) == 1:
            v = local1(rt, want, k)
            if extents is not None:
                v = max(1, min(v, int(extents[0])))
            return (v,)
        left = local1(rt, want, k)
        loc = []
        for d, e in enumerate(extents):
            v = max(1, min(int(e), lim.max_work_item_sizes[d], left))
            loc.append(v)
            left //= v
        return tuple(loc)
    want = tuple(want)
    loc = []
    for d, w in enumerate(want):
        v = min(int(w), lim.max_work_item_sizes[d])
        if extents is not None:
            v = min(v, max(1, int(extents[d])))
        loc.append(max(1, v))
    c = cap(rt, k)
    while _prod(loc) > c:
        d = max(range(len(loc)), key=lambda i: loc[i])
        loc[d] = max(1, loc[d] // 2)
    return tuple(loc)


def grid(extents, local):
    """Global sizes: each extent rounded up to a whole number of work-groups."""
    return tuple(((max(int(e), 0) + l - 1) // l) * l for e, l in zip(extents, local))


def nd(rt, extents, want, k=None):
    """(global, local) for ``extents`` work-items (an int: 1-d) with the wished local size or shape ``want``
    fitted (:func:`fit_local`) and the global sizes rounded up to whole work-groups (:func:`grid`). The 1-d form
    costs a memo lookup and is meant for the launch path; the n-d form is memoised per (kernel, extents, want).
    Large extents belong in dimension 0: NVIDIA allows only 65,535 work-groups in dimensions 1 and 2 (a launch
    over more is split by :func:`pieces`, or refused by :func:`check`)."""
    if type(extents) is int or not isinstance(extents, (tuple, list)):
        try:
            v = rt._geometry_memo[(k, want)]
        except (AttributeError, KeyError):
            v = local1(rt, want, k)
        if extents < v:
            v = max(int(extents), 1)
        return (-(-int(extents) // v) * v,), (v,)
    extents = tuple(extents)
    m = _memo(rt)
    key = (k, extents, want)
    r = m.get(key)
    if r is None:
        loc = fit_local(rt, want, extents, k)
        r = m[key] = (grid(extents, loc), loc)
    return r


def pieces(rt, gsize, lsize):
    """The launches that cover the global range ``gsize`` (whole work-groups of ``lsize``) within the device's
    work-groups per dimension (``max_groups``: NVIDIA's 65,535 in dimensions 1 and 2): a list of (origin,
    global size), one entry (origin 0) when the range fits. The kernel adds the origin to its global ids (an
    argument: OpenCL's global work offset is not recorded by capture)."""
    mg = limits(rt).max_groups
    steps = [min(g, m * l) for g, m, l in zip(gsize, mg, lsize)]
    if all(s == g for s, g in zip(steps, gsize)):
        return (((0,) * len(gsize), tuple(gsize)),)
    out = [((), ())]
    for g, s in zip(gsize, steps):
        out = [(o + (a,), p + (min(s, g - a),)) for o, p in out for a in range(0, g, s)]
    return out


def template_local(rt, want, build, multiple=1):
    """(kernel, work-group size) for a kernel whose work-group size is a template value (local arrays sized at
    compile time): the size starts at ``want`` fitted to the device (:func:`local1`, cut to a multiple of
    ``multiple``), ``build(size)`` makes the kernel, and while the built kernel allows fewer work-items
    (``CL_KERNEL_WORK_GROUP_SIZE``: registers or local memory) it is rebuilt at the largest multiple of
    ``multiple`` that it allows. Raises :class:`LaunchError` when not even ``multiple`` work-items fit."""
    ls = local1(rt, want)
    ls = ls // multiple * multiple
    while True:
        if ls < multiple or ls < 1:
            raise LaunchError(f"no work-group size that is a multiple of {multiple} fits cl:{rt.index} "
                              f"{rt.info.name} (wished {want}; the device allows {cap(rt)} work-items per group)")
        k = build(ls)
        c = cap(rt, k)
        if ls <= c:
            return k, ls
        new = c // multiple * multiple
        if new >= ls:
            new = ls - multiple
        if new < multiple:
            raise LaunchError(f"{_name(k)} cannot run on cl:{rt.index} {rt.info.name}: it allows {c} work-items "
                              f"per group (CL_KERNEL_WORK_GROUP_SIZE), fewer than the {multiple} it needs")
        ls = new


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def _name(k):
    src = getattr(k, "_cltorch_src", None)
    try:
        name = k.function_name
    except Exception:  # noqa: BLE001
        name = "?"
    return f"kernel '{name}'" + (f" ({src[0]})" if src else "")


def _local_arg_bytes(args):
    try:
        import pyopencl as cl
    except ImportError:
        return 0
    return sum(int(a.size) for a in args if isinstance(a, cl.LocalMemory))


def check(rt, k, gsize, lsize, args=()):
    """Raise :class:`LaunchError` unless the launch of ``k`` over ``gsize`` with work-groups ``lsize`` (None:
    the driver chooses) fits the device's and the kernel's limits: work-items per group, per dimension, the
    global size a whole number of groups, the groups per dimension, local memory."""
    lim = limits(rt)
    gsize = tuple(int(g) for g in gsize)

    def fail(what):
        where = f"cl:{rt.index} {rt.info.name}"
        sizes = f"global size {gsize}, local size {tuple(lsize) if lsize is not None else None}"
        raise LaunchError(f"{_name(k)} cannot be launched on {where}: {sizes}: {what}")

    if not 1 <= len(gsize) <= 3:
        fail(f"{len(gsize)} dimensions (OpenCL allows 1 to 3)")
    if any(g < 1 for g in gsize):
        fail("every global size must be at least 1 (an empty launch should not be enqueued)")
    if lsize is None:
        return
    lsize = tuple(int(v) for v in lsize)
    if len(lsize) != len(gsize):
        fail("local and global sizes have different numbers of dimensions")
    if any(v < 1 for v in lsize):
        fail("every local size must be at least 1")
    for d, (g, l) in enumerate(zip(gsize, lsize)):
        if l > lim.max_work_item_sizes[d]:
            fail(f"local size {l} in dimension {d} exceeds the limit of {lim.max_work_item_sizes[d]} "
                 f"(max_work_item_sizes, from {lim.why('max_work_item_sizes')})")
        if g % l:
            fail(f"global size {g} in dimension {d} is not a multiple of the local size {l}")
        if g // l > lim.max_groups[d]:
            fail(f"{g // l} work-groups in dimension {d} exceed the limit of {lim.max_groups[d]} "
                 f"(max_groups, from {lim.why('max_groups')})")
    n = _prod(lsize)
    if n > lim.max_work_group_size:
        fail(f"{n} work-items per group exceed the device's limit of {lim.max_work_group_size} "
             f"(max_work_group_size, from {lim.why('max_work_group_size')})")
    kwg, klm = kernel_limits(rt, k)
    if n > kwg:
        fail(f"{n} work-items per group exceed this kernel's limit of {kwg} (CL_KERNEL_WORK_GROUP_SIZE: the "
             "registers or local memory it needs per work-item)")
    local = klm + _local_arg_bytes(args)
    if local > lim.local_mem_size:
        fail(f"{local} bytes of local memory exceed the limit of {lim.local_mem_size} "
             f"(local_mem_size, from {lim.why('local_mem_size')})")


def launch_failed(rt, k, gsize, lsize, err):
    """The :class:`LaunchError` for an enqueue the driver refused (``err``, a pyopencl error)."""
    return LaunchError(f"{_name(k)} failed to launch on cl:{rt.index} {rt.info.name} (global size "
                       f"{tuple(gsize)}, local size {tuple(lsize) if lsize is not None else None}): {err}")
