// Ranking candidates: a candidate is one 64-bit key (distance bits, frame code, row, column), so
// that "smaller key" is the group order of the definition (src/bm3d/mod.rs). Each lane keeps the
// best keys it saw in a short sorted list in registers; the warp then takes the best of all lists.
#pragma once

#define KEY_NONE 0xFFFFFFFFFFFFFFFFull

__device__ __forceinline__ u64 make_key(float ssd, int code, int y, int x)
{
    return ((u64)__float_as_uint(ssd) << 32) | ((u64)code << 28) | ((u64)y << 14) | (u64)x;
}

__device__ __forceinline__ int key_code(u64 k) { return (int)((k >> 28) & 0xF); }
__device__ __forceinline__ int key_y(u64 k) { return (int)((k >> 14) & 0x3FFF); }
__device__ __forceinline__ int key_x(u64 k) { return (int)(k & 0x3FFF); }

// Inserts k into the ascending list L (its CAP smallest keys; KEY_NONE marks free entries).
// Unrolled with constant indices, so the list stays in registers.
template <int CAP>
__device__ __forceinline__ void list_insert(u64 (&L)[CAP], u64 k)
{
    if (k >= L[CAP - 1]) return;
#pragma unroll
    for (int i = CAP - 1; i > 0; --i) {
        const u64 above = L[i - 1];
        L[i] = k < above ? above : (k < L[i] ? k : L[i]);
    }
    L[0] = k < L[0] ? k : L[0];
}

// Removes the head of L.
template <int CAP>
__device__ __forceinline__ void list_pop(u64 (&L)[CAP])
{
#pragma unroll
    for (int i = 0; i < CAP - 1; ++i) L[i] = L[i + 1];
    L[CAP - 1] = KEY_NONE;
}

__device__ __forceinline__ u64 warp_min(u64 v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const u64 w = __shfl_xor_sync(0xFFFFFFFFu, v, o);
        v = w < v ? w : v;
    }
    return v;
}

// The warp's best key over every lane's list (KEY_NONE when all are empty); the lane that held it
// drops it. Keys are unique (one per position), so exactly one lane pops.
template <int CAP>
__device__ __forceinline__ u64 warp_take_best(u64 (&L)[CAP])
{
    const u64 best = warp_min(L[0]);
    if (best != KEY_NONE && L[0] == best) list_pop(L);
    return best;
}

template <int CAP>
__device__ __forceinline__ void list_clear(u64 (&L)[CAP])
{
#pragma unroll
    for (int i = 0; i < CAP; ++i) L[i] = KEY_NONE;
}

// Ascending bitonic sort of one key per lane across the warp.
__device__ __forceinline__ u64 warp_sort(u64 v, int lane)
{
#pragma unroll
    for (int k = 2; k <= 32; k <<= 1) {
#pragma unroll
        for (int j = k >> 1; j > 0; j >>= 1) {
            const u64 o = __shfl_xor_sync(0xFFFFFFFFu, v, j);
            const bool keep_min = ((lane & j) == 0) == ((lane & k) == 0);
            v = keep_min ? (o < v ? o : v) : (o > v ? o : v);
        }
    }
    return v;
}

// The 32 smallest of two sets of 32 keys, ascending across the lanes: `best` sorted ascending
// (lane i the i-th smallest), `batch` in any order. The batch is sorted, reversed against `best`
// and the smaller of each pair kept (a bitonic sequence holding the 32 smallest), then merged.
__device__ __forceinline__ u64 warp_merge(u64 best, u64 batch, int lane)
{
    batch = warp_sort(batch, lane);
    const u64 rev = __shfl_sync(0xFFFFFFFFu, batch, 31 - lane);
    u64 v = best < rev ? best : rev;
#pragma unroll
    for (int j = 16; j > 0; j >>= 1) {
        const u64 o = __shfl_xor_sync(0xFFFFFFFFu, v, j);
        v = (lane & j) == 0 ? (o < v ? o : v) : (o > v ? o : v);
    }
    return v;
}

// The K (<= 32) smallest keys a warp offers, kept across the lanes: lane i holds the i-th smallest
// merged so far (KEY_NONE where fewer). Offered keys at or above the current K-th smallest (`cut`)
// are dropped at once; the others wait in a shared queue of 64 keys and are merged 32 at a time,
// so a candidate costs a compare unless it can still enter (per-lane sorted lists cost an
// insertion of K compares for every candidate within tau, and K registers a lane).
// Every member is warp-collective: all 32 lanes call it with the same arguments' shape.
template <int K>
struct WarpBest {
    u64 best;    // this lane's slot
    u64 cut;     // warp-uniform: only keys below it can enter
    int queued;  // warp-uniform: keys waiting in `queue`
    u64* queue;  // shared, 64 keys of this warp
    int lane;

    __device__ __forceinline__ void start(u64* q, int l, u64 initial)
    {
        queue = q;
        lane = l;
        best = initial;
        queued = 0;
        update_cut();
    }

    __device__ __forceinline__ void update_cut()
    {
        cut = K > 0 ? __shfl_sync(0xFFFFFFFFu, best, K > 0 ? K - 1 : 0) : 0;
    }

    // This lane offers `key` where `ok`.
    __device__ __forceinline__ void offer(bool ok, u64 key)
    {
        ok = ok && key < cut;
        const unsigned m = __ballot_sync(0xFFFFFFFFu, ok);
        if (m == 0) return;
        if (ok) queue[queued + __popc(m & ((1u << lane) - 1u))] = key;
        queued += __popc(m);
        if (queued >= 32) merge_queued();
    }

    __device__ __forceinline__ void merge_queued()
    {
        __syncwarp();
        const u64 batch = lane < queued ? queue[lane] : KEY_NONE;
        const u64 rest = lane + 32 < queued ? queue[lane + 32] : KEY_NONE;
        __syncwarp();
        if (lane + 32 < queued) queue[lane] = rest;
        __syncwarp();
        queued = queued > 32 ? queued - 32 : 0;
        best = warp_merge(best, batch, lane);
        update_cut();
    }

    // Merges what still waits (at most 31 keys after any offer).
    __device__ __forceinline__ void finish()
    {
        if (queued > 0) merge_queued();
    }
};
