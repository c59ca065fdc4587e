//! Host frames that move by value between the engine, the caller and a backend.
//!
//! A [`Frame`] owns its planes ([`PlanarFrame`]) and, when the backend that made it DMAs host
//! memory (CUDA), the page-lock of those planes: registered once when the frame is made and
//! released when the frame is dropped, whoever drops it. At any time one layer holds a frame
//! (the engine, the caller after `pop_planar`, or a backend between `submit` and `finish`), so no
//! layer has to keep frames alive for another, and no address is remembered after its frame is
//! gone.
//!
//! A [`FramePool`] belongs to a backend: frames of the stream's geometries are made once and
//! reused (the engine takes input frames from it and gives spent ones back). A frame given back
//! with planes the pool no longer keeps (after a change of geometry) is dropped.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::planar::{Geometry, PlanarFrame};

/// Address and length of one plane's samples in host memory.
pub type HostRange = (usize, usize);

/// Address and length of every plane of `frame`, in plane order.
pub fn plane_ranges(frame: &PlanarFrame) -> Vec<HostRange> {
    frame
        .planes
        .iter()
        .map(|p| {
            let b = p.samples.as_bytes();
            (b.as_ptr() as usize, b.len())
        })
        .collect()
}

/// One memory plane of a [`DeviceFrame`]: its device address and the bytes from one row to the
/// next (at least the row's length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevicePlane {
    pub ptr: u64,
    pub pitch: usize,
}

/// A frame in GPU memory that the caller owns (a GStreamer buffer's CUDA memory): its memory
/// planes, each in the format's own layout (rows of `FormatInfo::memory_plane_row_bytes` at the
/// plane's pitch: NV12's luma and interleaved chroma, I420's three planes), and whatever keeps that
/// memory alive (`owner`). A backend that takes device frames ([`crate::device::Backend::submit_device`])
/// copies an input into its ring on the device and gives the owner back once the copy is done; an
/// output frame is written and handed back after the copy into it completed.
pub struct DeviceFrame {
    planes: Vec<DevicePlane>,
    owner: Box<dyn std::any::Any + Send>,
}

impl DeviceFrame {
    /// # Safety
    /// Each plane's rows (of the stream's format and size, at `pitch`) lie in device memory of the
    /// device the backend computes on, valid while `owner` lives; nothing else writes them while
    /// the backend holds the frame (nor reads them, for an output frame).
    pub unsafe fn new(planes: Vec<DevicePlane>, owner: Box<dyn std::any::Any + Send>) -> Self {
        DeviceFrame { planes, owner }
    }

    pub fn planes(&self) -> &[DevicePlane] {
        &self.planes
    }

    /// What kept the memory alive (the caller's buffer), the frame given up.
    pub fn into_owner(self) -> Box<dyn std::any::Any + Send> {
        self.owner
    }
}

impl std::fmt::Debug for DeviceFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceFrame").field("planes", &self.planes).finish_non_exhaustive()
    }
}

/// Releases page-locks a backend took ([`FrameMaker::make`]); called when a pinned frame is
/// dropped, on whatever thread drops it.
pub trait PageLock: Send + Sync {
    /// Releases the page-lock of `ranges` (taken by the same object, never released before).
    fn release(&self, ranges: &[HostRange]);
}

/// The page-lock of a frame's planes: the ranges locked and who releases them (when the last
/// holder of the token lets go of it).
struct Pin {
    ranges: Vec<HostRange>,
    lock: Arc<dyn PageLock>,
}

impl Drop for Pin {
    fn drop(&mut self) {
        self.lock.release(&self.ranges);
    }
}

/// A frame's page-lock, apart from its planes ([`Frame::into_parts`]): for a caller that lends
/// the planes one by one (a GStreamer buffer of one memory per plane) and puts the frame
/// together again. It keeps the planes page-locked while any copy of it lives.
#[derive(Clone)]
pub struct PinToken(Arc<Pin>);

/// A host frame owned by value (see the module doc). Its samples are read and written through
/// `Deref`; the page-lock it may carry covers the planes as they were made, so a caller that
/// replaces a plane's storage gets a frame that is no longer page-locked there
/// ([`Frame::pinned_ranges`] then says `None` and a backend copies through staging memory).
pub struct Frame {
    // Declared first, so released before the planes' memory goes back to the allocator.
    pin: Option<PinToken>,
    planar: PlanarFrame,
}

impl Frame {
    /// A frame of ordinary (pageable) memory.
    pub fn new(planar: PlanarFrame) -> Self {
        Frame { pin: None, planar }
    }

    /// A frame of `geometry`, zeroed, of ordinary memory.
    pub fn zeroed(geometry: &Geometry) -> Self {
        Frame::new(PlanarFrame::zeroed(geometry))
    }

    /// A frame whose planes `lock` has page-locked (`ranges`: [`plane_ranges`] of `planar` when
    /// it locked them); released when the frame (and every [`PinToken`] taken from it) is gone.
    pub fn pinned(planar: PlanarFrame, ranges: Vec<HostRange>, lock: Arc<dyn PageLock>) -> Self {
        Frame { pin: Some(PinToken(Arc::new(Pin { ranges, lock }))), planar }
    }

    /// The page-locked ranges of the planes, when the frame carries a page-lock that covers
    /// every plane as it is now.
    pub fn pinned_ranges(&self) -> Option<&[HostRange]> {
        let pin = &self.pin.as_ref()?.0;
        (pin.ranges == plane_ranges(&self.planar)).then_some(&pin.ranges)
    }

    /// The planes, without the page-lock (released here unless a token of it lives on).
    pub fn into_planar(self) -> PlanarFrame {
        self.into_parts().0
    }

    /// The planes and the page-lock apart.
    pub fn into_parts(self) -> (PlanarFrame, Option<PinToken>) {
        (self.planar, self.pin)
    }

    /// A frame put together again from [`Self::into_parts`]; page-locked where `pin` covers
    /// exactly these planes ([`Self::pinned_ranges`]).
    pub fn from_parts(planar: PlanarFrame, pin: Option<PinToken>) -> Self {
        Frame { pin, planar }
    }

    /// True when both tokens are the same page-lock.
    pub fn same_pin(a: &PinToken, b: &PinToken) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl Deref for Frame {
    type Target = PlanarFrame;
    fn deref(&self) -> &PlanarFrame {
        &self.planar
    }
}

impl DerefMut for Frame {
    fn deref_mut(&mut self) -> &mut PlanarFrame {
        &mut self.planar
    }
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frame").field("planes", &self.planar.planes.len()).field("pinned", &self.pinned_ranges().is_some()).finish()
    }
}

/// Makes the frames of a backend's pool (page-locked for a backend that DMAs them).
pub trait FrameMaker: Send + Sync {
    fn make(&self, geometry: &Geometry) -> Frame;
}

/// Frames of ordinary memory (host backends).
pub struct HostFrames;

impl FrameMaker for HostFrames {
    fn make(&self, geometry: &Geometry) -> Frame {
        Frame::zeroed(geometry)
    }
}

/// A backend's frames by geometry (see the module doc).
pub struct FramePool {
    maker: Arc<dyn FrameMaker>,
    lists: Vec<(Geometry, Vec<Frame>)>,
    /// Frames given back while something else still shares them ([`Self::give_shared`]): spare
    /// once the pool holds the only reference.
    shared: Vec<Arc<Frame>>,
    /// Frames made since the pool was created (the benchmarks show that it stops growing).
    made: u64,
}

impl FramePool {
    pub fn new(maker: Arc<dyn FrameMaker>) -> Self {
        FramePool { maker, lists: Vec::new(), shared: Vec::new(), made: 0 }
    }

    /// A pool of ordinary frames.
    pub fn host() -> Self {
        FramePool::new(Arc::new(HostFrames))
    }

    /// What makes this pool's frames (chunked execution hands its workers' maker to its own
    /// pool, so that the frames it takes in are the ones its devices DMA).
    pub fn maker(&self) -> Arc<dyn FrameMaker> {
        self.maker.clone()
    }

    /// Keeps frames of `geometries` from now on; frames of other planes are dropped.
    pub fn keep_only(&mut self, geometries: &[&Geometry]) {
        self.lists.retain(|(g, _)| geometries.contains(&g));
        self.shared.retain(|f| geometries.iter().any(|g| f.matches(g)));
        for g in geometries {
            if !self.lists.iter().any(|(h, _)| h == *g) {
                self.lists.push(((*g).clone(), Vec::new()));
            }
        }
    }

    /// A spare frame of `geometry` if the pool holds one (a shared frame given back counts once
    /// nothing else holds it).
    pub fn take_spare(&mut self, geometry: &Geometry) -> Option<Frame> {
        if let Some(f) = self.lists.iter_mut().find(|(g, _)| g == geometry).and_then(|(_, l)| l.pop()) {
            return Some(f);
        }
        let i = self.shared.iter().position(|f| Arc::strong_count(f) == 1 && f.matches(geometry))?;
        Arc::try_unwrap(self.shared.swap_remove(i)).ok()
    }

    /// A frame of `geometry`: a spare one, or a new one (its content is whatever it held).
    pub fn take(&mut self, geometry: &Geometry) -> Frame {
        match self.take_spare(geometry) {
            Some(f) => f,
            None => {
                self.made += 1;
                self.maker.make(geometry)
            }
        }
    }

    /// Keeps `frame` for reuse if the pool keeps its planes; drops it otherwise.
    pub fn give(&mut self, frame: Frame) {
        if let Some((_, l)) = self.lists.iter_mut().find(|(g, _)| frame.matches(g)) {
            l.push(frame);
        }
    }

    /// Gives back a frame that others may still share (chunked execution's inputs, read by chunks
    /// in flight): it becomes spare when the pool holds the only reference.
    pub fn give_shared(&mut self, frame: Arc<Frame>) {
        match Arc::try_unwrap(frame) {
            Ok(f) => self.give(f),
            Err(shared) => {
                if self.lists.iter().any(|(g, _)| shared.matches(g)) {
                    self.shared.push(shared);
                }
            }
        }
    }

    /// Frames made since the pool was created.
    pub fn made(&self) -> u64 {
        self.made
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::PixelFormat;
    use crate::frame::VideoInfo;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<Vec<HostRange>>>);

    impl PageLock for Recorder {
        fn release(&self, ranges: &[HostRange]) {
            self.0.lock().unwrap().push(ranges.to_vec());
        }
    }

    fn geometry(w: usize) -> Geometry {
        Geometry::from_video_info(&VideoInfo::new(PixelFormat::I420, w, 8).unwrap())
    }

    #[test]
    fn a_pinned_frame_is_released_once_when_dropped() {
        let lock = Arc::new(Recorder::default());
        let planar = PlanarFrame::zeroed(&geometry(16));
        let ranges = plane_ranges(&planar);
        let f = Frame::pinned(planar, ranges.clone(), lock.clone());
        assert_eq!(f.pinned_ranges(), Some(&ranges[..]));
        drop(f);
        assert_eq!(*lock.0.lock().unwrap(), vec![ranges]);
    }

    #[test]
    fn replaced_storage_is_not_reported_pinned() {
        let lock = Arc::new(Recorder::default());
        let planar = PlanarFrame::zeroed(&geometry(16));
        let ranges = plane_ranges(&planar);
        let mut f = Frame::pinned(planar, ranges, lock.clone());
        f.planes[0] = PlanarFrame::zeroed(&geometry(16)).planes.remove(0);
        assert!(f.pinned_ranges().is_none(), "a plane's storage changed: no DMA straight into it");
        let p = f.into_planar();
        assert_eq!(p.planes.len(), 3);
        assert_eq!(lock.0.lock().unwrap().len(), 1, "into_planar releases the page-lock");
    }

    #[test]
    fn a_page_lock_taken_apart_lives_until_its_last_token() {
        let lock = Arc::new(Recorder::default());
        let planar = PlanarFrame::zeroed(&geometry(16));
        let ranges = plane_ranges(&planar);
        let (planes, pin) = Frame::pinned(planar, ranges.clone(), lock.clone()).into_parts();
        let token = pin.clone().expect("pinned");
        let again = Frame::from_parts(planes, pin);
        assert_eq!(again.pinned_ranges(), Some(&ranges[..]), "put together again: still page-locked");
        drop(again);
        assert!(lock.0.lock().unwrap().is_empty(), "a token still holds the page-lock");
        drop(token);
        assert_eq!(lock.0.lock().unwrap().len(), 1);
    }

    #[test]
    fn the_pool_reuses_frames_and_drops_other_planes() {
        let mut pool = FramePool::host();
        let (a, b) = (geometry(16), geometry(32));
        pool.keep_only(&[&a]);
        let f = pool.take(&a);
        let at = f.planes[0].samples.as_bytes().as_ptr();
        pool.give(f);
        let g = pool.take(&a);
        assert_eq!(g.planes[0].samples.as_bytes().as_ptr(), at, "the same frame comes back");
        assert_eq!(pool.made(), 1);
        pool.give(pool.maker().make(&b));
        assert!(pool.take_spare(&b).is_none(), "frames of planes the pool does not keep are dropped");
        pool.keep_only(&[&b]);
        pool.give(g);
        assert!(pool.take_spare(&a).is_none());
    }

    #[test]
    fn a_shared_frame_given_back_is_spare_once_unshared() {
        let mut pool = FramePool::host();
        let a = geometry(16);
        pool.keep_only(&[&a]);
        let f = Arc::new(pool.take(&a));
        let reader = f.clone();
        pool.give_shared(f);
        assert!(pool.take_spare(&a).is_none(), "still read elsewhere");
        drop(reader);
        assert!(pool.take_spare(&a).is_some(), "spare once the pool holds the only reference");
        assert_eq!(pool.made(), 1);
    }
}
