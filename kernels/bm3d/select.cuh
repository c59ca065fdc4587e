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
