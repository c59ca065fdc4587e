// Step 3 of super-resolution: B = D(E), the mean of the estimate over the s x s box that starts
// at box_start(s) = -((s - 1) / 2) samples from each sample (src/sr/mod.rs `box_start`). At most
// 4 x 4 taps: read straight from global memory (E is small and cached).

__device__ __forceinline__ int box_start(int scale)
{
    return -((scale - 1) / 2);
}

// The s x s box mean of `src` whose box at (x, y) starts at (x + start, y + start), border rule
// outside: the degradation (start = box_start(s)) and its adjoint (sr_correct).
__device__ __forceinline__ float box_mean(const float* src, int x, int y, int start, const SrArgs& a)
{
    const int s = a.scale;
    float acc = 0.0f;
    for (int b = 0; b < s; ++b) {
        const int row = mirror_index(y + start + b, a.out_h) * a.out_w;
        for (int c = 0; c < s; ++c) acc += src[row + mirror_index(x + start + c, a.out_w)];
    }
    return acc / (float)(s * s);
}

extern "C" __global__ void sr_degrade(const SrArgs a)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= a.out_w || y >= a.out_h) return;
    a.next[y * a.out_w + x] = box_mean(a.estimate, x, y, box_start(a.scale), a);
}
