"""More block-level kernels, in other shapes than tests/block_kernels.py, for the cpu backend.

Written as numba.cuda users write them (ported with the one-line import change):
numba's own tiled matrix multiply (2-D blocks, a loop over tiles), a shared-memory
prefix sum (a value live across barriers in a while loop), warp scans and votes,
warp-aggregated counting with activemask/match_any_sync/lanemask_lt, nested loops
with barriers and a branch uniform per block, shared arrays of several dtypes with
atomics, a per-thread local array kept across barriers, a ``while
cuda.syncthreads_or(...)`` convergence loop with a uniform ``break``, a device
function that synchronises and returns early, and a grid group handed to a device
function. The last section holds kernels that break CUDA's rules, for the errors.
"""
import math

import numpy as np
from numba import float32, float64, int32

from dualgpu import cuda  # was: from numba import cuda

# --- numba's documented fast_matmul (float64 and float32) -----------------------------------
TPB = 4


@cuda.jit
def fast_matmul(A, B, C):
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=float64)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=float64)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bpg = cuda.gridDim.x
    tmp = 0.0
    for i in range(bpg):
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]
        cuda.syncthreads()
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


@cuda.jit
def fast_matmul_f32(A, B, C):
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bpg = cuda.gridDim.x
    tmp = float32(0.0)
    for i in range(bpg):
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]
        cuda.syncthreads()
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


def matmul(A, B, kernel=fast_matmul):
    """A @ B for square n x n matrices (the documented kernel's requirement)."""
    n = A.shape[0]
    d_a, d_b = cuda.to_device(A), cuda.to_device(B)
    d_c = cuda.device_array_like(d_a)
    blocks = (n + TPB - 1) // TPB
    kernel[(blocks, blocks), (TPB, TPB)](d_a, d_b, d_c)
    return d_c.copy_to_host()


# --- shared-memory inclusive prefix sum (Hillis-Steele) --------------------------------------
SCAN_TPB = 16


@cuda.jit
def block_inclusive_scan(x, out):
    buf = cuda.shared.array(SCAN_TPB, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        buf[t] = x[i]
    else:
        buf[t] = 0.0
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        v = 0.0
        if t >= offset:
            v = buf[t - offset]
        cuda.syncthreads()  # everyone has read before anyone writes
        buf[t] += v
        cuda.syncthreads()
        offset *= 2
    if i < x.shape[0]:
        out[i] = buf[t]


def prefix_sums(x):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    block_inclusive_scan[(x.shape[0] + SCAN_TPB - 1) // SCAN_TPB, SCAN_TPB](d_x, d_out)
    return d_out.copy_to_host()


# --- warp scan, butterfly reduction and votes ------------------------------------------------
WARP = 32


@cuda.jit
def warp_scan_and_votes(x, scan, total, first, ballots, votes):
    i = cuda.grid(1)
    lane = cuda.laneid
    v = 0.0
    if i < x.shape[0]:
        v = x[i]
    s = v
    d = 1
    while d < WARP:  # inclusive scan: lane l adds lane l - d
        up = cuda.shfl_up_sync(0xFFFFFFFF, s, d)
        if lane >= d:
            s += up
        d *= 2
    t = v
    m = 16
    while m > 0:  # butterfly: every lane ends with the warp's sum
        t += cuda.shfl_xor_sync(0xFFFFFFFF, t, m)
        m //= 2
    head = cuda.shfl_sync(0xFFFFFFFF, v, 0)  # broadcast lane 0's value
    big = cuda.ballot_sync(0xFFFFFFFF, v >= 0.5)
    some = cuda.any_sync(0xFFFFFFFF, v > 0.9)
    every = cuda.all_sync(0xFFFFFFFF, v >= 0.0)
    same = cuda.eq_sync(0xFFFFFFFF, v >= 2.0)
    if i < x.shape[0]:
        scan[i] = s
        total[i] = t
        first[i] = head * v
    if lane == 0:
        w = i // WARP
        ballots[w] = big
        votes[w, 0] = some
        votes[w, 1] = every
        votes[w, 2] = same


def warp_scans(x):
    """(per-warp inclusive scans, per-warp totals, lane-0 value times x) of x."""
    n = x.shape[0]
    warps = (n + WARP - 1) // WARP
    d_x = cuda.to_device(x)
    scan = cuda.device_array_like(d_x)
    total = cuda.device_array_like(d_x)
    first = cuda.device_array_like(d_x)
    ballots = cuda.device_array(warps, dtype=np.int32)
    votes = cuda.device_array((warps, 3), dtype=np.int32)
    warp_scan_and_votes[warps, WARP](d_x, scan, total, first, ballots, votes)
    return (scan.copy_to_host(), total.copy_to_host(), first.copy_to_host(),
            ballots.copy_to_host(), votes.copy_to_host())


@cuda.jit
def warp_aggregated_count(keys, counts):
    """counts[k] += #{i: keys[i] == k}, one atomic per group of equal keys in a warp."""
    i = cuda.grid(1)
    if i < keys.shape[0]:  # the last warp is partial: only these lanes are active
        k = keys[i]
        active = cuda.activemask()
        peers = cuda.match_any_sync(active, k)
        below = cuda.lanemask_lt()
        if (peers & below) == 0:  # the lowest lane of its group adds for the group
            size = 0
            p = peers & 0xFFFFFFFF
            while p:
                size += p & 1
                p >>= 1
            cuda.atomic.add(counts, k, size)


@cuda.jit
def warp_shared_reduce(x, out):
    """Warp-synchronous tree sum through shared memory, cuda.syncwarp() between steps."""
    buf = cuda.shared.array(64, float64)
    t = cuda.threadIdx.x
    lane = t % WARP
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncwarp()
    s = 16
    while s > 0:
        if lane < s:
            buf[t] += buf[t + s]
        cuda.syncwarp()
        s //= 2
    if lane == 0:
        out[i // WARP] = buf[t]


@cuda.jit
def warp_match_all(keys, same_mask, all_same):
    i = cuda.grid(1)
    mask, same = cuda.match_all_sync(0xFFFFFFFF, keys[i])
    same_mask[i] = mask
    all_same[i] = same


# --- nested loops with barriers, a branch uniform per block, 2-D blocks ----------------------
BX2 = 4
BY2 = 3


@cuda.jit
def smooth_tile_2d(u, out, n_outer, n_inner):
    tile = cuda.shared.array((BY2, BX2), float64)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    i = cuda.blockIdx.y * BY2 + ty
    j = cuda.blockIdx.x * BX2 + tx
    inside = i < u.shape[0] and j < u.shape[1]
    scale = 0.0
    if inside:
        scale = u[i, j]  # defined before every barrier, used after the last
    tile[ty, tx] = scale
    cuda.syncthreads()
    for outer in range(n_outer):
        for inner in range(n_inner):
            left = tile[ty, tx - 1] if tx > 0 else tile[ty, tx]
            cuda.syncthreads()
            tile[ty, tx] = 0.5 * (tile[ty, tx] + left) + 0.01 * outer
            cuda.syncthreads()
        if cuda.blockIdx.x % 2 == 0:  # the same for every thread of a block
            up = tile[ty - 1, tx] if ty > 0 else tile[ty, tx]
            cuda.syncthreads()
            tile[ty, tx] = 0.5 * (tile[ty, tx] + up)
            cuda.syncthreads()
    if inside:
        out[i, j] = tile[ty, tx] + 0.1 * scale * scale


def smooth_tiles(u, n_outer=2, n_inner=2):
    ny, nx = u.shape
    d_u = cuda.to_device(u)
    d_out = cuda.device_array_like(d_u)
    grid = ((nx + BX2 - 1) // BX2, (ny + BY2 - 1) // BY2)
    smooth_tile_2d[grid, (BX2, BY2)](d_u, d_out, n_outer, n_inner)
    return d_out.copy_to_host()


@cuda.jit
def block_sums_3d(u, out):
    """Sum of each (2, 2, 2)-block of a 3-D array through a 3-D shared tile."""
    tile = cuda.shared.array((2, 2, 2), float64)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    tz = cuda.threadIdx.z
    x, y, z = cuda.grid(3)
    v = 0.0
    if x < u.shape[0] and y < u.shape[1] and z < u.shape[2]:
        v = u[x, y, z]
    tile[tx, ty, tz] = v * v
    cuda.syncthreads()
    if tx == 0 and ty == 0 and tz == 0:
        s = 0.0
        for a in range(2):
            for b in range(2):
                for c in range(2):
                    s += tile[a, b, c]
        out[cuda.blockIdx.x, cuda.blockIdx.y, cuda.blockIdx.z] = s


def block_sums(u):
    shape = tuple((d + 1) // 2 for d in u.shape)
    d_u = cuda.to_device(u)
    d_out = cuda.device_array(shape, dtype=np.float64)
    block_sums_3d[shape, (2, 2, 2)](d_u, d_out)
    return d_out.copy_to_host()


# --- shared arrays of several dtypes, with atomics -------------------------------------------
NBINS = 6
HIST_TPB = 16


@cuda.jit
def shared_histogram(x, hist, energy):
    counts = cuda.shared.array(NBINS, int32)
    sums = cuda.shared.array(NBINS, float64)
    t = cuda.threadIdx.x
    if t < NBINS:
        counts[t] = 0
        sums[t] = 0.0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < x.shape[0]:
        b = min(int(x[i] * NBINS), NBINS - 1)
        cuda.atomic.add(counts, b, 1)
        cuda.atomic.add(sums, b, x[i] * x[i])
    cuda.syncthreads()
    if t < NBINS:
        cuda.atomic.add(hist, t, counts[t])
        cuda.atomic.add(energy, t, sums[t])


def histogram(x):
    d_x = cuda.to_device(x)
    hist = cuda.to_device(np.zeros(NBINS, np.int32))
    energy = cuda.to_device(np.zeros(NBINS))
    shared_histogram[(x.shape[0] + HIST_TPB - 1) // HIST_TPB, HIST_TPB](d_x, hist, energy)
    return hist.copy_to_host(), energy.copy_to_host()


# --- dynamic shared memory in float32 --------------------------------------------------------
@cuda.jit
def reverse_in_blocks(x, out):
    s = cuda.shared.array(0, dtype=float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n = cuda.blockDim.x
    s[t] = x[i]
    cuda.syncthreads()
    out[i] = s[n - 1 - t] * s[t]


def reversed_products(x, tpb=8):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    reverse_in_blocks[x.shape[0] // tpb, tpb, 0, tpb * 4](d_x, d_out)
    return d_out.copy_to_host()


# --- a per-thread local array kept across barriers -------------------------------------------
SEG = 8


@cuda.jit
def local_history(u, out, n_steps):
    hist = cuda.local.array(4, float64)
    seg = cuda.shared.array(SEG, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    v = 0.0
    if i < u.shape[0]:
        v = u[i]
    for step in range(n_steps):
        hist[step % 4] = v
        seg[t] = v
        cuda.syncthreads()
        right = seg[(t + 1) % SEG]
        cuda.syncthreads()
        v = 0.5 * (v + right) + 0.1 * math.sin(v)
    acc = 0.0
    for k in range(4):
        acc += hist[k] * (k + 1)
    if i < u.shape[0]:
        out[i] = acc


def histories(u, n_steps=5):
    d_u = cuda.to_device(u)
    d_out = cuda.device_array_like(d_u)
    local_history[(u.shape[0] + SEG - 1) // SEG, SEG](d_u, d_out, n_steps)
    return d_out.copy_to_host()


# --- while cuda.syncthreads_or(...), and a uniform break -------------------------------------
PROP_TPB = 8


@cuda.jit
def suffix_max(x, out):
    """Each thread ends with the maximum of x over itself and the threads after it in its block."""
    s = cuda.shared.array(PROP_TPB, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        s[t] = x[i]
    else:
        s[t] = -1e300
    cuda.syncthreads()
    changed = 1
    while cuda.syncthreads_or(changed):
        right = s[t + 1] if t + 1 < PROP_TPB else s[t]
        cuda.syncthreads()
        changed = 0
        if right > s[t]:
            s[t] = right
            changed = 1
    if i < x.shape[0]:
        out[i] = s[t]


@cuda.jit
def suffix_max_break(x, out):
    """The same with a for loop that the whole block leaves with break."""
    s = cuda.shared.array(PROP_TPB, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.shape[0] else -1e300
    cuda.syncthreads()
    for sweep in range(4 * PROP_TPB):
        right = s[t + 1] if t + 1 < PROP_TPB else s[t]
        cuda.syncthreads()
        stable = 1
        if right > s[t]:
            s[t] = right
            stable = 0
        if cuda.syncthreads_and(stable):
            break
    if i < x.shape[0]:
        out[i] = s[t]


def suffix_maxima(x, kernel=suffix_max):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    kernel[(x.shape[0] + PROP_TPB - 1) // PROP_TPB, PROP_TPB](d_x, d_out)
    return d_out.copy_to_host()


# --- per-thread state of other kinds: a tuple, an array view, an int that becomes a float ------
@cuda.jit
def rows_through_shared(u, out):
    row_sums = cuda.shared.array(8, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    shape = u.shape  # a tuple kept across the barrier
    row = u[min(i, shape[0] - 1)]  # an array view kept per thread
    acc = 0  # an int that the loop makes a float
    for k in range(shape[1]):
        acc += row[k]
    row_sums[t] = acc
    cuda.syncthreads()
    for step in range(4):
        if step == 2:
            continue  # every thread skips the rest of this iteration: no barrier is left out
        acc = acc + 0.25 * row_sums[(t + step) % 8]
        cuda.syncthreads()
    if i < shape[0]:
        out[i] = acc * row[0]


def row_mix(u):
    d_u = cuda.to_device(u)
    d_out = cuda.device_array(u.shape[0], dtype=np.float64)
    rows_through_shared[(u.shape[0] + 7) // 8, 8](d_u, d_out)
    return d_out.copy_to_host()


# --- a device function that synchronises and returns early -----------------------------------
@cuda.jit(device=True)
def exchange_with_left(buf, t, v):
    cuda.syncthreads()  # the previous exchange has been read
    buf[t] = v
    cuda.syncthreads()
    if t == 0:
        return buf[0]
    return 0.5 * (buf[t - 1] + v)


@cuda.jit
def left_average(u, out):
    buf = cuda.shared.array(SEG, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    v = u[i] if i < u.shape[0] else 0.0
    w = exchange_with_left(buf, t, v)
    w = exchange_with_left(buf, t, w * w)  # inlined twice: its own barrier each time
    if i < u.shape[0]:
        out[i] = w


def left_averages(u):
    d_u = cuda.to_device(u)
    d_out = cuda.device_array_like(d_u)
    left_average[(u.shape[0] + SEG - 1) // SEG, SEG](d_u, d_out)
    return d_out.copy_to_host()


@cuda.jit(device=True)
def rotate_through_shared(t, v, write):
    buf = cuda.shared.array(SEG, float64)  # one array per block, whichever call declares it
    cuda.syncthreads()
    if write:
        buf[t] = v
    cuda.syncthreads()
    return buf[(t + 1) % SEG]


@cuda.jit
def shared_array_in_device_function(u, out):
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    a = rotate_through_shared(t, u[i], True)
    b = rotate_through_shared(t, 0.0, False)  # reads what the first call wrote
    out[i] = a * b


def rotated_squares(u):
    d_u = cuda.to_device(u)
    d_out = cuda.device_array_like(d_u)
    shared_array_in_device_function[u.shape[0] // SEG, SEG](d_u, d_out)
    return d_out.copy_to_host()


# --- a grid group handed to a device function ------------------------------------------------
@cuda.jit(device=True)
def relax_and_sync(g, src, dst, i, k):
    n = src.shape[0]
    left = src[i - 1] if i > 0 else src[i]
    right = src[i + 1] if i < n - 1 else src[i]
    dst[i] = src[i] + k * (left - 2.0 * src[i] + right)
    g.sync()


@cuda.jit
def grid_relax(a, b, steps, k):
    i = cuda.grid(1)
    if i >= a.shape[0]:
        return
    g = cuda.cg.this_grid()
    for s in range(steps):
        relax_and_sync(g, a, b, i, k)
        relax_and_sync(g, b, a, i, k)


def relax(u, steps=3, k=0.2, tpb=16):
    d_a = cuda.to_device(u)
    d_b = cuda.device_array_like(d_a)
    grid_relax[(u.shape[0] + tpb - 1) // tpb, tpb](d_a, d_b, steps, k)
    return d_a.copy_to_host()


# --- kernels that break CUDA's rules: each must fail with a clear message --------------------
@cuda.jit
def divergent_barrier(x):
    t = cuda.threadIdx.x
    if t < 4:
        cuda.syncthreads()  # only half of the block gets here
    x[cuda.grid(1)] = t


@cuda.jit
def shuffle_from_exited_lane(x, out):
    i = cuda.grid(1)
    if i >= x.shape[0]:
        return
    out[i] = cuda.shfl_down_sync(0xFFFFFFFF, x[i], 1)


@cuda.jit
def mask_without_self(x):
    i = cuda.grid(1)
    x[i] = cuda.shfl_sync(0x1, x[i], 0)


@cuda.jit
def barrier_in_conditional_expression(x):
    i = cuda.grid(1)
    x[i] = cuda.syncthreads_count(1) if i > 3 else 0


@cuda.jit
def barrier_in_loop_over_array(x, values):
    for v in values:
        cuda.syncthreads()
        x[cuda.grid(1)] += v


@cuda.jit
def shared_size_from_argument(x, n):
    tile = cuda.shared.array(n, float64)
    tile[0] = x[0]


@cuda.jit(device=True)
def recursive_sync(x, depth):
    cuda.syncthreads()
    if depth > 0:
        recursive_sync(x, depth - 1)


@cuda.jit
def calls_recursive_sync(x):
    recursive_sync(x, 2)


@cuda.jit
def grid_group_misused(x):
    g = cuda.cg.this_grid()
    x[cuda.grid(1)] = g.size
