//! Helpers shared by the CLI's end-to-end test binaries.
#![allow(dead_code, reason = "each test binary uses a subset of the helpers")]

use std::path::Path;
use std::process::{Command, Output};

/// Run `tensorvault -q ARGS...` and capture its output.
pub fn tv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tensorvault"))
        .arg("-q")
        .args(args)
        .output()
        .expect("run tensorvault")
}

/// A path as `&str` for command-line arguments.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Write `vals` as a C-order `.npy` file of `shape`.
pub fn write_npy<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], vals: &[T]) {
    use npyz::WriterBuilder;
    let mut bytes = Vec::new();
    {
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(shape)
            .writer(&mut bytes)
            .begin_nd()
            .unwrap();
        w.extend(vals.iter().copied()).unwrap();
        w.finish().unwrap();
    }
    std::fs::write(path, bytes).unwrap();
}

/// Assert the command succeeded (printing its output if not) and return its stdout.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Run `tensorvault -q store put ROOT TENANT COLLECTION NAME INPUT --tier TIER EXTRA...`.
pub fn store_put(
    root: &Path,
    [tenant, collection, name]: [&str; 3],
    input: &Path,
    tier: &str,
    extra: &[&str],
) -> Output {
    let mut args = vec![
        "store",
        "put",
        s(root),
        tenant,
        collection,
        name,
        s(input),
        "--tier",
        tier,
    ];
    args.extend_from_slice(extra);
    tv(&args)
}
