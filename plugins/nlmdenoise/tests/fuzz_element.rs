//! The element fuzz target's corpus (fuzz/corpus/element/) replayed through the same entry point
//! (tests/fuzz_element/mod.rs), and a batch of fresh pseudo-random inputs on every run, so that
//! what the fuzzing campaigns found stays found (docs/reliability.md, "Fuzzing").

#[path = "fuzz_element/mod.rs"]
mod fuzz_element;

use std::path::Path;

#[test]
fn element_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/element");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 10, "{}: only {} inputs", dir.display(), files.len());
    for f in &files {
        // A panic names the input, so that `cargo fuzz run element <file>` reproduces it.
        eprintln!("element: {}", f.display());
        fuzz_element::element(&std::fs::read(f).unwrap());
    }
}

#[test]
fn fresh_random_inputs() {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    eprintln!("seed {x:#x}");
    for _ in 0..200 {
        let len = (x % 96) as usize;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        fuzz_element::element(&data);
    }
}
