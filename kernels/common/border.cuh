// Border rule shared with the CPU backends (src/planar.rs `mirror`): reflect with the edge sample
// repeated, ... 1 0 | 0 1 2 ... n-1 | n-1 n-2 ..., for any x and any n >= 1.
#pragma once

__device__ __forceinline__ int mirror_index(int x, int n)
{
    if (x >= 0 && x < n) return x;          // the common case: inside the plane
    const int period = 2 * n;
    int r = x % period;
    if (r < 0) r += period;
    return r < n ? r : period - 1 - r;
}
