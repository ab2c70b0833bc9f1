//! `store put --row-gains` creates a codec 4 collection whose embedding blocks carry one
//! gain per row (MetaLog header byte 49 bit 6, codec byte 4; with `--ecsq` bits 0, 3 and
//! 6): the rows read back with the inner products of an unbiased estimator; `--row-gains`
//! with `--kv-head-dim` is refused by the argument parser.

mod common;

use common::{ok, s, store_put, tv, write_npy};

fn read_npy_f32(path: &std::path::Path) -> Vec<f32> {
    let b = std::fs::read(path).unwrap();
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    b[10 + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn row_gains_make_each_rows_inner_product_unbiased() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("e.npy");
    let (rows, width) = (64usize, 576usize);
    let vals: Vec<f32> = (0..rows * width)
        .map(|i| {
            let (r, c) = ((i / width) as f32, (i % width) as f32);
            0.04 * ((c * 0.37 + r).sin() + (c * 1.13).sin() * (r * 0.71 + c * 0.011).cos())
        })
        .collect();
    write_npy(&npy, &[rows as u64, width as u64], &vals);
    let bias = |collection: &str, extra: &[&str]| {
        let mut args = vec!["--kind", "embedding"];
        args.extend_from_slice(extra);
        ok(&store_put(&root, ["t", collection, "e"], &npy, "3", &args));
        let out = dir.path().join(format!("{collection}.npy"));
        ok(&tv(&[
            "store",
            "get",
            s(&root),
            "t",
            collection,
            "e",
            s(&out),
        ]));
        let y = read_npy_f32(&out);
        (0..rows)
            .map(|r| {
                let (a, b) = (&vals[r * width..][..width], &y[r * width..][..width]);
                let xx: f64 = a.iter().map(|&v| f64::from(v).powi(2)).sum();
                let xy: f64 = a
                    .iter()
                    .zip(b)
                    .map(|(&u, &v)| f64::from(u) * f64::from(v))
                    .sum();
                (xy / xx - 1.0).abs()
            })
            .fold(0f64, f64::max)
    };
    let plain = bias("plain", &["--ecsq"]);
    let gains = bias("gains", &["--ecsq", "--row-gains"]);
    assert!(gains < 5e-4 && gains < plain / 2.0, "{gains} vs {plain}");
    let header = |c: &str| std::fs::read(root.join("t").join(c).join("meta.log")).unwrap();
    let h = header("gains");
    assert_eq!((h[48], h[49]), (4, 0b100_1001));
    ok(&store_put(
        &root,
        ["t", "only", "e"],
        &npy,
        "3",
        &["--kind", "embedding", "--row-gains"],
    ));
    assert_eq!(&header("only")[48..50], &[4, 0b100_0000]);
    let bad = store_put(
        &root,
        ["t", "bad", "e"],
        &npy,
        "2",
        &["--row-gains", "--kv-head-dim", "64"],
    );
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("kv-head-dim") || err.contains("row-gains"),
        "{err}"
    );
}
