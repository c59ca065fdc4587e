//! Direct host I/O: the engine's planar frames are page-locked in place (cuMemHostRegister) so
//! that uploads read them and downloads write them by DMA, without a copy through pinned staging
//! memory on the caller's thread.
//!
//! Registrations are cached by (address, length) of each plane, because the engine reuses its
//! planar frames (pending -> ready -> spare -> pending). The cache is bounded: beyond
//! `capacity` planes the least recently used registrations are released, after the caller's
//! `quiesce` has waited for every copy in flight. Memory the driver refuses to register (e.g. a
//! plane sharing a page with another registration) is remembered and goes through staging.
//!
//! The copies are asynchronous under the `Backend` trait's promises (src/device/mod.rs): an
//! uploaded frame stays alive and unchanged until a job launched after its upload has been
//! finished, and a frame uploaded into a job's target slot may receive that job's output planes
//! between `launch` and `finish`. Only ranges seen twice are registered (the engine's recycled
//! frames; not one-off allocations), and a registration is released when the cache evicts it or
//! the backend is dropped. A caller that frees a frame the backend registered and gets the same
//! address range back for another allocation while the backend lives would have the DMA use the
//! old pages: `HostIo::direct` off (`BackendOptions::host_io`) turns
//! direct I/O off for such callers. Chunked execution (src/device/chunked.rs) keeps its frames
//! in fixed pools that live as long as its backends, so direct I/O stays on there.
//!
//! Several devices: the chunked workers of several GPUs share the same pooled frames, and a range
//! can be page-locked only once per process. Registrations are therefore process-wide
//! (`CU_MEMHOSTREGISTER_PORTABLE`: pinned for every context) and reference-counted across
//! backends: each backend holds a reference per range it uses, and the range is unregistered when
//! the last reference goes, i.e. after every backend that used it has waited for its copies.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use cudarc::driver::{sys, CudaContext};

use crate::planar::PlanarFrame;

/// Address and length of one plane's samples in host memory.
pub type HostRange = (usize, usize);

pub fn frame_ranges(frame: &PlanarFrame) -> Vec<HostRange> {
    frame
        .planes
        .iter()
        .map(|p| {
            let b = p.samples.as_bytes();
            (b.as_ptr() as usize, b.len())
        })
        .collect()
}

/// Process-wide page-locked ranges and how many backends hold each.
static PROCESS_REGISTRATIONS: LazyLock<Mutex<HashMap<HostRange, usize>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Takes a reference to `r`'s process-wide registration, registering it when it is the first
/// (a context must be bound). Err: the driver's refusal.
fn acquire(r: HostRange) -> Result<(), sys::CUresult> {
    let mut map = PROCESS_REGISTRATIONS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = map.get_mut(&r) {
        *n += 1;
        return Ok(());
    }
    // SAFETY: r is the live allocation of a plane the caller borrows; PORTABLE = page-locked for
    // every CUDA context of the process (no mapping into a device address space needed).
    let rc = unsafe { sys::cuMemHostRegister_v2(r.0 as *mut std::ffi::c_void, r.1, sys::CU_MEMHOSTREGISTER_PORTABLE) };
    if rc != sys::CUresult::CUDA_SUCCESS {
        return Err(rc);
    }
    map.insert(r, 1);
    Ok(())
}

/// Gives back a reference taken by `acquire`; the last one unregisters the range (the caller has
/// waited for its own copies; every other holder released its reference after waiting for its).
fn release_reference(r: HostRange) {
    let mut map = PROCESS_REGISTRATIONS.lock().unwrap_or_else(|e| e.into_inner());
    let Some(n) = map.get_mut(&r) else { return };
    *n -= 1;
    if *n == 0 {
        map.remove(&r);
        // SAFETY: registered by `acquire`; no holder has a copy in flight.
        let _ = unsafe { sys::cuMemHostUnregister(r.0 as *mut std::ffi::c_void) };
    }
}

enum Entry {
    Registered { last_use: u64 },
    Refused,
}

pub struct HostRegistry {
    ctx: Arc<CudaContext>,
    entries: HashMap<HostRange, Entry>,
    /// Ranges seen but not registered yet: only ranges seen twice are registered, so that
    /// one-off allocations (and their reuse after being freed) are not page-locked.
    seen: HashMap<HostRange, u32>,
    clock: u64,
    pub capacity: usize,
}

impl HostRegistry {
    pub fn new(ctx: &Arc<CudaContext>, capacity: usize) -> Self {
        HostRegistry { ctx: ctx.clone(), entries: HashMap::new(), seen: HashMap::new(), clock: 0, capacity }
    }

    /// Registrations held now.
    pub fn registered(&self) -> usize {
        self.entries.values().filter(|e| matches!(e, Entry::Registered { .. })).count()
    }

    /// Registers every range that is not yet (the context must be bound). True when all of them
    /// are page-locked now; false when the driver refused one (the frame then goes through
    /// staging). Before the first release of an old registration (to respect the capacity)
    /// `quiesce` is called once: it waits for every copy in flight and says whether that worked
    /// (when not, nothing is released and the capacity is exceeded for now).
    pub fn ensure(&mut self, ranges: &[HostRange], quiesce: &mut dyn FnMut() -> bool) -> bool {
        let mut may_evict: Option<bool> = None;
        self.clock += 1;
        let mut all = true;
        for &r in ranges {
            if r.1 == 0 {
                continue;
            }
            match self.entries.get_mut(&r) {
                Some(Entry::Registered { last_use }) => *last_use = self.clock,
                Some(Entry::Refused) => all = false,
                None => {
                    let n = self.seen.entry(r).or_insert(0);
                    *n += 1;
                    if *n < 2 {
                        all = false;
                        if self.seen.len() > 4096 {
                            self.seen.clear();
                        }
                        continue;
                    }
                    self.seen.remove(&r);
                    if self.registered() >= self.capacity && *may_evict.get_or_insert_with(&mut *quiesce) {
                        self.evict_to(self.capacity.saturating_sub(1), ranges);
                    }
                    match acquire(r) {
                        Ok(()) => {
                            self.entries.insert(r, Entry::Registered { last_use: self.clock });
                        }
                        Err(rc) => {
                            tracing::debug!("cuMemHostRegister({:#x}, {}) refused: {rc:?}; staging this plane", r.0, r.1);
                            self.entries.insert(r, Entry::Refused);
                            all = false;
                        }
                    }
                }
            }
        }
        all
    }

    pub fn is_registered(&self, r: &HostRange) -> bool {
        matches!(self.entries.get(r), Some(Entry::Registered { .. }))
    }

    /// Releases least recently used registrations until at most `keep` remain, sparing `spare`.
    fn evict_to(&mut self, keep: usize, spare: &[HostRange]) {
        while self.registered() > keep {
            let victim = self
                .entries
                .iter()
                .filter_map(|(r, e)| match e {
                    Entry::Registered { last_use } if !spare.contains(r) => Some((*last_use, *r)),
                    _ => None,
                })
                .min();
            let Some((_, r)) = victim else { break };
            self.release(r);
        }
    }

    fn release(&mut self, r: HostRange) {
        if let Some(Entry::Registered { .. }) = self.entries.remove(&r) {
            // The caller guarantees that no copy of this backend uses it now.
            release_reference(r);
        }
    }

    /// Releases everything (no copy may be in flight). The process-wide references go even
    /// when the context cannot be bound (a lost device): a record left behind would have a
    /// later backend take new allocations at those addresses for page-locked memory.
    pub fn clear(&mut self) {
        let _ = self.ctx.bind_to_thread();
        let all: Vec<HostRange> = self.entries.keys().copied().collect();
        for r in all {
            self.release(r);
        }
        self.entries.clear();
    }
}

impl Drop for HostRegistry {
    fn drop(&mut self) {
        self.clear();
    }
}
