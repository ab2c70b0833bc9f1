//! `store put --ecsq --ecsq-model` creates a codec 4 collection with MetaLog flags bits 0,
//! 3 and 7 (bit 6 too with `--row-gains`) whose weight and embedding blocks are TQTC
//! version 7 model-coded ECSQ, reads back through `store get` with less error than
//! `--ecsq` alone, and `--ecsq-model` without `--ecsq` is refused naming it.

mod common;

use common::{collection_header, ok, refused, store_get, store_put, write_npy};
use std::path::Path;

fn put(root: &Path, input: &Path, c: &str, tier: &str, extra: &[&str]) -> (u8, u8) {
    let args: Vec<&str> = ["--kind", "embedding"]
        .iter()
        .chain(extra)
        .copied()
        .collect();
    ok(&store_put(root, ["t", c, "x"], input, tier, &args));
    let h = collection_header(root, "t", c);
    (h[48], h[49])
}

/// The f32 payload of an `.npy` file written by `store get`.
fn floats(npy: &[u8]) -> Vec<f32> {
    let hlen = usize::from(u16::from_le_bytes([npy[8], npy[9]]));
    npy[10 + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn rel_err(x: &[f32], y: &[f32]) -> f64 {
    assert_eq!(x.len(), y.len());
    let e: f64 = x.iter().zip(y).map(|(a, b)| f64::from(a - b).powi(2)).sum();
    let s: f64 = x.iter().map(|a| f64::from(*a).powi(2)).sum();
    (e / s).sqrt()
}

#[test]
fn ecsq_model_sets_header_bit_7_and_lowers_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("e.npy");
    let (rows, width) = (64usize, 576usize);
    let x: Vec<f32> = (0..rows * width)
        .map(|i| {
            let (r, c) = ((i / width) as f32, (i % width) as f32);
            0.04 * ((c * 0.37 + r).sin() + (c * 1.13).sin() * (r * 0.71 + c * 0.011).cos())
        })
        .collect();
    write_npy(&npy, &[rows as u64, width as u64], &x);
    assert_eq!(put(&root, &npy, "ecsq", "2", &["--ecsq"]), (4, 0b1001));
    assert_eq!(
        put(&root, &npy, "model", "2", &["--ecsq", "--ecsq-model"]),
        (4, 0b1000_1001)
    );
    assert_eq!(
        put(
            &root,
            &npy,
            "gains",
            "2",
            &["--ecsq", "--ecsq-model", "--row-gains"]
        ),
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
