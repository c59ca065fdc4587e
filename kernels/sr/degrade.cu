// Step 2 of super-resolution: B = D(E), the estimate through the s-wide box of the downscale
// (src/sr/mod.rs `box_taps`: odd s, s taps of 1/s; even s, s + 1 taps with the outer two
// halved). At most 5 x 5 taps: read straight from global memory (E is small and cached).

__device__ __forceinline__ float box_tap(int k, int scale)
{
    const float inner = 1.0f / (float)scale;
    if (scale & 1) return inner;
    return (k == 0 || k == scale) ? 0.5f * inner : inner;
}

extern "C" __global__ void sr_degrade(const SrArgs a)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= a.out_w || y >= a.out_h) return;
    const int taps = (a.scale & 1) ? a.scale : a.scale + 1;
    const int half = taps / 2;
    float acc = 0.0f;
    for (int b = 0; b < taps; ++b) {
        const int row = mirror_index(y + b - half, a.out_h) * a.out_w;
        float r = 0.0f;
        for (int c = 0; c < taps; ++c) r += box_tap(c, a.scale) * a.estimate[row + mirror_index(x + c - half, a.out_w)];
        acc += box_tap(b, a.scale) * r;
    }
    a.next[y * a.out_w + x] = acc;
}
