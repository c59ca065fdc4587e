// Launch arguments of the BM3D kernels, passed by value. The Rust mirror is `Bm3dArgs` in
// src/bm3d/cuda.rs; both sides check the size (BM3D_ARGS_BYTES is set by the host).
//
// Compile-time constants (set by the host with -D, src/bm3d/cuda.rs `Bm3dVariant`):
//   PATCH        patch side K (4 or 8)
//   NMAX_HARD    most patches of a hard-thresholding group (power of two <= 32)
//   NMAX_WIENER  most patches of a Wiener group (power of two <= 32)
//   SEEDS        seeds per frame of the predictive search (a companion of the first one besides,
//                with motion seeds)
//   MOTION_CELL, MOTION_BLOCK, MOTION_REACH: the coarse motion's cells and blocks (motion.cu)
//   SAMPLE_BYTES 1 or 2 (stored samples of the ring frames)
//   WARPS        warps per block (one reference patch per warp)
#pragma once

#define BM3D_MAX_PLANES 3    // planes matched together (luma; U and V; R, G and B)
#define BM3D_FRAME_CODES 15  // dt = code - 7, dt in -7..=7
#define BM3D_CODE_BIAS 7

typedef unsigned long long u64;

struct Bm3dArgs {
    const unsigned char* ring;       // noisy frames (ring slots of frame_bytes each)
    unsigned long long frame_bytes;
    const float* basic;              // basic estimates: basic_floats per ring slot (Wiener step)
    unsigned long long basic_floats;
    long long* num;                  // numerators, one plane of extent samples per group plane
    long long* wimg;                 // patch weights by corner, same layout
    unsigned char* out;              // finish: the output frame (ring layout), or null
    float* basic_out;                // finish: the basic estimate being computed, or null
    unsigned long long plane_bytes[BM3D_MAX_PLANES];  // byte offset of each group plane in a frame
    unsigned long long basic_plane[BM3D_MAX_PLANES];  // float offset of each plane in a basic frame
    float sigma[BM3D_MAX_PLANES];    // noise sigma per plane, 8-bit units
    int slot[BM3D_FRAME_CODES];      // ring slot of the frame at dt = code - 7; -1: not in the window
    int n_planes;
    int w, h;                        // plane size
    int ew, eh;                      // BM3D extent (max(w, K) x max(h, K))
    int refs_x, refs_y;              // reference patches per row and column
    int block_step;
    int radius;                      // exhaustive search radius in the target frame
    int n_seeds;                     // seeds per other frame (<= SEEDS)
    int seed_radius;
    float tau_ssd;                   // group threshold as a sum of squares over the group's planes
    float lambda_;                   // hard threshold in units of sigma
    float inv_scale;                 // 1 / (stored units per 8-bit code value)
    float scale;                     // stored units per 8-bit code value
    unsigned max_value;              // largest stored sample
    int ref_code;                    // frame code of the reference patches (the target's: 7)
    // The reference frame's own exhaustive search (search.cu), shape [refs_y * refs_x][NMAX +
    // SEEDS] keys: written by bm3d_search_*, read by bm3d_hard / bm3d_wiener; null: the group
    // kernels search the reference's frame themselves.
    u64* cache;
    int search_floats;               // bm3d_search_*: shared floats per warp (even)
    int group_floats;                // bm3d_hard / bm3d_wiener: shared floats per warp (multiple of 4)
    // bm3d_*_frames (per-frame groups): members of the frame at `code` are added to the sums at
    // num / wimg + sum_slot[code] * sum_stride (the frame's entry); -1: not aggregated. The
    // other group kernels add the target's members (code 7) to num / wimg.
    int sum_slot[BM3D_FRAME_CODES];
    unsigned long long sum_stride;   // bm3d_*_frames: elements from one frame's sums to the next
    // Motion seeds (motion.cu): the coarse motion fields of this plane group, per ring slot the
    // field from the slot's frame to the frame before it, then to the frame after it, each
    // [motion_bh][motion_bw] x (vy, vx) ints; null: no motion seeds.
    const int* motion;
    unsigned long long motion_stride;  // ints from one ring slot's fields to the next
    int motion_dir;                    // ints from a slot's field backwards to its field forwards
    int motion_bw, motion_bh;          // blocks of a field across and down
    int motion_pad;
    // The Bayesian estimate (bayes.cu): per reference patch of a Wiener launch, its group
    // ([BAYES_MEMBER_INTS] ints: n, 3 unused, then NMAX_WIENER x (code, y, x, sum slot)) and its
    // weight per plane ([BM3D_MAX_PLANES] floats), written by bm3d_wiener*, read by bm3d_bayes*;
    // null: no Bayesian estimate.
    int* bayes_members;
    float* bayes_weight;
    // The Wiener step apart (group.cu PHASE 1 and 2): per reference patch of the launch, its group
    // in the layout of bayes_members, written by bm3d_wiener*_match, read by bm3d_wiener*_filter.
    int* group_members;
};

#define BAYES_MEMBER_INTS (4 + 4 * NMAX_WIENER)
