//! `store put --row-gains --centre` creates a collection with MetaLog flags bit 5 (and
//! bit 6), stores a 2-D embedding table centred on its mean row and `store get` reads it
//! back with the mean added (less error than without `--centre` on a table with a large
//! mean row); `--centre` without `--row-gains` is refused by the argument parser.

mod common;

use common::{collection_header, ok, refused, store_get, store_put, write_npy};

fn floats(npy: &[u8]) -> Vec<f32> {
    let hlen = usize::from(u16::from_le_bytes([npy[8], npy[9]]));
    npy[10 + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn rel_err(x: &[f32], y: &[f32]) -> f64 {
    assert_eq!(x.len(), y.len());
    let e: f64 = x
        .iter()
        .zip(y)
        .map(|(&a, &b)| f64::from(a - b).powi(2))
        .sum();
    let n: f64 = x.iter().map(|&a| f64::from(a).powi(2)).sum();
    (e / n).sqrt()
}

#[test]
fn centre_sets_bit_5_and_reads_back_with_the_mean() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("e.npy");
    let (rows, width) = (64usize, 576usize);
    // A large shared row plus a small per-row part.
    let x: Vec<f32> = (0..rows * width)
        .map(|i| {
            let (r, c) = ((i / width) as f32, (i % width) as f32);
            0.5 * (c * 0.37).sin() + 0.05 * ((c * 1.13 + r).sin() * (r * 0.71 + c * 0.011).cos())
        })
        .collect();
    write_npy(&npy, &[rows as u64, width as u64], &x);
    let mut errs = Vec::new();
    for (c, extra, flags) in [
        ("plain", &["--row-gains"][..], 0b100_0000u8),
        ("centred", &["--row-gains", "--centre"][..], 0b110_0000),
    ] {
        let args: Vec<&str> = ["--kind", "embedding"]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        ok(&store_put(&root, ["t", c, "x"], &npy, "2", &args));
        let h = collection_header(&root, "t", c);
        assert_eq!((h[48], h[49]), (4, flags), "{c}");
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
