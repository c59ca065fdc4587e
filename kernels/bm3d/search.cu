// The exhaustive search of each reference patch in its own frame, for window references (the
// `high` profile): its result does not depend on the target frame, so it is computed once per
// frame and step and kept while the frame stays in the window (src/bm3d/cuda.rs `SearchCache`);
// bm3d_step (group.cu) starts from it instead of searching again, then searches the other frames
// predictively as before. The candidates and their order are those of the definition
// (src/bm3d/mod.rs); only the arithmetic's order differs from group.cu's (f32 rounding).
//
// One warp per reference patch r (refs_x x refs_y of the frame at `ref_code`), WARPS per block.
//   1. Distances: the candidates' corners (cols x rows within the search radius) are cut into
//      tasks of one column and 8 consecutive rows; a lane reads each of the 15 image rows of its
//      task once (8 samples into registers) and adds each to the 8 candidates that use it, with the
//      reference patch (one plane) in registers: 15 x 8 reads for 8 x 64 squared differences, where
//      scoring one candidate at a time reads 64 samples for 64. Sums go to the warp's distance array
//      in shared memory, plane after plane.
//   2. One pass over the distances: those within tau go to the warp's running selection of the
//      best NMAX - 1 (WarpBest, select.cuh: a compare per candidate, merges of 32 while the
//      selection still changes), every one to its lane's list of the best SEEDS - 1. Kept apart
//      from step 1 so that its registers (the reference plane, 8 sums) are free here.
//   3. Output, cache (shape [refs][NMAX + SEEDS] u64 keys of frame code 0, KEY_NONE where none):
//      [0, NMAX - 1) the group candidates ascending, [NMAX - 1, NMAX - 1 + SEEDS - 1) the seeds.
//
// Shared memory per warp (the host sizes it, src/bm3d/cuda.rs `search_floats`): the
// distances ((2 radius + 1)^2 floats), the selection's queue (64 keys) and the reference patch of
// one plane; `search_floats` in all, an even count (the keys are 8-byte aligned).

#define SEARCH_ROWS 8  // candidate rows of a task
#define SEARCH_MIN_BLOCKS 3  // blocks per SM: up to 168 registers a thread

template <bool WIENER>
struct SearchOut {
    static constexpr int NMAX = WIENER ? NMAX_WIENER : NMAX_HARD;
    static constexpr int GROUP = NMAX - 1;  // group candidates after R
    static constexpr int STRIDE = NMAX + SEEDS;  // keys per reference patch (>= GROUP + SEEDS - 1)
};

// Row `y` (clamped to the plane's last usable row: rows of masked candidates) of 8 samples from
// column x of plane j of the frame at `code`, in 8-bit units.
template <bool WIENER, bool MIRROR>
__device__ __forceinline__ void search_row(const Bm3dArgs& a, int code, int j, int x, int y, float (&v)[PATCH])
{
    if (MIRROR || WIENER) {
#pragma unroll
        for (int c = 0; c < PATCH; ++c) v[c] = MIRROR ? match_at<WIENER>(a, code, j, x + c, y) : __ldg(basic_plane(a, code, j) + y * a.w + x + c);
    } else {
#if SAMPLE_BYTES == 1
        const unsigned char* p = noisy_plane(a, code, j) + y * a.w + x;
#pragma unroll
        for (int c = 0; c < PATCH; ++c) v[c] = (float)__ldg(p + c);
#else
        const unsigned short* p = (const unsigned short*)noisy_plane(a, code, j) + y * a.w + x;
#pragma unroll
        for (int c = 0; c < PATCH; ++c) v[c] = (float)__ldg(p + c) * a.inv_scale;
#endif
    }
}

// Steps 2 and 3 for reference patch r (global index) from its distances: `dist` holds the
// distance of corner (xa + c, ya + y) at [y * stride + c], for cols x rows corners (`count`), R at
// row y_r, column c_r; `queue`: the warp's 64 shared keys. Warp-collective.
template <bool WIENER>
__device__ __forceinline__ void search_select(const Bm3dArgs& a, int r, const float* dist, int stride, u64* queue, int xa, int ya, int cols, int count, int y_r, int c_r, int lane)
{
    using Out = SearchOut<WIENER>;
    constexpr int NSEEDS = SEEDS - 1;  // seeds written per patch
    // 2. Selection: the group (within tau), R left out.
    WarpBest<Out::GROUP> top;
    top.start(queue, lane, KEY_NONE);
    for (int base = 0; base < count; base += 32) {
        const int i = base + lane;
        const int y = i / cols, c = i - y * cols;
        const bool ok = i < count && !(y == y_r && c == c_r);
        const float d = ok ? dist[y * stride + c] : 0.0f;
        top.offer(ok && d <= a.tau_ssd, make_key(d, 0, ya + y, xa + c));
    }
    top.finish();

    // The seeds are the best NSEEDS at any distance: the group's first NSEEDS where it has that
    // many (a key within tau is below every key beyond it); otherwise a second pass, each lane
    // keeping its best in registers.
    u64* out = (u64*)a.cache + (u64)r * Out::STRIDE;
    const bool from_group = NSEEDS <= Out::GROUP && __shfl_sync(0xFFFFFFFFu, top.best, NSEEDS > 0 ? NSEEDS - 1 : 0) != KEY_NONE;
    if (from_group) {
        if (lane < NSEEDS) out[Out::GROUP + lane] = lane + 1 < a.n_seeds ? top.best : KEY_NONE;
    } else {
        u64 seed_list[SEEDS];
        list_clear(seed_list);
        for (int i = lane; i < count; i += 32) {
            const int y = i / cols, c = i - y * cols;
            if (y == y_r && c == c_r) continue;
            list_insert(seed_list, make_key(dist[y * stride + c], 0, ya + y, xa + c));
        }
        for (int s = 0; s < NSEEDS; ++s) {
            const u64 k = warp_take_best(seed_list);
            if (lane == 0) out[Out::GROUP + s] = s + 1 < a.n_seeds ? k : KEY_NONE;
        }
    }
    // 3. Output.
    if (lane < Out::GROUP) out[lane] = top.best;
}

template <bool WIENER, bool MIRROR>
__device__ void bm3d_search(const Bm3dArgs& a)
{
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int r = blockIdx.x * WARPS + warp;
    if (r >= a.refs_x * a.refs_y) return;  // whole warps leave together
    float* dist = smem + warp * a.search_floats;   // cols x rows distances
    float* refp = dist + a.search_floats - PP;     // one plane of the reference patch
    u64* queue = (u64*)(refp - 128);                // 64 keys (WarpBest)

    const int x0 = corner(r % a.refs_x, a.block_step, a.ew);
    const int y0 = corner(r / a.refs_x, a.block_step, a.eh);
    const int max_x = a.ew - PATCH, max_y = a.eh - PATCH;
    const int xa = max(x0 - a.radius, 0), xb = min(x0 + a.radius, max_x);
    const int ya = max(y0 - a.radius, 0), yb = min(y0 + a.radius, max_y);
    const int cols = xb - xa + 1, rows = yb - ya + 1, count = cols * rows;
    const int chunks = (rows + SEARCH_ROWS - 1) / SEARCH_ROWS, tasks = cols * chunks;

    // 1. Distances.
    for (int j = 0; j < a.n_planes; ++j) {
        __syncwarp();
        for (int e = lane; e < PP; e += 32) refp[e] = match_at<WIENER>(a, a.ref_code, j, x0 + e % PATCH, y0 + e / PATCH);
        __syncwarp();
        float ref[PP];
#pragma unroll
        for (int e = 0; e < PP; ++e) ref[e] = refp[e];
        for (int t = lane; t < tasks; t += 32) {
            const int c = t % cols, y_first = ya + (t / cols) * SEARCH_ROWS;
            const int x = xa + c;
            // One sum per candidate: the 8 candidates' FMAs interleave, so none waits on its own.
            float acc[SEARCH_ROWS];
#pragma unroll
            for (int k = 0; k < SEARCH_ROWS; ++k) acc[k] = 0.0f;
#pragma unroll
            for (int row = 0; row < SEARCH_ROWS + PATCH - 1; ++row) {
                float v[PATCH];
                search_row<WIENER, MIRROR>(a, a.ref_code, j, x, min(y_first + row, max_y + PATCH - 1), v);
#pragma unroll
                for (int k = 0; k < SEARCH_ROWS; ++k) {
                    const int i = row - k;  // reference row matched with this image row by candidate k
                    if (i < 0 || i >= PATCH) continue;
#pragma unroll
                    for (int cc = 0; cc < PATCH; ++cc) {
                        const float d = ref[i * PATCH + cc] - v[cc];
                        acc[k] = fmaf(d, d, acc[k]);
                    }
                }
            }
#pragma unroll
            for (int k = 0; k < SEARCH_ROWS; ++k) {
                const int y = y_first + k;
                if (y > yb) break;
                const int idx = (y - ya) * cols + c;
                dist[idx] = (j == 0 ? 0.0f : dist[idx]) + acc[k];
            }
        }
    }
    __syncwarp();
    search_select<WIENER>(a, r, dist, cols, queue, xa, ya, cols, count, y0 - ya, x0 - xa, lane);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, SEARCH_MIN_BLOCKS) bm3d_search_hard(const Bm3dArgs a)
{
    if (a.w >= PATCH && a.h >= PATCH) bm3d_search<false, false>(a);
    else bm3d_search<false, true>(a);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, SEARCH_MIN_BLOCKS) bm3d_search_wiener(const Bm3dArgs a)
{
    if (a.w >= PATCH && a.h >= PATCH) bm3d_search<true, false>(a);
    else bm3d_search<true, true>(a);
}
