//! Replays the fuzz targets' checked-in corpus (fuzz/corpus/<target>/, the inputs libFuzzer kept
//! for the coverage they reach, and every input that once failed) through the same entry points
//! (src/fuzzing.rs), so every test run keeps what the fuzzing campaigns found (docs/reliability.md).

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 10, "{}: only {} inputs", dir.display(), files.len());
    for f in &files {
        let data = std::fs::read(f).unwrap();
        // A panic names the input, so that `cargo fuzz run <target> <file>` reproduces it.
        eprintln!("{target}: {}", f.display());
        run(&data);
    }
    eprintln!("{target}: {} inputs replayed", files.len());
}

#[test]
fn y4m_corpus() {
    replay("y4m", nlmdenoise::fuzzing::y4m);
}

#[test]
fn params_corpus() {
    replay("params", nlmdenoise::fuzzing::params);
}

#[test]
fn engine_corpus() {
    replay("engine", nlmdenoise::fuzzing::engine);
}
