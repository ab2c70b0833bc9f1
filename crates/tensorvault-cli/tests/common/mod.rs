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

/// The 128-byte header of a collection's `meta.log` (codec byte 48, flags byte 49, flags2 byte 78).
pub fn collection_header(root: &Path, tenant: &str, collection: &str) -> Vec<u8> {
    let log = root.join(tenant).join(collection).join("meta.log");
    let mut h = std::fs::read(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    h.truncate(128);
    h
}

/// `store get ROOT TENANT COLLECTION NAME OUT` and the bytes it wrote.
pub fn store_get(root: &Path, [tenant, collection, name]: [&str; 3], out: &Path) -> Vec<u8> {
    ok(&tv(&[
        "store",
        "get",
        s(root),
        tenant,
        collection,
        name,
        s(out),
    ]));
    std::fs::read(out).unwrap()
}

/// Assert the command failed and its stderr names `needle`.
pub fn refused(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains(needle), "{err}");
}

/// Bell-shaped values (a sum of three sines of unrelated periods), far from uniform codes.
pub fn bell(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let i = i as f32;
            (i * 0.37).sin() + (i * 1.13).sin() + (i * 2.71).sin()
        })
        .collect()
}

/// `store stats ROOT --json`'s `stats[field][tier]` for `collection`.
pub fn collection_stat(root: &Path, collection: &str, field: &str, tier: usize) -> u64 {
    let st = ok(&tv(&["store", "stats", s(root), "--json"]));
    let v: serde_json::Value = serde_json::from_str(&st).unwrap_or_else(|e| panic!("{e}: {st}"));
    let coll = v["collections"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["collection"] == collection))
        .unwrap_or_else(|| panic!("{collection} missing: {v}"));
    coll["stats"][field][tier]
        .as_u64()
        .unwrap_or_else(|| panic!("{collection}: no {field}[{tier}]: {v}"))
}
