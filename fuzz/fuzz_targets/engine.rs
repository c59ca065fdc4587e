#![no_main]
// src/fuzzing.rs `engine`: arbitrary bytes, no panic, hang or unbounded allocation.
libfuzzer_sys::fuzz_target!(|data: &[u8]| nlmdenoise::fuzzing::engine(data));
