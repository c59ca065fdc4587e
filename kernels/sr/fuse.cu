// Step 4 and the gate of step 5 of super-resolution (src/sr/mod.rs): for each high-resolution
// sample, weights from the distance between its degraded patch (B at steps of s) and the
// low-resolution patches within the search radius of its cell, over every frame of the window;
// writes the gated residual R = g (F - B) to `next` (sr_correct applies it).
//
// Compile-time: PATCH (patch radius p) and RADIUS (search radius r); PD = 2p + 1. Each thread
// keeps its degraded patch in registers and slides a low-resolution patch along each row of
// candidates, so a candidate costs one column of shared-memory reads.
//
// A block computes TILE x TILE high-resolution samples. Shared memory (sized on the host,
// src/sr/cuda.rs `fuse_shared_bytes`): the block's B tile with a halo of s * p, loaded once, then
// one frame's low-resolution tile at a time (the block's cells with a halo of r + p).

#define PD (2 * PATCH + 1)

extern "C" __global__ void __launch_bounds__(TILE * TILE) sr_fuse(const SrArgs a)
{
    extern __shared__ float shared[];
    const int s = a.scale, r = RADIUS, p = PATCH;
    const int x0 = blockIdx.x * TILE, y0 = blockIdx.y * TILE;
    const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
    const int x = x0 + tx, y = y0 + ty;
    const int threads = TILE * TILE;

    // B tile: high-resolution samples x0 - s p .. x0 + TILE - 1 + s p.
    const int bh = s * p, bw = TILE + 2 * bh;
    float* btile = shared;
    for (int i = threadIdx.x; i < bw * bw; i += threads) {
        const int bx = mirror_index(x0 - bh + i % bw, a.out_w), by = mirror_index(y0 - bh + i / bw, a.out_h);
        btile[i] = a.degraded[by * a.out_w + bx];
    }
    // Low-resolution tile: cells c0 - r - p .. c1 + r + p of the block's samples.
    const int cx0 = x0 / s, cy0 = y0 / s;
    const int lh = r + p, lw = (TILE - 1) / s + 2 + 2 * lh;
    float* ltile = shared + bw * bw;

    const int cx = x / s - cx0 + lh, cy = y / s - cy0 + lh;  // own cell in the tile
    const bool inside = x < a.out_w && y < a.out_h;
    __syncthreads();  // the B tile is complete
    // The degraded patch of this sample, in registers for every candidate and frame.
    float bp[PD][PD];
#pragma unroll
    for (int bb = 0; bb < PD; ++bb)
#pragma unroll
        for (int aa = 0; aa < PD; ++aa) bp[bb][aa] = btile[(ty + bh + s * (bb - PATCH)) * bw + tx + bh + s * (aa - PATCH)];
    float num = 0.0f, den = 0.0f, m = __int_as_float(0xff800000);  // -infinity
    // Best log weights of the target's candidates (slot[0]) and of the other frames' (the gate).
    float best_target = __int_as_float(0xff800000), best_other = __int_as_float(0xff800000);
    for (int t = 0; t < a.n_frames; ++t) {
        const unsigned char* lr = a.ring + (u64)a.slot[t] * a.frame_bytes + a.plane_offset;
        __syncthreads();
        for (int i = threadIdx.x; i < lw * lw; i += threads) {
            const int lx = mirror_index(cx0 - lh + i % lw, a.w), ly = mirror_index(cy0 - lh + i / lw, a.h);
            ltile[i] = load_sample(lr, ly * a.w + lx) * a.inv_scale;
        }
        __syncthreads();
        if (!inside) continue;
        for (int j = -RADIUS; j <= RADIUS; ++j) {
            // The low-resolution patch of the first candidate of the row; each next candidate
            // shifts it by one column (one column read instead of a whole patch).
            const float* row0 = ltile + (cy + j - PATCH) * lw + cx - RADIUS - PATCH;
            float win[PD][PD];
#pragma unroll
            for (int bb = 0; bb < PD; ++bb)
#pragma unroll
                for (int aa = 0; aa < PD; ++aa) win[bb][aa] = row0[bb * lw + aa];
#pragma unroll
            for (int i = 0; i <= 2 * RADIUS; ++i) {
                if (i > 0) {
#pragma unroll
                    for (int bb = 0; bb < PD; ++bb) {
#pragma unroll
                        for (int aa = 0; aa + 1 < PD; ++aa) win[bb][aa] = win[bb][aa + 1];
                        win[bb][PD - 1] = row0[bb * lw + i + PD - 1];
                    }
                }
                float d = 0.0f;
#pragma unroll
                for (int bb = 0; bb < PD; ++bb)
#pragma unroll
                    for (int aa = 0; aa < PD; ++aa) {
                        const float diff = bp[bb][aa] - win[bb][aa];
                        d = fmaf(diff, diff, d);
                    }
                const float lwt = -fmaxf(d * a.inv_n - a.sigma2, 0.0f) * a.inv_h2;
                if (t == 0) best_target = fmaxf(best_target, lwt);
                else best_other = fmaxf(best_other, lwt);
                if (lwt > m) {
                    // A new largest weight: rescale the sums to it (src/sr/mod.rs `log_weight`).
                    const float k = __expf(m - lwt);
                    num *= k;
                    den *= k;
                    m = lwt;
                }
                const float w = __expf(lwt - m);
                num = fmaf(w, win[PATCH][PATCH], num);
                den += w;
            }
        }
    }
    if (x >= a.out_w || y >= a.out_h) return;
    const float b = btile[(ty + bh) * bw + tx + bh];
    float g = 1.0f;
    if (a.novelty_gain > 0.0f)
        g = a.n_frames > 1 ? 1.0f - __expf(-a.novelty_gain * fmaxf(best_other - best_target, 0.0f)) : 0.0f;
    a.next[y * a.out_w + x] = g * (num / den - b);
}
