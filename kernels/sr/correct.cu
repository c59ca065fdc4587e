// Step 5 of super-resolution: E' = E + fusion * D^T(R), the gated residual of sr_fuse spread back
// over the samples each degradation box read (the adjoint box starts at -box_start(s) - (s - 1)).
// The last kernel of a plane writes the output frame.

extern "C" __global__ void sr_correct(const SrArgs a)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= a.out_w || y >= a.out_h) return;
    const int o = y * a.out_w + x;
    const float v = a.estimate[o] + a.fusion * box_mean(a.gated, x, y, -box_start(a.scale) - (a.scale - 1), a);
    if (a.out) store_sample(a.out + a.out_plane_offset, o, v, a);
    else a.next[o] = v;
}
