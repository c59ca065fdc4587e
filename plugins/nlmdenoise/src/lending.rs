//! Frames without copies between GStreamer and the engine: the engine's planar frames lent as
//! buffers, downstream (the outputs) and upstream (empty frames for the next inputs, through a
//! buffer pool the element proposes), and taken back.
//!
//! Every plane lent out comes back to a [`PlaneStore`] when GStreamer lets go of it, with the
//! page-lock of its frame (`device::frames::PinToken`: the CUDA backend's frames are page-locked
//! when made, and released when the last plane or frame holding the token goes), so that the
//! frames the store hands out again go to the device by DMA. The store makes new frames with the
//! engine's frame maker, page-locked as the engine's own.
//!
//! The frames are the engine's exchange frames (`planar::exchange_layout`): planar frames for
//! formats that store one component per memory plane, stored frames (one plane per memory plane,
//! rows as stored) for NV12, P010 and packed RGB. A buffer holds one memory per memory plane,
//! each plane's rows at a stride of their own length; where that is the caps' default layout no
//! `GstVideoMeta` is needed.
//!
//! [`Lending`] is what a stream's state lends (the stores, the layouts of output buffers and of
//! the pool proposed upstream), [`PlaneLayout`] how a lent frame's planes sit in its buffer.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use gst::glib;
use gst::subclass::prelude::*;
use nlmdenoise::device::frames::{FrameMaker, PinToken};
use nlmdenoise::device::Frame;
use nlmdenoise::planar::{exchange_layout, Geometry, PlanarFrame, Plane};
use nlmdenoise::Denoiser;

use crate::lock;

/// Planes of one geometry that GStreamer gave back, per component, each with its frame's
/// page-lock, and the addresses of the first planes the pool lent upstream (to recognise its
/// buffers when they come in).
#[derive(Clone)]
pub struct PlaneStore(Arc<Mutex<StoreInner>>);

type StoredPlane = (Plane, Option<PinToken>);

struct StoreInner {
    geometry: Geometry,
    planes: Vec<Vec<StoredPlane>>,
    lent_to_upstream: HashSet<usize>,
    maker: Arc<dyn FrameMaker>,
}

impl PlaneStore {
    pub fn new(geometry: &Geometry, maker: Arc<dyn FrameMaker>) -> Self {
        PlaneStore(Arc::new(Mutex::new(StoreInner { geometry: geometry.clone(), planes: vec![Vec::new(); geometry.planes.len()], lent_to_upstream: HashSet::new(), maker })))
    }

    fn give(&self, component: usize, plane: Plane, pin: Option<PinToken>) {
        let mut s = lock(&self.0);
        if let Some(list) = s.planes.get_mut(component) {
            list.push((plane, pin));
        }
    }

    pub fn give_frame(&self, frame: Frame) {
        let (planar, pin) = frame.into_parts();
        for (c, plane) in planar.planes.into_iter().enumerate() {
            self.give(c, plane, pin.clone());
        }
    }

    /// A frame assembled from given-back planes, if there is one of each (planes of one frame
    /// together where they are, so that its page-lock still covers it).
    pub fn take_frame(&self) -> Option<Frame> {
        let mut s = lock(&self.0);
        if s.planes.iter().any(|l| l.is_empty()) {
            return None;
        }
        let (first, pin) = s.planes[0].pop().expect("checked");
        let mut planes = vec![first];
        for list in s.planes.iter_mut().skip(1) {
            let same = pin.as_ref().and_then(|p| list.iter().rposition(|(_, q)| q.as_ref().is_some_and(|q| Frame::same_pin(p, q))));
            let (plane, _) = match same {
                Some(i) => list.swap_remove(i),
                None => list.pop().expect("checked"),
            };
            planes.push(plane);
        }
        Some(Frame::from_parts(PlanarFrame { planes }, pin))
    }

    fn take_or_new(&self) -> Frame {
        self.take_frame().unwrap_or_else(|| {
            let (maker, geometry) = {
                let s = lock(&self.0);
                (s.maker.clone(), s.geometry.clone())
            };
            maker.make(&geometry)
        })
    }

    pub fn same(&self, other: &PlaneStore) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The memory planes of lent frames: the component each holds, in memory-plane order.
#[derive(Clone, Debug)]
pub struct PlaneOrder(pub Vec<usize>);

/// A frame lent downstream inside an output buffer (read-only memories, one per plane); back to
/// its store when the last of them goes.
struct LentFrame {
    frame: Option<Frame>,
    store: PlaneStore,
}

impl Drop for LentFrame {
    fn drop(&mut self) {
        if let Some(f) = self.frame.take() {
            self.store.give_frame(f);
        }
    }
}

/// One plane of a lent output frame, as the bytes of a memory.
struct LentPlane {
    frame: Arc<LentFrame>,
    plane: usize,
}

impl AsRef<[u8]> for LentPlane {
    fn as_ref(&self) -> &[u8] {
        self.frame.frame.as_ref().map(|f| f.planes[self.plane].samples.as_bytes()).unwrap_or(&[])
    }
}

/// `frame` as a buffer of read-only memories in `order`, returning to `store` when released.
pub fn lend_output(frame: Frame, order: &PlaneOrder, store: &PlaneStore) -> gst::Buffer {
    let shared = Arc::new(LentFrame { frame: Some(frame), store: store.clone() });
    let mut buffer = gst::Buffer::new();
    {
        let b = buffer.get_mut().expect("new buffer");
        for &c in &order.0 {
            b.append_memory(gst::Memory::from_slice(LentPlane { frame: shared.clone(), plane: c }));
        }
    }
    buffer
}

/// One plane of a frame lent upstream to be filled, as a writable memory; back to its store when
/// dropped (unless the element took it back into a frame).
struct FillPlane {
    component: usize,
    plane: Option<Plane>,
    /// The page-lock of the frame the plane belongs to.
    pin: Option<PinToken>,
    store: PlaneStore,
}

impl AsMut<[u8]> for FillPlane {
    fn as_mut(&mut self) -> &mut [u8] {
        match self.plane.as_mut() {
            Some(p) => p.samples.as_bytes_mut(),
            None => &mut [],
        }
    }
}

impl Drop for FillPlane {
    fn drop(&mut self) {
        if let Some(p) = self.plane.take() {
            self.store.give(self.component, p, self.pin.take());
        }
    }
}

fn data_address(buffer: &gst::BufferRef) -> Option<usize> {
    let mem = buffer.peek_memory(0);
    mem.map_readable().ok().map(|m| m.as_ptr() as usize)
}

/// An input buffer the element's pool lent upstream, filled: its frame, taken back without a copy
/// (`Err` gives the buffer back, unchanged in content, when it is not one of the pool's or is
/// shared with someone else).
pub fn take_input(mut buffer: gst::Buffer, order: &PlaneOrder, store: &PlaneStore) -> Result<Frame, gst::Buffer> {
    let n = order.0.len();
    if buffer.n_memory() != n || !buffer.is_writable() || !buffer.is_all_memory_writable() {
        return Err(buffer);
    }
    let ours = {
        let s = lock(&store.0);
        let g = &s.geometry;
        // One of the pool's buffers, each memory whole as the pool made it (not resized or
        // re-offset upstream).
        data_address(&buffer).is_some_and(|a| s.lent_to_upstream.contains(&a))
            && (0..n).all(|i| {
                let m = buffer.peek_memory(i);
                let p = &g.planes[order.0[i]];
                m.offset() == 0 && m.size() == p.width * p.height * g.bytes_per_sample
            })
    };
    if !ours {
        return Err(buffer);
    }
    let memories: Vec<gst::Memory> = buffer.iter_memories_owned().collect();
    buffer.get_mut().expect("writable").remove_all_memory();
    let mut planes: Vec<Option<Plane>> = (0..n).map(|_| None).collect();
    let mut parts: Vec<Result<FillPlane, gst::Memory>> = Vec::with_capacity(n);
    for m in memories {
        parts.push(m.try_into_inner::<FillPlane>().map_err(|(m, _)| m));
    }
    let mut components: Vec<usize> = parts.iter().filter_map(|p| p.as_ref().ok().map(|f| f.component)).collect();
    components.sort_unstable();
    let all_ours = parts.iter().all(|p| matches!(p, Ok(f) if f.store.same(store) && f.plane.is_some())) && components.iter().copied().eq(0..n);
    if !all_ours {
        // Not what the registry said (shared memory, another store): the buffer as it was.
        let b = buffer.get_mut().expect("writable");
        for p in parts {
            b.append_memory(match p {
                Ok(fill) => gst::Memory::from_mut_slice(fill),
                Err(m) => m,
            });
        }
        return Err(buffer);
    }
    let mut pin = None;
    for mut fill in parts.into_iter().flatten() {
        planes[fill.component] = fill.plane.take();
        pin = pin.or(fill.pin.take());
    }
    // Checked above: one plane per component. The frame is page-locked again where the planes
    // are still the ones its page-lock covers (Frame::pinned_ranges checks).
    Ok(Frame::from_parts(PlanarFrame { planes: planes.into_iter().flatten().collect() }, pin))
}

/// The state's frames lent to GStreamer: downstream as output buffers where `output` allows,
/// upstream through the proposed pool where the input caps allow, and the stores they come back
/// to (one store when input and output frames have the same planes).
pub struct Lending {
    pub output: Option<PlaneLayout>,
    pub out_store: PlaneStore,
    pub input: Option<PlaneOrder>,
    pub in_store: PlaneStore,
    /// The pool proposed upstream (created at the first allocation query of these caps).
    pub pool: Option<PlanarPool>,
}

impl Lending {
    pub fn new<T>(denoiser: &mut Denoiser<T>, in_info: &gst_video::VideoInfo, out_info: &gst_video::VideoInfo) -> Self {
        let maker = denoiser.frame_maker();
        let (in_geometry, out_geometry) = denoiser.exchange_geometry();
        let in_store = PlaneStore::new(in_geometry, maker.clone());
        let out_store = if out_geometry == in_geometry { in_store.clone() } else { PlaneStore::new(out_geometry, maker) };
        let output = PlaneLayout::new(denoiser.output_info(), out_info);
        // Upstream writes the caps' default layout into a pool's buffers: a pool is offered only
        // where that is the engine's.
        let input = PlaneLayout::new(denoiser.info(), in_info).filter(|l| l.default_layout).map(|l| l.order);
        Lending { output, out_store, input, in_store, pool: None }
    }
}

/// The engine's exchange frames as GStreamer buffers: one memory per memory
/// plane of the format, each plane's rows at a stride of their own length. Planar formats lend
/// the engine's planar frames; formats that interleave components (NV12, P010, packed RGB) lend
/// stored frames (`planar::exchange_layout`), which the CUDA backend (de)interleaves on the GPU.
pub struct PlaneLayout {
    pub order: PlaneOrder,
    /// Byte offset of each memory plane in the buffer and its row stride.
    offsets: Vec<usize>,
    strides: Vec<i32>,
    /// The offsets and strides are the caps' default ones (no `GstVideoMeta` needed).
    pub default_layout: bool,
}

impl PlaneLayout {
    fn new(engine: nlmdenoise::VideoInfo, info: &gst_video::VideoInfo) -> Option<Self> {
        let (geometry, order) = exchange_layout(&engine);
        let mut offsets = Vec::with_capacity(order.len());
        let mut strides = Vec::with_capacity(order.len());
        let mut at = 0;
        for &c in &order {
            let plane = &geometry.planes[c];
            offsets.push(at);
            strides.push((plane.width * geometry.bytes_per_sample) as i32);
            at += plane.width * plane.height * geometry.bytes_per_sample;
        }
        let default_layout = info.offset().iter().zip(&offsets).all(|(a, b)| *a == *b) && info.stride().iter().zip(&strides).all(|(a, b)| a == b) && at == info.size();
        Some(PlaneLayout { order: PlaneOrder(order), offsets, strides, default_layout })
    }

    /// `frame` lent downstream as a buffer, with a `GstVideoMeta` where the layout is not the
    /// default one or downstream takes one (it then maps plane by plane; without the meta a
    /// whole-buffer map merges the planes into a copy).
    pub fn lend(&self, frame: Frame, store: &PlaneStore, info: &gst_video::VideoInfo, video_meta: bool) -> Result<gst::Buffer, gst::FlowError> {
        let mut buffer = lend_output(frame, &self.order, store);
        if video_meta || !self.default_layout {
            let b = buffer.get_mut().expect("new buffer");
            gst_video::VideoMeta::add_full(b, gst_video::VideoFrameFlags::empty(), info.format(), info.width(), info.height(), &self.offsets, &self.strides).map_err(|_| gst::FlowError::Error)?;
        }
        Ok(buffer)
    }
}

/// Input frames the engine holds spare go back to the lending store, the one free list of
/// input frames while frames are lent (the pool's next buffers and the next copied-in inputs
/// take from it); so no list grows while the other allocates.
pub fn return_spares<T>(denoiser: &mut Denoiser<T>, store: &PlaneStore) {
    while let Some(frame) = denoiser.spare_frame() {
        store.give_frame(frame);
    }
}

glib::wrapper! {
    /// A buffer pool whose buffers are engine frames to fill (see the module doc).
    pub struct PlanarPool(ObjectSubclass<imp::PlanarPool>) @extends gst::BufferPool, gst::Object;
}

/// What the pool's buffers hold: the frames' store, the memory planes' order and, for the
/// `GstVideoMeta` upstream asks for (without it a writable map of the whole buffer would merge
/// the planes into one copy), the caps' plane offsets and strides.
#[derive(Clone)]
pub struct PoolSetup {
    pub store: PlaneStore,
    pub order: PlaneOrder,
    pub info: gst_video::VideoInfo,
}

impl PlanarPool {
    pub fn new(setup: PoolSetup) -> Self {
        let pool: Self = glib::Object::new();
        *lock(&pool.imp().setup) = Some(setup);
        pool
    }
}

mod imp {
    use super::*;

    #[derive(Default)]
    pub struct PlanarPool {
        pub(super) setup: Mutex<Option<PoolSetup>>,
        /// Upstream set `GST_BUFFER_POOL_OPTION_VIDEO_META`: every buffer carries the meta.
        video_meta: Mutex<bool>,
    }

    #[glib::object_subclass]
    impl ObjectSubclass for PlanarPool {
        const NAME: &'static str = "GstNlmPlanarPool";
        type Type = super::PlanarPool;
        type ParentType = gst::BufferPool;
    }

    impl ObjectImpl for PlanarPool {}
    impl GstObjectImpl for PlanarPool {}

    impl BufferPoolImpl for PlanarPool {
        fn options() -> &'static [&'static str] {
            static OPTIONS: std::sync::LazyLock<[&'static str; 1]> = std::sync::LazyLock::new(|| [gst_video::BUFFER_POOL_OPTION_VIDEO_META.as_str()]);
            &*OPTIONS
        }

        fn set_config(&self, config: &mut gst::BufferPoolConfigRef) -> bool {
            // Only the caps the pool was made for: its frames have their planes.
            let caps_fit = match (config.params(), lock(&self.setup).as_ref()) {
                (Some((Some(caps), _, _, _)), Some(setup)) => gst_video::VideoInfo::from_caps(&caps).ok().as_ref() == Some(&setup.info),
                _ => false,
            };
            if !caps_fit {
                return false;
            }
            *lock(&self.video_meta) = config.has_option(gst_video::BUFFER_POOL_OPTION_VIDEO_META);
            self.parent_set_config(config)
        }

        fn alloc_buffer(&self, _params: Option<&gst::BufferPoolAcquireParams>) -> Result<gst::Buffer, gst::FlowError> {
            let Some(PoolSetup { store, order, info }) = lock(&self.setup).clone() else { return Err(gst::FlowError::NotNegotiated) };
            let (planar, pin) = store.take_or_new().into_parts();
            let mut planes: Vec<Option<Plane>> = planar.planes.into_iter().map(Some).collect();
            let mut buffer = gst::Buffer::new();
            {
                let b = buffer.get_mut().expect("new buffer");
                for &c in &order.0 {
                    b.append_memory(gst::Memory::from_mut_slice(FillPlane { component: c, plane: planes[c].take(), pin: pin.clone(), store: store.clone() }));
                }
                if *lock(&self.video_meta) {
                    gst_video::VideoMeta::add_full(b, gst_video::VideoFrameFlags::empty(), info.format(), info.width(), info.height(), info.offset(), info.stride())
                        .map_err(|_| gst::FlowError::Error)?;
                }
            }
            if let Some(a) = data_address(&buffer) {
                lock(&store.0).lent_to_upstream.insert(a);
            }
            Ok(buffer)
        }
    }
}
