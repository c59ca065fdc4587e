#![no_main]
// The elements through a gst-check harness: plugins/nlmdenoise/tests/fuzz_element/mod.rs, also
// replayed over fuzz/corpus/element by plugins/nlmdenoise/tests/fuzz_element.rs.
#[path = "../../plugins/nlmdenoise/tests/fuzz_element/mod.rs"]
mod fuzz_element;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_element::element(data));
