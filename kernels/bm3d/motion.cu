// Motion seeds' coarse motion between two frames (src/bm3d/mod.rs `MotionField` is the
// definition): the first plane of a plane group summed in cells of MOTION_CELL x MOTION_CELL
// stored samples (bm3d_motion_cells, once per frame), then for each block of MOTION_BLOCK x
// MOTION_BLOCK cells the shift within MOTION_REACH cells with the smallest sum of squared
// cell-sum differences in the other frame (bm3d_motion_field, once per frame pair and direction).
// Integer arithmetic throughout, so the shifts are the f64 reference's at every bit depth.
// The group kernels (group.cu) read the fields to place each frame's first seed's companion.
//
// Compile-time constants (src/bm3d/cuda.rs): MOTION_CELL, MOTION_BLOCK, MOTION_REACH,
// MOTION_THREADS, SAMPLE_BYTES. The host mirror of MotionArgs is `MotionArgs` in src/bm3d/cuda.rs.

struct MotionArgs {
    const unsigned char* plane;  // bm3d_motion_cells: the plane, h x w stored samples
    unsigned* cells;             // bm3d_motion_cells: out, ch x cw sums
    const unsigned* from;        // bm3d_motion_field: cells of the frame the motion starts in, ch x cw
    const unsigned* to;          // bm3d_motion_field: cells of the frame it ends in, ch x cw
    int* field;                  // bm3d_motion_field: out, bh x bw x (vy, vx) in cells
    int w, h;                    // plane size (the extent beyond it mirrored, as the groups read it)
    int cw, ch;                  // cells across and down: the extent / MOTION_CELL
    int bw, bh;                  // blocks across and down: cw / MOTION_BLOCK, ch / MOTION_BLOCK
};

// One thread per cell. Sums below 2^22 (64 samples below 2^16).
extern "C" __global__ void __launch_bounds__(MOTION_THREADS) bm3d_motion_cells(const MotionArgs a)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= a.cw * a.ch) return;
    const int x0 = (c % a.cw) * MOTION_CELL, y0 = (c / a.cw) * MOTION_CELL;
    unsigned s = 0;
    for (int i = 0; i < MOTION_CELL; ++i) {
        const int y = mirror_index(y0 + i, a.h);
#pragma unroll
        for (int j = 0; j < MOTION_CELL; ++j) {
            const int x = mirror_index(x0 + j, a.w);
#if SAMPLE_BYTES == 1
            s += __ldg(a.plane + (u64)y * a.w + x);
#else
            s += __ldg((const unsigned short*)a.plane + (u64)y * a.w + x);
#endif
        }
    }
    a.cells[c] = s;
}

// Sum of squared differences between the block of `from` at cell (y0, x0) and that of `to` at
// (sy, sx): below 2^48.
__device__ __forceinline__ long long motion_ssd(const MotionArgs& a, int y0, int x0, int sy, int sx)
{
    long long s = 0;
#pragma unroll
    for (int i = 0; i < MOTION_BLOCK; ++i) {
#pragma unroll
        for (int j = 0; j < MOTION_BLOCK; ++j) {
            const long long d = (long long)__ldg(a.from + (y0 + i) * a.cw + x0 + j) - (long long)__ldg(a.to + (sy + i) * a.cw + sx + j);
            s += d * d;
        }
    }
    return s;
}

// One thread per block: the unshifted block first, then the shifts row by row, a later one only
// when strictly smaller (the definition's order).
extern "C" __global__ void __launch_bounds__(MOTION_THREADS) bm3d_motion_field(const MotionArgs a)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= a.bw * a.bh) return;
    const int x0 = (b % a.bw) * MOTION_BLOCK, y0 = (b / a.bw) * MOTION_BLOCK;
    long long best = motion_ssd(a, y0, x0, y0, x0);
    int vy = 0, vx = 0;
    const int ya = max(y0 - MOTION_REACH, 0), yb = min(y0 + MOTION_REACH, a.ch - MOTION_BLOCK);
    const int xa = max(x0 - MOTION_REACH, 0), xb = min(x0 + MOTION_REACH, a.cw - MOTION_BLOCK);
    for (int sy = ya; sy <= yb; ++sy) {
        for (int sx = xa; sx <= xb; ++sx) {
            const long long d = motion_ssd(a, y0, x0, sy, sx);
            if (d < best) { best = d; vy = sy - y0; vx = sx - x0; }
        }
    }
    a.field[2 * b] = vy;
    a.field[2 * b + 1] = vx;
}
