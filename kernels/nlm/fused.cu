// Fused temporal non-local means: one launch computes the weight groups of one kernel shape (all
// planes of I420, say: each group's tiles in turn along blockIdx.x, see nlm_args.cuh) of one frame
// (or, batched, of one job per blockIdx.z).
//
// The definition is src/nlm/reference.rs. Per block, a TILE_W x TILE_H tile of output
// samples (with patch-wise aggregation, AGG_R below: the tile whose weights the block computes,
// of which it writes the inner samples); per frame u of the window the block stages in shared memory (as float, borders
// mirrored like src/planar.rs) the target's guide tile + patch halo (once), u's guide tile + patch
// and search halo, and u's output-plane tile + search halo. For each search offset the patch
// distance of every output sample is a separable box sum of squared differences:
//
//   phase 1  horizontal sums H[dx][row][x] for DX_GROUP offsets at once. A thread takes a run of
//            RUN_W outputs of one guide row, keeps the target run and the reference window in
//            registers, and slides the window by dx (shared-memory loads are reused across dx).
//   phase 2  vertical sums of H down a column (one thread per column and ROWS rows), built as
//            weight exponents, turned into weights and accumulated in registers (weight.cuh).
//
// Nothing per offset goes to device memory. Compile-time constants (-D, set by
// src/nlm/cuda/variant.rs; the defaults below only let the file compile on its own):
#ifndef SEARCH_R
#define SEARCH_R 3      // search radius a: offsets -a..a in x and y
#endif
#ifndef PATCH_R
#define PATCH_R 2       // patch radius s: (2s+1)^2 samples per guide plane
#endif
#ifndef N_GUIDES
#define N_GUIDES 1      // planes the distance is measured on
#endif
#ifndef N_OUTPUTS
#define N_OUTPUTS 1     // planes averaged with the same weights
#endif
#ifndef STEP_X
#define STEP_X 1        // guide position = output position * step (2 for 4:2:0 luma-guided chroma)
#endif
#ifndef STEP_Y
#define STEP_Y 1
#endif
#ifndef SAMPLE_BYTES
#define SAMPLE_BYTES 1  // 1: 8-bit samples, 2: 16-bit little-endian samples
#endif
#ifndef TILE_H
#define TILE_H 28       // rows whose weights a block computes (its output rows unless AGG_R > 0)
#endif
#ifndef RUN_W
#define RUN_W 8         // outputs per phase-1 run
#endif
#ifndef DX_GROUP
#define DX_GROUP 7      // search offsets per phase-1/phase-2 round
#endif
#ifndef THREADS
#define THREADS 128
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1    // __launch_bounds__ minimum resident blocks per SM (caps registers)
#endif
// 1 when every output plane is its own guide plane, at the same size (independent planes, joint
// RGB): frame u's output tile is then part of its staged guide window and is not staged again.
#ifndef OUTPUTS_ARE_GUIDES
#define OUTPUTS_ARE_GUIDES 0
#endif

#define TILE_W 32       // columns whose weights a block computes: one warp across in phase 2

// Patch-wise aggregation radius r (src/nlm/reference.rs): each offset's weights are summed over the
// (2r+1)^2 positions around an output sample before they weigh its value. A block then computes
// weights on its TILE_W x TILE_H tile but writes only the inner (TILE_W - 2r) x (TILE_H - 2r)
// samples; the ring of r is the halo their box sums need (computed again by the neighbouring
// block). Weights are absolute, without the exact f64 path (as the CPU backend's aggregated path):
// a sample whose largest weight is below float's range keeps its input.
#ifndef AGG_R
#define AGG_R 0
#endif
constexpr int OUT_TW = TILE_W - 2 * AGG_R;   // output columns per block

// Half-width of the window around a rounding tie (x.5) inside which float accumulation cannot be
// trusted to round like the f64 definition (same rule as the CPU backend): 5e-4 8-bit code values
// for 8- and 10-bit samples; deeper formats' tolerance is wider than their float error.
#ifndef TIE_WINDOW
#define TIE_WINDOW 0.f
#endif

#if SAMPLE_BYTES == 1
typedef unsigned char sample_t;
#define MAX_VALUE 255.f
// 8-bit squared differences and their sums are integers below 2^24: running sums are exact.
#define SLIDING_SUMS 1
#else
typedef unsigned short sample_t;
#define MAX_VALUE 65535.f
#define SLIDING_SUMS 0
#endif

constexpr int OUT_TH = TILE_H - 2 * AGG_R;   // output rows per block
static_assert(OUT_TW > 0 && OUT_TH > 0, "the aggregation halo must leave output samples");
constexpr int PATCH_D = 2 * PATCH_R + 1;
constexpr int SEARCH_D = 2 * SEARCH_R + 1;
constexpr int N_DX_GROUPS = (SEARCH_D + DX_GROUP - 1) / DX_GROUP;
constexpr int DX_SPAN = N_DX_GROUPS * DX_GROUP;          // offsets per row, padded to groups
constexpr int ROW_GROUPS = THREADS / TILE_W;
constexpr int ROWS = TILE_H / ROW_GROUPS;                 // phase-2 outputs per thread
constexpr int RUNS_PER_ROW = TILE_W / RUN_W;
constexpr int GUIDE_ROWS = STEP_Y * (TILE_H - 1) + PATCH_D;               // rows of H
constexpr int RUN_T = STEP_X * (RUN_W - 1) + PATCH_D;                      // target run
constexpr int RUN_R = STEP_X * (RUN_W - 1 + DX_GROUP - 1) + PATCH_D;      // reference window
constexpr int H_ROWS_PER_THREAD = STEP_Y * (ROWS - 1) + PATCH_D;

// Phase 1 reads its target run and reference window as 16-byte vectors where every run starts on
// a 4-float boundary (unit step, runs of a multiple of 4, one offset group or groups of a
// multiple of 4): 8 loads instead of 30 per R-live run. The run's reads then reach up to the
// next multiple of 4 (the rounded extents below).
// VEC_LOADS_WANTED (host, KernelVariant::vec_loads): 0 where the wider pitches below would cost
// a resident block per SM.
#ifndef VEC_LOADS_WANTED
#define VEC_LOADS_WANTED 1
#endif
constexpr bool VEC_LOADS = VEC_LOADS_WANTED && STEP_X == 1 && RUN_W % 4 == 0 && (N_DX_GROUPS == 1 || DX_GROUP % 4 == 0);
__host__ __device__ constexpr int round4(int n) { return (n + 3) / 4 * 4; }
constexpr int T_READ = TILE_W - RUN_W + round4(RUN_T);                                 // per row
constexpr int R_READ = TILE_W - RUN_W + (N_DX_GROUPS - 1) * DX_GROUP + round4(RUN_R);
// Shared-memory arrays (floats). Pitches keep phase-1 runs of one warp on distinct banks: odd for
// scalar loads; 4 mod 8 for vector loads (a quarter warp, whose 16-byte loads are served
// together, reads two rows of 4 runs: the second row's banks fall between the first's), and of
// those 12 mod 16: with a target pitch of 36 instead of 44 ptxas spilled R-live's staging
// registers (48 bytes), which cost more than the vector loads saved (H100 run 38).
// H rows are padded by 4 so that 16-byte stores of neighbouring rows do not collide.
__host__ __device__ constexpr int max_int(int a, int b) { return a > b ? a : b; }
__host__ __device__ constexpr int run_pitch(int width, int read) { return VEC_LOADS ? (max_int(width, read) + 3) / 16 * 16 + 12 : width | 1; }
constexpr int H_PITCH = TILE_W + 4;
constexpr int T_W = STEP_X * (TILE_W - 1) + PATCH_D;
constexpr int T_PITCH = run_pitch(T_W, T_READ);
constexpr int R_W = STEP_X * (TILE_W + DX_SPAN - 2) + PATCH_D;
constexpr int R_H = GUIDE_ROWS + 2 * STEP_Y * SEARCH_R;
constexpr int R_PITCH = run_pitch(R_W, R_READ);
static_assert(!VEC_LOADS || (T_PITCH % 8 == 4 && R_PITCH % 8 == 4 && T_PITCH >= T_READ && R_PITCH >= R_READ),
              "vector loads need 4-mod-8 pitches that hold the rounded reads");
constexpr int O_W = TILE_W + DX_SPAN - 1;
constexpr int O_H = TILE_H + 2 * SEARCH_R;
#if OUTPUTS_ARE_GUIDES
static_assert(STEP_X == 1 && STEP_Y == 1 && N_OUTPUTS == N_GUIDES, "outputs must be the guides");
static_assert(R_W == O_W + 2 * PATCH_R && R_H == O_H + 2 * PATCH_R, "output window = guide window less the patch halo");
constexpr int O_PITCH = R_PITCH;                       // the output tile is read inside ref[]
constexpr int O_PLANE = R_H * R_PITCH;
constexpr int O_ORIGIN = PATCH_R * R_PITCH + PATCH_R;  // ref[] position of the output tile's first sample
#else
constexpr int O_PITCH = O_W | 1;
constexpr int O_PLANE = O_H * O_PITCH;
#endif

constexpr int H_FLOATS = DX_GROUP * GUIDE_ROWS * H_PITCH;
constexpr int T_FLOATS = N_GUIDES * GUIDE_ROWS * T_PITCH;
constexpr int R_FLOATS = N_GUIDES * R_H * R_PITCH;
constexpr int O_FLOATS = OUTPUTS_ARE_GUIDES ? 0 : N_OUTPUTS * O_PLANE;
constexpr int SMEM_FLOATS = H_FLOATS + T_FLOATS + R_FLOATS + O_FLOATS;

#ifdef SMEM_BYTES
static_assert(SMEM_FLOATS * 4 == SMEM_BYTES, "host (TileConfig::shared_bytes) and kernel disagree on the shared-memory layout");
#endif
static_assert(THREADS % TILE_W == 0 && TILE_H % ROW_GROUPS == 0, "tile rows must split evenly");
static_assert(TILE_W % RUN_W == 0, "runs must tile a row");
static_assert(N_GUIDES <= NLM_MAX_PLANES && N_OUTPUTS <= NLM_MAX_PLANES, "too many planes");

// Copies a ROWS_ x COLS_ window of a plane, whose top-left sample is (x0, y0), into shared memory
// as floats. A thread issues STAGE_BATCH loads before it stores any of them, so it waits for
// global memory once per batch instead of once per sample (a small batch keeps the registers the
// loads hold in check); a window inside the plane (all but the border tiles) skips the mirror
// arithmetic.
// (16 covers a whole R-live or R-knlm window per thread; 8 where more offsets or guide planes
// already hold many registers: larger batches spill there.)
constexpr int STAGE_BATCH = (N_GUIDES == 1 && N_DX_GROUPS == 1) ? 16 : 8;
template <int ROWS_, int COLS_>
__device__ __forceinline__ void stage_window(float* dst, int pitch, const unsigned char* plane, int w, int h, int x0,
                                             int y0)
{
    constexpr int N = ROWS_ * COLS_;
    constexpr int PER_THREAD = (N + THREADS - 1) / THREADS;
    const sample_t* p = reinterpret_cast<const sample_t*>(plane);
    if (x0 < 0 || y0 < 0 || x0 + COLS_ > w || y0 + ROWS_ > h) {
        // Border tiles: one sample at a time (few blocks; keeps the unrolled code small).
#pragma unroll 1
        for (int i = threadIdx.x; i < N; i += THREADS) {
            const int r = i / COLS_, c = i - r * COLS_;
            dst[r * pitch + c] = (float)p[mirror_index(y0 + r, h) * w + mirror_index(x0 + c, w)];
        }
        return;
    }
    const sample_t* origin = p + (long long)y0 * w + x0;
#pragma unroll 1
    for (int k0 = 0; k0 < PER_THREAD; k0 += STAGE_BATCH) {
        sample_t v[STAGE_BATCH];
#pragma unroll
        for (int k = 0; k < STAGE_BATCH; ++k) {
            const int i = threadIdx.x + (k0 + k) * THREADS;
            const int r = i / COLS_, c = i - r * COLS_;
            if (k0 + k < PER_THREAD && i < N) v[k] = origin[r * w + c];
        }
#pragma unroll
        for (int k = 0; k < STAGE_BATCH; ++k) {
            const int i = threadIdx.x + (k0 + k) * THREADS;
            const int r = i / COLS_, c = i - r * COLS_;
            if (k0 + k < PER_THREAD && i < N) dst[r * pitch + c] = (float)v[k];
        }
    }
}

// out[c] = in[STEP*c] + ... + in[STEP*c + PATCH_D - 1]
template <int N, int STEP, int LEN>
__device__ __forceinline__ void box_sums(const float (&in)[LEN], float (&out)[N])
{
    static_assert(STEP * (N - 1) + PATCH_D <= LEN, "box sum reads past its input");
    if constexpr (SLIDING_SUMS && STEP == 1) {
        float s = in[0];
#pragma unroll
        for (int k = 1; k < PATCH_D; ++k) s += in[k];
        out[0] = s;
#pragma unroll
        for (int c = 1; c < N; ++c) {
            s += in[c + PATCH_D - 1] - in[c - 1];
            out[c] = s;
        }
    } else {
#pragma unroll
        for (int c = 0; c < N; ++c) {
            float s = in[STEP * c];
#pragma unroll
            for (int k = 1; k < PATCH_D; ++k) s += in[STEP * c + k];
            out[c] = s;
        }
    }
}

// Exponents of a column of N patch-distance sums (out[c]: the sum of in[STEP*c ..
// STEP*c + PATCH_D - 1]): x = base - d k (weight.cuh). With exact sums (8-bit) and unit step the
// column slides: each exponent is the previous one moved by the exact change of its sum, one FMA
// instead of a running-sum add and an FMA.
template <int N, int STEP, int LEN>
__device__ __forceinline__ void exponents(const float (&in)[LEN], float (&out)[N], float base, float k)
{
    if constexpr (SLIDING_SUMS && STEP == 1) {
        static_assert(N - 1 + PATCH_D <= LEN, "exponents read past their input");
        float s = in[0];
#pragma unroll
        for (int c = 1; c < PATCH_D; ++c) s += in[c];
        float x = fmaf(-s, k, base);
        out[0] = x;
#pragma unroll
        for (int c = 1; c < N; ++c) {
            x = fmaf(in[c - 1] - in[c + PATCH_D - 1], k, x);
            out[c] = x;
        }
    } else {
        float d[N];
        box_sums<N, STEP>(in, d);
#pragma unroll
        for (int c = 0; c < N; ++c) out[c] = fmaf(-d[c], k, base);
    }
}

// Horizontal sum written for an offset that must not count (the target's centre, and offsets past
// the radius that pad the last group): every patch distance built from it is >= 1e30, whose
// weight is 0 in both formulas (weight.cuh), and running sums over it stay exact.
#define SKIP_H 1.0e30f

// dst[k] = row[k] with 16-byte loads (row 16-byte aligned; reads up to the next multiple of 4).
template <int N>
__device__ __forceinline__ void load_vec4(const float* row, float (&dst)[N])
{
#pragma unroll
    for (int k = 0; k < N; k += 4) {
        const float4 v = *reinterpret_cast<const float4*>(row + k);
        const float q[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int m = 0; m < 4; ++m)
            if (k + m < N) dst[k + m] = q[m];
    }
}

// Phase 1: horizontal patch sums of squared guide differences for offsets
// dx = first_dx + j, j < DX_GROUP, at vertical offset dy, into h_sums[j][row][x].
__device__ __forceinline__ void horizontal_sums(float* h_sums, const float* tgt, const float* ref, int dy, int first_dx,
                                                bool is_target)
{
    for (int run = threadIdx.x; run < GUIDE_ROWS * RUNS_PER_ROW; run += THREADS) {
        const int r = run / RUNS_PER_ROW;
        const int c0 = (run - r * RUNS_PER_ROW) * RUN_W;
        float t[N_GUIDES][RUN_T];
        float rv[N_GUIDES][RUN_R];
        const int ref_row = r + STEP_Y * (dy + SEARCH_R);
        const int ref_col = STEP_X * (c0 + first_dx + SEARCH_R);
#pragma unroll
        for (int g = 0; g < N_GUIDES; ++g) {
            const float* trow = tgt + (g * GUIDE_ROWS + r) * T_PITCH + STEP_X * c0;
            const float* rrow = ref + (g * R_H + ref_row) * R_PITCH + ref_col;
            if constexpr (VEC_LOADS) {
                // Both rows start on a 16-byte boundary (pitches, c0 and ref_col are multiples of 4).
                load_vec4(trow, t[g]);
                load_vec4(rrow, rv[g]);
            } else {
#pragma unroll
                for (int k = 0; k < RUN_T; ++k) t[g][k] = trow[k];
#pragma unroll
                for (int k = 0; k < RUN_R; ++k) rv[g][k] = rrow[k];
            }
        }
#pragma unroll
        for (int j = 0; j < DX_GROUP; ++j) {
            float hs[RUN_W];
            if constexpr (SLIDING_SUMS && STEP_X == 1) {
                // Differences once per sample; the running sum adds the entering and removes the
                // leaving square with one FMA each (integers below 2^24: exact, as summing first).
                float e[N_GUIDES][RUN_T];
#pragma unroll
                for (int g = 0; g < N_GUIDES; ++g)
#pragma unroll
                    for (int k = 0; k < RUN_T; ++k) e[g][k] = t[g][k] - rv[g][j + k];
                float s = 0.f;
#pragma unroll
                for (int k = 0; k < PATCH_D; ++k)
#pragma unroll
                    for (int g = 0; g < N_GUIDES; ++g) s = fmaf(e[g][k], e[g][k], s);
                hs[0] = s;
#pragma unroll
                for (int c = 1; c < RUN_W; ++c) {
#pragma unroll
                    for (int g = 0; g < N_GUIDES; ++g) {
                        s = fmaf(e[g][c + PATCH_D - 1], e[g][c + PATCH_D - 1], s);
                        s = fmaf(-e[g][c - 1], e[g][c - 1], s);
                    }
                    hs[c] = s;
                }
            } else {
                float d2[RUN_T];
#pragma unroll
                for (int k = 0; k < RUN_T; ++k) {
                    float s = 0.f;
#pragma unroll
                    for (int g = 0; g < N_GUIDES; ++g) {
                        const float e = t[g][k] - rv[g][STEP_X * j + k];
                        s = fmaf(e, e, s);
                    }
                    d2[k] = s;
                }
                box_sums<RUN_W, STEP_X>(d2, hs);
            }
            const int dx = first_dx + j;
            if ((DX_SPAN > SEARCH_D && dx > SEARCH_R) || (is_target && dy == 0 && dx == 0)) {
#pragma unroll
                for (int c = 0; c < RUN_W; ++c) hs[c] = SKIP_H;
            }
            float* dst = h_sums + (j * GUIDE_ROWS + r) * H_PITCH + c0;
            if constexpr (RUN_W % 4 == 0) {
#pragma unroll
                for (int c = 0; c < RUN_W; c += 4)
                    *reinterpret_cast<float4*>(dst + c) = make_float4(hs[c], hs[c + 1], hs[c + 2], hs[c + 3]);
            } else {
#pragma unroll
                for (int c = 0; c < RUN_W; ++c) dst[c] = hs[c];
            }
        }
    }
}

// Phase 2 of one offset j of a round: the exponents of the thread's ROWS outputs in column `lane`
// from rows row0.. of h_sums[j] (vertical patch sums, then x = base - d k).
__device__ __forceinline__ void column_exponents(const float* h_sums, int j, int row0, int lane, float base, float k,
                                                 float (&xc)[ROWS])
{
    float hv[H_ROWS_PER_THREAD];
#pragma unroll
    for (int r = 0; r < H_ROWS_PER_THREAD; ++r) hv[r] = h_sums[(j * GUIDE_ROWS + STEP_Y * row0 + r) * H_PITCH + lane];
    exponents<ROWS, STEP_Y>(hv, xc, base, k);
}

#if AGG_R > 0
// Patch-wise aggregation: the absolute weight of exponent x (weight.cuh's formulas with the
// reference level at 0).
__device__ __forceinline__ float absolute_weight(float x)
{
#if WEIGHTING == WEIGHTING_WELSCH
    return exp2f(DIST_OFFSET ? fminf(x, 0.f) : x);
#else
    const float t = __saturatef(x);
    return t * t;
#endif
}

// Sum of v over the 2 AGG_R + 1 lanes ending at this one (lane - 2 AGG_R .. lane), i.e. the box
// centred on column lane - AGG_R; built by doubling (2, 4, ... lanes) and adding the segments of
// the binary digits of 2 AGG_R + 1: 3 shuffles for AGG_R 2. Wrong in lanes below 2 AGG_R (boxes
// centred on halo columns, which no output reads).
__device__ __forceinline__ float lane_box(float v)
{
    constexpr int N = 2 * AGG_R + 1;
    float power = v;   // sum over the 2^b lanes ending at this one
    float sum = v;     // N is odd: its lowest digit's segment ends at this lane
    int done = 1;      // lanes summed so far
#pragma unroll
    for (int b = 1; (1 << b) <= N; ++b) {
        power += __shfl_up_sync(0xffffffffu, power, 1 << (b - 1));
        if (N & (1 << b)) {
            sum += __shfl_up_sync(0xffffffffu, power, done);
            done += 1 << b;
        }
    }
    return sum;
}

// Column of the tile whose box lane_box() returns in lane `lane` (halo columns for the lanes
// whose box is wrong).
__device__ __forceinline__ int box_column(int lane) { return (lane - AGG_R) & (TILE_W - 1); }

// out[i]: the sum of column `lane` of box[TILE_H][TILE_W] over rows row0 + i - AGG_R ..
// row0 + i + AGG_R (rows of the halo get sums of rows clamped into the tile: no output reads them).
// Summed afresh per row, not slid: a running sum that adds and subtracts loses weights far below
// its largest ones (tests/cpu_vs_reference.rs, patch_wise_aggregation_keeps_tiny_weights); pairs of
// rows are added once and shared by the rows whose boxes hold them.
__device__ __forceinline__ void column_boxes(const float* box, int row0, int lane, float (&out)[ROWS])
{
    constexpr int N = ROWS + 2 * AGG_R;
    float c[N];
#pragma unroll
    for (int k = 0; k < N; ++k) c[k] = box[min(max(row0 - AGG_R + k, 0), TILE_H - 1) * TILE_W + lane];
    float pair[N - 1];
#pragma unroll
    for (int k = 0; k + 1 < N; ++k) pair[k] = c[k] + c[k + 1];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        float v = c[i + 2 * AGG_R];
#pragma unroll
        for (int m = 0; m < AGG_R; ++m) v += pair[i + 2 * m];
        out[i] = v;
    }
}

// Whether row `row` of the block's tile holds output samples (not the aggregation halo).
__device__ __forceinline__ bool output_row(int row) { return row >= AGG_R && row < TILE_H - AGG_R; }
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) nlm_fused(const NlmArgs args)
{
    extern __shared__ __align__(16) float smem[];
    float* h_sums = smem;                 // [DX_GROUP][GUIDE_ROWS][H_PITCH]
    float* tgt = h_sums + H_FLOATS;       // [N_GUIDES][GUIDE_ROWS][T_PITCH]  target guides
    float* ref = tgt + T_FLOATS;          // [N_GUIDES][R_H][R_PITCH]         frame u's guides
#if OUTPUTS_ARE_GUIDES
    const float* refo = ref + O_ORIGIN;   // frame u's outputs: inside its guide window
#else
    float* refo = ref + R_FLOATS;         // [N_OUTPUTS][O_H][O_PITCH]        frame u's outputs
#endif
    if (SMEM_FLOATS * sizeof(float) > args.smem_bytes) __trap();   // host and kernel disagree
#if !DIST_OFFSET
    for (int g = 0; g < args.n_groups; ++g)
        if (args.group[g].k_bias != 0.f) __trap();                   // built without the offset
#endif

    // This block's group and tile: groups' tiles follow each other along x (nlm_args.cuh).
    int zg = 0;
#pragma unroll
    for (int g = 1; g < NLM_MAX_BATCH; ++g)
        if (g < args.n_groups && (int)blockIdx.x >= args.group[g].first_block) zg = g;
    const JobView jv{args.jobs ? args.jobs + blockIdx.z : nullptr, args};
    const int n_frames = jv.n_frames(), tgt_index = jv.target();
    const NlmGroup& grp = args.group[zg];
    const int tile = (int)blockIdx.x - grp.first_block;
    const int tile_y = tile / grp.tiles_x;
    // The tile whose weights the block computes: its output tile and AGG_R of halo around it.
    const int px0 = (tile - tile_y * grp.tiles_x) * OUT_TW - AGG_R, py0 = tile_y * OUT_TH - AGG_R;
    const int out_w = grp.out_w, out_h = grp.out_h, guide_w = grp.guide_w, guide_h = grp.guide_h;
    const int lane = threadIdx.x % TILE_W;           // phase 2: column in the tile
    const int row0 = (threadIdx.x / TILE_W) * ROWS;  // phase 2: first row in the tile
    const unsigned char* target = args.ring + (unsigned long long)jv.slot(tgt_index) * args.frame_bytes;

#pragma unroll
    for (int g = 0; g < N_GUIDES; ++g)
        stage_window<GUIDE_ROWS, T_W>(tgt + g * GUIDE_ROWS * T_PITCH, T_PITCH, target + grp.guide[g], guide_w, guide_h,
                                      STEP_X * px0 - PATCH_R, STEP_Y * py0 - PATCH_R);

#if AGG_R > 0
    // Per row of the thread's column: the sums of box-summed weights and weighted values, and the
    // largest weight of the patch there; weights of positions outside the plane are 0.
    float wsum[ROWS], acc[ROWS][N_OUTPUTS], wmax[ROWS];
    unsigned inside = 0;   // bit i: row i's position is in the plane
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        wsum[i] = 0.f;
        wmax[i] = 0.f;
#pragma unroll
        for (int o = 0; o < N_OUTPUTS; ++o) acc[i][o] = 0.f;
        const int cx = px0 + lane, cy = py0 + row0 + i;
        inside |= (cx >= 0 && cx < out_w && cy >= 0 && cy < out_h) ? 1u << i : 0u;
    }
    // Tiles inside the plane (all but the border ones) skip the test per weight.
    const bool interior = px0 >= 0 && py0 >= 0 && px0 + TILE_W <= out_w && py0 + TILE_H <= out_h;
    float* boxes = h_sums;   // [DX_GROUP][TILE_H][TILE_W] lane-box sums, in h_sums' space once read
    static_assert(DX_GROUP * TILE_H * TILE_W <= H_FLOATS, "box sums must fit in h_sums' space");
    static_assert(ROWS <= 32, "one bit of `inside` per row of a thread's column");
#else
    ColumnAcc<ROWS, N_OUTPUTS> col;
    col.init();
#endif

    for (int f = 0; f < n_frames; ++f) {
        const unsigned char* frame = args.ring + (unsigned long long)jv.slot(f) * args.frame_bytes;
        const bool is_target = f == tgt_index;
        __syncthreads();   // the previous frame's tiles are no longer read
#pragma unroll
        for (int g = 0; g < N_GUIDES; ++g)
            stage_window<R_H, R_W>(ref + g * R_H * R_PITCH, R_PITCH, frame + grp.guide[g], guide_w, guide_h,
                                   STEP_X * (px0 - SEARCH_R) - PATCH_R, STEP_Y * (py0 - SEARCH_R) - PATCH_R);
#if !OUTPUTS_ARE_GUIDES
#pragma unroll
        for (int o = 0; o < N_OUTPUTS; ++o)
            stage_window<O_H, O_W>(refo + o * O_PLANE, O_PITCH, frame + grp.output[o], out_w, out_h, px0 - SEARCH_R,
                                   py0 - SEARCH_R);
#endif
        __syncthreads();

        for (int dy = -SEARCH_R; dy <= SEARCH_R; ++dy) {
            for (int first_dx = -SEARCH_R; first_dx < -SEARCH_R + DX_SPAN; first_dx += DX_GROUP) {
                horizontal_sums(h_sums, tgt, ref, dy, first_dx, is_target);
                __syncthreads();

#if AGG_R > 0
                // Phase 2: vertical sums as exponents, absolute weights, their sums over the row's
                // lanes within AGG_R; then (after h_sums is read) over the column's rows within
                // AGG_R through shared memory, and the accumulation of the output rows.
                {
                    float wb[ROWS][DX_GROUP];
                    const float base = (WEIGHTING == WEIGHTING_WELSCH) ? grp.k_bias : 1.f + grp.k_bias;
#pragma unroll
                    for (int j = 0; j < DX_GROUP; ++j) {
                        float xc[ROWS];
                        column_exponents(h_sums, j, row0, lane, base, grp.k_dist, xc);
#pragma unroll
                        for (int i = 0; i < ROWS; ++i) {
                            float w = absolute_weight(xc[i]);
                            if (!interior && !(inside >> i & 1u)) w = 0.f;
                            wmax[i] = fmaxf(wmax[i], w);
                            wb[i][j] = lane_box(w);
                        }
                    }
                    __syncthreads();   // h_sums is read: its space takes the lane-box sums
#pragma unroll
                    for (int j = 0; j < DX_GROUP; ++j)
#pragma unroll
                        for (int i = 0; i < ROWS; ++i) boxes[(j * TILE_H + row0 + i) * TILE_W + box_column(lane)] = wb[i][j];
                    __syncthreads();
#pragma unroll
                    for (int j = 0; j < DX_GROUP; ++j) {
                        float wj[ROWS];
                        column_boxes(boxes + j * TILE_H * TILE_W, row0, lane, wj);
#pragma unroll
                        for (int i = 0; i < ROWS; ++i) {
                            if (!output_row(row0 + i)) continue;
                            wsum[i] += wj[i];
#pragma unroll
                            for (int o = 0; o < N_OUTPUTS; ++o)
                                acc[i][o] = fmaf(wj[i], refo[o * O_PLANE + (row0 + i + dy + SEARCH_R) * O_PITCH + lane + first_dx + SEARCH_R + j], acc[i][o]);
                        }
                    }
                }
#else
                // Phase 2: vertical sums as weight exponents, weights, accumulation.
                float x[ROWS][DX_GROUP];
                const float base = col.base(grp.k_bias);
#pragma unroll
                for (int j = 0; j < DX_GROUP; ++j) {
                    float xc[ROWS];
                    column_exponents(h_sums, j, row0, lane, base, grp.k_dist, xc);
#pragma unroll
                    for (int i = 0; i < ROWS; ++i) x[i][j] = xc[i];
                }
                col.track(x);
#pragma unroll
                for (int i = 0; i < ROWS; ++i) {
                    float val[N_OUTPUTS][DX_GROUP];
#pragma unroll
                    for (int o = 0; o < N_OUTPUTS; ++o)
#pragma unroll
                        for (int j = 0; j < DX_GROUP; ++j)
                            val[o][j] = refo[o * O_PLANE + (row0 + i + dy + SEARCH_R) * O_PITCH + lane + first_dx + SEARCH_R + j];
                    col.add(i, x[i], val);
                }
#endif
                __syncthreads();   // h_sums is rewritten by the next round
            }
        }
    }

#if AGG_R > 0
    // The centre: wref times the box sum of the largest weights, the target's own sample. (The
    // last round ended with a barrier: the box sums' space is free.)
#pragma unroll
    for (int i = 0; i < ROWS; ++i) boxes[(row0 + i) * TILE_W + box_column(lane)] = lane_box(wmax[i]);
    __syncthreads();
    float wc[ROWS];
    column_boxes(boxes, row0, lane, wc);
    const int px = px0 + lane;
    if (lane >= AGG_R && lane < TILE_W - AGG_R && px < out_w) {
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            const int py = py0 + row0 + i;
            if (!output_row(row0 + i) || py >= out_h) continue;
            const unsigned long long at = (unsigned long long)py * out_w + px;
            const float c = args.wref * wc[i];
            const float total = wsum[i] + c;
#pragma unroll
            for (int o = 0; o < N_OUTPUTS; ++o) {
                const float centre = (float)reinterpret_cast<const sample_t*>(target + grp.output[o])[at];
                const float v = total > 0.f ? (acc[i][o] + c * centre) / total : centre;
                const float fl = floorf(v);
                reinterpret_cast<sample_t*>(jv.dst() + grp.output[o])[at] =
                    (sample_t)fminf(fmaxf(fl + (v - fl >= 0.5f ? 1.f : 0.f), 0.f), MAX_VALUE);
            }
        }
    }
#else
    // Write each sample, or queue it for the exact f64 path (nlm_exact.cu) where float cannot
    // decide like the f64 definition: a rounding tie within the float error, or weights in the
    // range where the definition's f64 arithmetic itself loses precision.
    const int px = px0 + lane;
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        const int py = py0 + row0 + i;
        if (px < out_w && py < out_h) {
            const unsigned long long at = (unsigned long long)py * out_w + px;
            bool exact = col.needs_exact(i);
            sample_t q[N_OUTPUTS];
#pragma unroll
            for (int o = 0; o < N_OUTPUTS; ++o) {
                const float centre = (float)reinterpret_cast<const sample_t*>(target + grp.output[o])[at];
                const float v = col.value(i, o, centre, args.wref);
                const float fl = floorf(v);
                exact |= fabsf(v - fl - 0.5f) < TIE_WINDOW;
                q[o] = (sample_t)fminf(fmaxf(fl + (v - fl >= 0.5f ? 1.f : 0.f), 0.f), MAX_VALUE);
            }
            if (exact) {
                unsigned long long* list = jv.exact() + grp.exact_offset;
                const unsigned long long n = atomicAdd(list, 1ull);
                if (n < grp.exact_capacity) list[1 + n] = ((unsigned long long)grp.exact_group << 32) | at;
            }
#pragma unroll
            for (int o = 0; o < N_OUTPUTS; ++o) reinterpret_cast<sample_t*>(jv.dst() + grp.output[o])[at] = q[o];
        }
    }
#endif
}
