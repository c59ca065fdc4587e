// Steps 1 and 2 of super-resolution (src/sr/mod.rs): a low-resolution plane interpolated with
// the Catmull-Rom cubic at every high-resolution sample (`cubic_taps`, `cubic_position`).
// `sr_initial` interpolates the target frame (slot[0]), or the float plane `residual` (the
// denoised target; the deblur residual with `accumulate`, added to E), into E; with `out` set, the result goes into the output
// frame instead (the last step of a plane that is not fused). `sr_residual` computes the
// residual of each low-resolution sample against the cell mean of E. One thread per sample.

__device__ __forceinline__ void catmull_rom(float f, float t[4])
{
    const float f2 = f * f, f3 = f2 * f;
    t[0] = 0.5f * (-f3 + 2.0f * f2 - f);
    t[1] = 0.5f * (3.0f * f3 - 5.0f * f2 + 2.0f);
    t[2] = 0.5f * (-3.0f * f3 + 4.0f * f2 + f);
    t[3] = 0.5f * (f3 - f2);
}

extern "C" __global__ void sr_initial(const SrArgs a)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= a.out_w || y >= a.out_h) return;
    const unsigned char* lr = a.ring + (u64)a.slot[0] * a.frame_bytes + a.plane_offset;
    const bool from_residual = a.residual != nullptr;
    const float u = ((float)x + 0.5f) / (float)a.scale - 0.5f;
    const float v = ((float)y + 0.5f) / (float)a.scale - 0.5f;
    const float fu = floorf(u), fv = floorf(v);
    float tx[4], ty[4];
    catmull_rom(u - fu, tx);
    catmull_rom(v - fv, ty);
    const int ix = (int)fu, iy = (int)fv;
    float acc = 0.0f;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
        const int row = mirror_index(iy + b - 1, a.h) * a.w;
        float r = 0.0f;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int i = row + mirror_index(ix + c - 1, a.w);
            r += tx[c] * (from_residual ? a.residual[i] : load_sample(lr, i) * a.inv_scale);
        }
        acc += ty[b] * r;
    }
    const int o = y * a.out_w + x;
    if (a.accumulate) acc += a.next[o];
    if (a.out) store_sample(a.out + a.out_plane_offset, o, acc, a);
    else a.next[o] = acc;
}

extern "C" __global__ void sr_residual(const SrArgs a)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= a.w || j >= a.h) return;
    const unsigned char* lr = a.ring + (u64)a.slot[0] * a.frame_bytes + a.plane_offset;
    const int x0 = i * a.scale, y0 = j * a.scale;
    const int x1 = min(x0 + a.scale, a.out_w), y1 = min(y0 + a.scale, a.out_h);
    float sum = 0.0f;
    for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x) sum += a.next[y * a.out_w + x];
    const int n = max(x1 - x0, 0) * max(y1 - y0, 0);
    // A cell wholly outside the plane (the last of an odd chroma plane) has no residual.
    const float y = a.lr_target ? a.lr_target[j * a.w + i] : load_sample(lr, j * a.w + i) * a.inv_scale;
    a.residual[j * a.w + i] = n > 0 ? y - sum / (float)n : 0.0f;
}
