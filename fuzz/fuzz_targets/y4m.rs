#![no_main]
// src/fuzzing.rs `y4m`: arbitrary bytes, no panic, hang or unbounded allocation.
libfuzzer_sys::fuzz_target!(|data: &[u8]| nlmdenoise::fuzzing::y4m(data));
