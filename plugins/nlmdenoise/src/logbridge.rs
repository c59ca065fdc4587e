//! Forwards the engine's `tracing` events into the element's GStreamer debug category.
//!
//! The engine logs with `tracing` (e.g. which backend `auto` picked and why). A plugin must not
//! install a process-wide tracing subscriber: the host application may install its own later, and
//! `tracing_subscriber::fmt().init()` panics when one already exists. Instead every element owns a
//! [`tracing::Dispatch`] wrapping [`GstLogSubscriber`] and makes it the *thread-local* default
//! around its engine calls ([`with_engine_logs`]). Events then appear under `GST_DEBUG=nlmdenoise:N`
//! attributed to the element instance. Events emitted on other threads (e.g. a backend's worker
//! pool) are not captured this way; they go to whatever global subscriber the process has.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};

use gst::glib;
use gst::glib::prelude::*;
use gst::log::DebugLogger;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

fn gst_level(level: &Level) -> gst::DebugLevel {
    match *level {
        Level::ERROR => gst::DebugLevel::Error,
        Level::WARN => gst::DebugLevel::Warning,
        Level::INFO => gst::DebugLevel::Info,
        Level::DEBUG => gst::DebugLevel::Debug,
        Level::TRACE => gst::DebugLevel::Trace,
    }
}

/// A `tracing` subscriber that writes events to a debug category (the element's), attributed to
/// one element. Spans are accepted and ignored.
pub struct GstLogSubscriber {
    element: glib::WeakRef<gst::Element>,
    category: gst::DebugCategory,
    next_span: AtomicU64,
}

impl GstLogSubscriber {
    pub fn new(element: &gst::Element, category: gst::DebugCategory) -> Self {
        GstLogSubscriber { element: element.downgrade(), category, next_span: AtomicU64::new(1) }
    }
}

/// Collects the `message` field and `name=value` for the others.
#[derive(Default)]
struct MessageVisitor {
    message: String,
    fields: String,
}

impl Visit for MessageVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={:?}", field.name(), value);
        }
    }
}

impl Subscriber for GstLogSubscriber {
    fn register_callsite(&self, _metadata: &'static Metadata<'static>) -> Interest {
        // The GStreamer threshold can change at any time (gst_debug_set_threshold...), so ask
        // `enabled` for every event instead of caching a decision per call site.
        Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_span() || self.category.above_threshold(gst_level(metadata.level()))
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed).max(1))
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        let level = gst_level(meta.level());
        if !self.category.above_threshold(level) {
            return;
        }
        let mut visitor = MessageVisitor::default();
        event.record(&mut visitor);
        let file = glib::GString::from(meta.file().unwrap_or("engine"));
        let function = meta.module_path().unwrap_or(meta.target());
        let line = meta.line().unwrap_or(0);
        let element = self.element.upgrade();
        self.category.log(element.as_ref(), level, file.as_gstr(), function, line, format_args!("{}{}", visitor.message, visitor.fields));
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

/// Runs `f` with `dispatch` as this thread's tracing default.
pub fn with_engine_logs<R>(dispatch: Option<&tracing::Dispatch>, f: impl FnOnce() -> R) -> R {
    match dispatch {
        Some(d) => tracing::dispatcher::with_default(d, f),
        None => f(),
    }
}
