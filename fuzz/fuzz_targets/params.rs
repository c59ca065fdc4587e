#![no_main]
// src/fuzzing.rs `params`: arbitrary bytes, no panic, hang or unbounded allocation.
libfuzzer_sys::fuzz_target!(|data: &[u8]| nlmdenoise::fuzzing::params(data));
