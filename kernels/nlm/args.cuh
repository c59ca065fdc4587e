// Launch arguments of the fused NLM kernel, passed by value. The Rust mirror is `NlmArgs` in
// src/nlm/cuda/launch.rs; both sides check the size (NLM_ARGS_BYTES is set by the host).
#pragma once

#define NLM_MAX_FRAMES 16   // temporal_past + 1 + temporal_future <= 15
#define NLM_MAX_BATCH 3     // weight groups of one shape handled by one launch (blockIdx.z)
#define NLM_MAX_PLANES 3    // guide or output planes of one weight group

// One weight group: where its planes lie inside a frame of the ring, their sizes, its weight
// constants, its blocks of the fused launch and its exact-path list.
//
// A fused launch may hold groups of different plane sizes (I420: Y, U and V in one launch, so the
// small chroma grid does not run as a separate, mostly idle last wave): blockIdx.x counts the
// tiles of group 0, then those of group 1, ... (first_block, tiles_x). The exact path keeps one
// list per set of groups of one plane size (its launch reads the sizes from NlmArgs).
struct NlmGroup {
    unsigned long long guide[NLM_MAX_PLANES];  // byte offset of each guide plane in a frame
    unsigned long long output[NLM_MAX_PLANES]; // byte offset of each output plane in a frame
    float k_dist;  // patch-distance sum -> weight argument (1/h^2, 1/patch size, sample scale)
    float k_bias;  // distance offset (2 sigma^2) in the same units
    float h;       // strength, as the plan holds it (for the exact f64 path)
    int out_w, out_h;              // output plane size
    int guide_w, guide_h;          // guide plane size
    int tiles_x;                   // fused launch: tiles per row of this group
    int first_block;               // fused launch: blockIdx.x of this group's first tile
    unsigned exact_offset;         // fused launch: words from each exact list's start to this group's list
    int exact_group;               // fused launch: this group's index in its exact launch's group[]
    unsigned exact_capacity;       // fused launch: entries that list holds
};

// One job of a batched launch (launch_batch): blockIdx.z = job. A device
// table of these replaces the per-launch fields slot/n_frames/target/dst/exact below.
struct NlmJob {
    unsigned char* dst;
    unsigned long long* exact;
    int slot[NLM_MAX_FRAMES];
    int n_frames;
    int target;
};

struct NlmArgs {
    const unsigned char* ring;     // ring_slots frames of frame_bytes each
    unsigned char* dst;            // output frame, same layout as a ring frame
    unsigned long long frame_bytes;
    NlmGroup group[NLM_MAX_BATCH];
    int slot[NLM_MAX_FRAMES];      // ring slot of each frame of the window
    int n_frames;
    int target;                    // index into slot[] of the frame being denoised
    int out_w, out_h;              // exact path: output plane size (the fused kernel: per group)
    int guide_w, guide_h;          // exact path: guide plane size
    float wref;                    // centre weight = wref * largest other weight
    unsigned smem_bytes;           // dynamic shared memory the launch provides
    float distance_offset;         // plan values for the exact f64 path (nlm_exact.cu)
    float scale_to_8bit;
    unsigned long long* exact;     // exact[0]: count; exact[1..]: samples to redo in f64
    unsigned long long exact_capacity;  // exact path: entries its list holds
    const NlmJob* jobs;            // null: one job, described by the fields above
    int n_groups;                  // weight groups in group[] (blockIdx.z = job)
    unsigned exact_offset;         // exact path: its list is exact (or each job's) + exact_offset words
};

// The job a block works on, whether the launch is single or batched.
struct JobView {
    const NlmJob* job;
    const NlmArgs& a;
    __device__ __forceinline__ int slot(int f) const { return job ? job->slot[f] : a.slot[f]; }
    __device__ __forceinline__ int n_frames() const { return job ? job->n_frames : a.n_frames; }
    __device__ __forceinline__ int target() const { return job ? job->target : a.target; }
    __device__ __forceinline__ unsigned char* dst() const { return job ? job->dst : a.dst; }
    __device__ __forceinline__ unsigned long long* exact() const { return job ? job->exact : a.exact; }
};

#ifdef NLM_ARGS_BYTES
static_assert(sizeof(NlmArgs) == NLM_ARGS_BYTES, "NlmArgs layout differs from the host's");
#endif
