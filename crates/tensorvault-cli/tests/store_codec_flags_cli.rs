//! `store put`'s opt-in codec flags create collections whose MetaLog header says so (codec
//! byte 48, flags byte 49) and read back through `store get`; each flag without its
//! prerequisite is refused by the argument parser with an error naming the missing flag.
//!
//! - `--kv-ecsq`: codec 4, bits 0 and 2 (entropy-coded tier 3 KV values); needs `--kv-head-dim`.
//! - `--kv-ecsq-tier2`: bits 0, 2 and 4 (tier 2 KV values as well); needs `--kv-ecsq`.
//! - `--ecsq`: codec 4, bits 0 and 3 (weights and embeddings); refused with `--kv-head-dim`.
//! - `--row-gains`: codec 4, bit 6 (one gain per row of embedding blocks: each row's
//!   inner product with itself unbiased); with `--ecsq` bits 0, 3 and 6; refused with
//!   `--kv-head-dim`.
//! - `--ecsq-model`: with `--ecsq`, bit 7 (TQTC version 7 model-coded ECSQ: less error
//!   than `--ecsq` alone); refused without `--ecsq`.
//! - `--centre`: with `--row-gains`, bit 5 (2-D embedding tables stored centred on their
//!   mean row: less error on a table with a large mean row); refused without `--row-gains`.
//! - `--kv-keys-ecsq`: codec 4, bit 0 and flags2 (byte 78) bit 0 (tier 2 KV keys as TQTC
//!   version 8); needs `--kv-head-dim`.

mod common;

use common::{bell, collection_header, ok, refused, store_get, store_put, write_npy};
use half::f16;
use std::path::Path;

/// A 512 x 64 f16 KV tensor and a 96 x 384 f32 weight, written as `.npy` under `dir`.
fn inputs(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (kv, w) = (dir.join("v.npy"), dir.join("w.npy"));
    let vals: Vec<f16> = bell(512 * 64).into_iter().map(f16::from_f32).collect();
    write_npy(&kv, &[512, 64], &vals);
    let weights: Vec<f32> = (0..96 * 384)
        .map(|i| {
            let i = i as f32;
            0.02 * ((i * 0.37).sin() + (i * 1.13).sin() * (i * 0.011).cos())
        })
        .collect();
    write_npy(&w, &[96, 384], &weights);
    (kv, w)
}

const KV: &[&str] = &["--kv-head-dim", "64", "--kind", "kv_value"];

/// Put `input` at `tier` into a new collection with `KV`-style base args plus `extra`,
/// returning its (codec, flags) header bytes.
fn put(root: &Path, input: &Path, c: &str, tier: &str, base: &[&str], extra: &[&str]) -> (u8, u8) {
    let args: Vec<&str> = base.iter().chain(extra).copied().collect();
    ok(&store_put(root, ["t", c, "x"], input, tier, &args));
    let h = collection_header(root, "t", c);
    (h[48], h[49])
}

#[test]
fn kv_ecsq_creates_a_codec_4_entropy_coded_kv_cache() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let (kv, _) = inputs(dir.path());
    assert_eq!(put(&root, &kv, "plain", "3", KV, &[]), (2, 0));
    assert_eq!(put(&root, &kv, "ecsq", "3", KV, &["--kv-ecsq"]), (4, 0b101));
    let out = store_get(&root, ["t", "ecsq", "x"], &dir.path().join("out.npy"));
    assert!(out.len() >= 512 * 64 * 2);
    refused(
        &store_put(&root, ["t", "bad", "x"], &kv, "3", &["--kv-ecsq"]),
        "kv-head-dim",
    );
}

#[test]
fn kv_ecsq_tier2_sets_header_bit_4_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let (kv, _) = inputs(dir.path());
    assert_eq!(put(&root, &kv, "ecsq", "2", KV, &["--kv-ecsq"]), (4, 0b101));
    let tier2 = ["--kv-ecsq", "--kv-ecsq-tier2"];
    assert_eq!(put(&root, &kv, "tier2", "2", KV, &tier2), (4, 0b1_0101));
    let a = store_get(&root, ["t", "ecsq", "x"], &dir.path().join("a.npy"));
    let b = store_get(&root, ["t", "tier2", "x"], &dir.path().join("b.npy"));
    assert_eq!(a.len(), b.len());
    assert_ne!(a, b, "tier 2 values are stored another way with bit 4");
    refused(
        &store_put(
            &root,
            ["t", "bad", "x"],
            &kv,
            "2",
            &["--kv-head-dim", "64", "--kv-ecsq-tier2"],
        ),
        "kv-ecsq",
    );
}

#[test]
fn kv_keys_ecsq_sets_flags2_bit_0_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let (kv, _) = inputs(dir.path());
    let keys = ["--kv-head-dim", "64", "--kind", "kv_key"];
    assert_eq!(
        put(&root, &kv, "ecsq", "2", &keys, &["--kv-ecsq"]),
        (4, 0b101)
    );
    let both = ["--kv-ecsq", "--kv-keys-ecsq"];
    assert_eq!(put(&root, &kv, "keys", "2", &keys, &both), (4, 0b101));
    assert_eq!(collection_header(&root, "t", "ecsq")[78], 0);
    assert_eq!(collection_header(&root, "t", "keys")[78], 1);
    assert_eq!(
        put(&root, &kv, "alone", "2", &keys, &["--kv-keys-ecsq"]),
        (4, 0b1)
    );
    let a = store_get(&root, ["t", "ecsq", "x"], &dir.path().join("a.npy"));
    let b = store_get(&root, ["t", "keys", "x"], &dir.path().join("b.npy"));
    assert_eq!(a.len(), b.len());
    assert_ne!(a, b, "tier 2 keys are stored another way with the bit");
    refused(
        &store_put(&root, ["t", "bad", "x"], &kv, "2", &["--kv-keys-ecsq"]),
        "kv-head-dim",
    );
}

#[test]
fn ecsq_creates_a_codec_4_entropy_coded_collection() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let (_, w) = inputs(dir.path());
    let base = ["--kind", "weight"];
    assert_eq!(put(&root, &w, "plain", "2", &base, &[]), (2, 0));
    assert_eq!(put(&root, &w, "ecsq", "2", &base, &["--ecsq"]), (4, 0b1001));
    let out = store_get(&root, ["t", "ecsq", "x"], &dir.path().join("out.npy"));
    assert!(out.len() >= 96 * 384 * 4);
    let bad = store_put(
        &root,
        ["t", "bad", "x"],
        &w,
        "2",
        &["--ecsq", "--kv-head-dim", "64"],
    );
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("kv-head-dim") || err.contains("ecsq"), "{err}");
}

/// The f32 payload of an `.npy` file written by `store get`.
fn floats(npy: &[u8]) -> Vec<f32> {
    let hlen = usize::from(u16::from_le_bytes([npy[8], npy[9]]));
    npy[10 + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Relative RMS error of `y` against `x`.
fn rel_err(x: &[f32], y: &[f32]) -> f64 {
    assert_eq!(x.len(), y.len());
    let e: f64 = x.iter().zip(y).map(|(a, b)| f64::from(a - b).powi(2)).sum();
    let s: f64 = x.iter().map(|a| f64::from(*a).powi(2)).sum();
    (e / s).sqrt()
}

/// A 64 x 576 embedding-like table: `shared` times a row every row has, plus a small
/// per-row part; written as `e.npy` under `dir`.
fn table(dir: &Path, shared: f32) -> (std::path::PathBuf, Vec<f32>) {
    let (rows, width) = (64usize, 576usize);
    let x: Vec<f32> = (0..rows * width)
        .map(|i| {
            let (r, c) = ((i / width) as f32, (i % width) as f32);
            shared * (c * 0.37).sin()
                + 0.04 * ((c * 0.37 + r).sin() + (c * 1.13).sin() * (r * 0.71 + c * 0.011).cos())
        })
        .collect();
    let npy = dir.join("e.npy");
    write_npy(&npy, &[rows as u64, width as u64], &x);
    (npy, x)
}

/// Largest |<x, y> / |x|^2 - 1| over the rows of `width` of `x` against `y` (the f32
/// payload of an `.npy` file written by `store get`).
fn max_row_bias(x: &[f32], npy: &[u8], width: usize) -> f64 {
    let y = floats(npy);
    assert_eq!(y.len(), x.len());
    x.chunks_exact(width)
        .zip(y.chunks_exact(width))
        .map(|(a, b)| {
            let xx: f64 = a.iter().map(|&v| f64::from(v).powi(2)).sum();
            let xy: f64 = a
                .iter()
                .zip(b)
                .map(|(&u, &v)| f64::from(u) * f64::from(v))
                .sum();
            (xy / xx - 1.0).abs()
        })
        .fold(0f64, f64::max)
}

#[test]
fn row_gains_set_header_bit_6_and_make_rows_unbiased() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let (npy, x) = table(dir.path(), 0.0);
    let width = 576;
    let base = ["--kind", "embedding"];
    assert_eq!(
        put(&root, &npy, "ecsq", "3", &base, &["--ecsq"]),
        (4, 0b1001)
    );
    let both = ["--ecsq", "--row-gains"];
    assert_eq!(
        put(&root, &npy, "gains", "3", &base, &both),
        (4, 0b100_1001)
    );
    assert_eq!(
        put(&root, &npy, "only", "3", &base, &["--row-gains"]),
        (4, 0b100_0000)
    );
    let plain = store_get(&root, ["t", "ecsq", "x"], &dir.path().join("a.npy"));
    let gains = store_get(&root, ["t", "gains", "x"], &dir.path().join("b.npy"));
    let (bp, bg) = (
        max_row_bias(&x, &plain, width),
        max_row_bias(&x, &gains, width),
    );
    assert!(bg < 5e-4 && bg < bp / 2.0, "{bg} vs {bp}");
    refused(
        &store_put(
            &root,
            ["t", "bad", "x"],
            &npy,
            "2",
            &["--row-gains", "--kv-head-dim", "64"],
        ),
        "kv-head-dim",
    );
}

/// A weight collection created with `--ecsq` or `--row-gains` has the slots Python's
/// `Store(codec=4, ...)` gives it (tier 3: 1,728 bytes per 4,096 values, 3.375 bits per
/// value), not a KV cache's, whose 4-bit tier 3 keys size the slot (8,640 bytes per
/// 16,384 values, 4.22 bits per value, with `--kv-ecsq`).
#[test]
fn codec_flags_keep_non_kv_slots_value_sized() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let (kv, w) = inputs(dir.path());
    let slot3 = |c: &str| common::collection_stat(&root, c, "slot_len", 3);
    put(&root, &w, "plain", "3", &["--kind", "weight"], &[]);
    put(&root, &w, "ecsq", "3", &["--kind", "weight"], &["--ecsq"]);
    put(
        &root,
        &w,
        "gains",
        "3",
        &["--kind", "embedding"],
        &["--row-gains"],
    );
    put(&root, &kv, "kv", "3", KV, &["--kv-ecsq"]);
    assert_eq!(slot3("plain"), 1728);
    assert_eq!(slot3("ecsq"), 1728);
    assert_eq!(slot3("gains"), 1728);
    assert_eq!(slot3("kv"), 8640);
}

#[test]
fn ecsq_model_sets_header_bit_7_and_lowers_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let (npy, x) = table(dir.path(), 0.0);
    let base = ["--kind", "embedding"];
    assert_eq!(
        put(&root, &npy, "ecsq", "2", &base, &["--ecsq"]),
        (4, 0b1001)
    );
    assert_eq!(
        put(
            &root,
            &npy,
            "model",
            "2",
            &base,
            &["--ecsq", "--ecsq-model"]
        ),
        (4, 0b1000_1001)
    );
    let all = ["--ecsq", "--ecsq-model", "--row-gains"];
    assert_eq!(
        put(&root, &npy, "gains", "2", &base, &all),
        (4, 0b1100_1001)
    );
    let get = |c: &str| {
        floats(&store_get(
            &root,
            ["t", c, "x"],
            &dir.path().join(format!("{c}.npy")),
        ))
    };
    let (e5, e7, eg) = (
        rel_err(&x, &get("ecsq")),
        rel_err(&x, &get("model")),
        rel_err(&x, &get("gains")),
    );
    assert!(e7 < e5, "v7 {e7} vs v5 {e5}");
    assert!(eg < e5 * 1.1, "v7 with gains {eg} vs v5 {e5}");
    refused(
        &store_put(&root, ["t", "bad", "x"], &npy, "2", &["--ecsq-model"]),
        "--ecsq",
    );
}

#[test]
fn centre_sets_bit_5_and_reads_back_with_the_mean() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    // A large shared row plus a small per-row part.
    let (npy, x) = table(dir.path(), 0.5);
    let base = ["--kind", "embedding"];
    let mut errs = Vec::new();
    for (c, extra, flags) in [
        ("plain", &["--row-gains"][..], 0b100_0000u8),
        ("centred", &["--row-gains", "--centre"][..], 0b110_0000),
    ] {
        assert_eq!(put(&root, &npy, c, "2", &base, extra), (4, flags), "{c}");
        let y = floats(&store_get(
            &root,
            ["t", c, "x"],
            &dir.path().join(format!("{c}.npy")),
        ));
        errs.push(rel_err(&x, &y));
    }
    assert!(errs[1] < 0.5 * errs[0], "{errs:?}");
    refused(
        &store_put(&root, ["t", "bad", "x"], &npy, "2", &["--centre"]),
        "row-gains",
    );
}
