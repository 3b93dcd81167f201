## Stable merge sort along one dim of a strided tensor, with the permutation (sort, argsort, topk, ...).
##
## "init": work-item (row, c) loads the CH elements [c*CH, ...) of its row into private memory, sorts them by
##   insertion (stable) and writes them with their positions.
## "merge": pass of width w: runs [s, s+w) and [s+w, s+2w) of each row (s a multiple of 2w, clipped to n)
##   merge into one; work-item (row, t) writes outputs [t*T, t*T+T) of its row. It finds where its first
##   output comes from by a binary search on the merge path (the split i of A, j = p - i of B with
##   A[i-1] <= B[j] and B[j-1] < A[i]), then merges T elements sequentially. Ties take A first: stable.
## No barriers or local memory (PoCL runs per-work-item sequential code best); T divides 2w because both are
## powers of two with T <= 2*CH.
##   kt: key type; floating: NaN sorts as the largest value (after +inf ascending, first descending), as in
##   PyTorch; desc (runtime): descending, still stable.
##   init reads the input through rows of rank RK (padded to 1, 2, 4 or 8) and a dim stride; both kernels write
##   through (row strides, dim stride), either the contiguous rows x n scratch or the final values/indices.
##   merge reads the contiguous scratch. Outputs at or past position k of a row are not written (topk).
<%namespace name="c" file="common.cl.mako"/>
${c.preamble(types)}
## desc is a runtime flag: the comparison reads it, so one program serves both orders.
% if floating:
#define BEFORE(a, b) (desc ? ((a) > (b) || (isnan(a) && !isnan(b))) : ((a) < (b) || (isnan(b) && !isnan(a))))
% else:
#define BEFORE(a, b) (desc ? ((a) > (b)) : ((a) < (b)))
% endif
<%def name="row_dst()">
    long dk = ko_off, di = io_off, rem_ = row, id_;
% for d in reversed(range(RK)):
% if d > 0:
    id_ = rem_ % ks${d}; rem_ = rem_ / ks${d};
% else:
    id_ = rem_;
% endif
    dk += id_ * kko${d}; di += id_ * kio${d};
% endfor
</%def>
% if kernel == "init":
__kernel void sort_init(__global const ${kt}* in, long in_off, long s_in
    , __global ${kt}* ko, long ko_off, __global long* io, long io_off, long sdk, long sdi
    , long rows, long n, long nch, long k, long desc
% for d in range(RK):
    , long ks${d}, long kin${d}, long kko${d}, long kio${d}
% endfor
    )
{
    long gid = get_global_id(0);
    if (gid >= rows * nch) return;
    long row = gid / nch, c = gid - row * nch;
    long start = c * ${CH};
    int cnt = (int)(n - start < ${CH} ? n - start : ${CH});
    long pin = in_off, rem = row, id;
% for d in reversed(range(RK)):
% if d > 0:
    id = rem % ks${d}; rem = rem / ks${d};
% else:
    id = rem;
% endif
    pin += id * kin${d};
% endfor
    pin += start * s_in;
    ${kt} kv[${CH}];
    long iv[${CH}];
    for (int q = 0; q < cnt; ++q) {
        ${kt} x = in[pin + q * s_in];
        int j = q;
        while (j > 0 && BEFORE(x, kv[j - 1])) {
            kv[j] = kv[j - 1];
            iv[j] = iv[j - 1];
            --j;
        }
        kv[j] = x;
        iv[j] = start + q;
    }
    ${row_dst()}
    for (int q = 0; q < cnt; ++q) {
        if (start + q >= k) break;
        ko[dk + (start + q) * sdk] = kv[q];
        io[di + (start + q) * sdi] = iv[q];
    }
}
% else:
__kernel void sort_merge(__global const ${kt}* ki, __global const long* ii
    , __global ${kt}* ko, long ko_off, __global long* io, long io_off, long sdk, long sdi
    , long rows, long n, long ntile, long w, long k, long desc
% for d in range(RK):
    , long ks${d}, long kko${d}, long kio${d}
% endfor
    )
{
    long gid = get_global_id(0);
    if (gid >= rows * ntile) return;
    long row = gid / ntile, t = gid - row * ntile;
    long p0 = t * ${T};
    if (p0 >= k) return;
    long s = (p0 / (2 * w)) * (2 * w);
    long la = w < n - s ? w : n - s;
    long rest = n - s - la;
    long lb = rest < w ? rest : w;
    if (lb < 0) lb = 0;
    __global const ${kt}* A = ki + row * n + s;
    __global const ${kt}* B = A + la;
    __global const long* IA = ii + row * n + s;
    __global const long* IB = IA + la;
    long p = p0 - s;
    long lo = p - lb > 0 ? p - lb : 0, hi = p < la ? p : la;
    while (lo < hi) {
        long mid = (lo + hi) >> 1;
        long j = p - mid;
        if (!BEFORE(B[j - 1], A[mid])) lo = mid + 1; else hi = mid;
    }
    long i = lo, j = p - lo;
    ${row_dst()}
    long end = p0 + ${T};
    if (end > s + la + lb) end = s + la + lb;
    if (end > k) end = k;
    for (long q = p0; q < end; ++q) {
        int take_a = j >= lb || (i < la && !BEFORE(B[j], A[i]));
        if (take_a) {
            ko[dk + q * sdk] = A[i];
            io[di + q * sdi] = IA[i];
            ++i;
        } else {
            ko[dk + q * sdk] = B[j];
            io[di + q * sdi] = IB[j];
            ++j;
        }
    }
}
% endif
