//! `store put --ecsq` creates a codec 4 collection with the entropy flag whose weights
//! and embeddings are stored at tiers 2 and 3 as rate-controlled entropy-coded levels
//! (MetaLog header byte 49 bits 0 and 3, codec byte 4); `--ecsq` with `--kv-head-dim` is
//! refused by the argument parser.

mod common;

use common::{ok, s, store_put, tv, write_npy};

#[test]
fn ecsq_creates_a_codec_4_entropy_coded_collection() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("w.npy");
    let vals: Vec<f32> = (0..96 * 384)
        .map(|i| {
            let i = i as f32;
            0.02 * ((i * 0.37).sin() + (i * 1.13).sin() * (i * 0.011).cos())
        })
        .collect();
    write_npy(&npy, &[96, 384], &vals);
    let put = |collection: &str, extra: &[&str]| {
        let mut args = vec!["--kind", "weight"];
        args.extend_from_slice(extra);
        ok(&store_put(&root, ["t", collection, "w"], &npy, "2", &args));
    };
    put("plain", &[]);
    put("ecsq", &["--ecsq"]);
    let header = |c: &str| std::fs::read(root.join("t").join(c).join("meta.log")).unwrap();
    let (h, p) = (header("ecsq"), header("plain"));
    assert_eq!((h[48], h[49]), (4, 0b1001));
    assert_eq!((p[48], p[49]), (2, 0));
    let out = dir.path().join("out.npy");
    ok(&tv(&["store", "get", s(&root), "t", "ecsq", "w", s(&out)]));
    assert!(std::fs::metadata(&out).unwrap().len() >= 96 * 384 * 4);
    let bad = store_put(
        &root,
        ["t", "bad", "w"],
        &npy,
        "2",
        &["--ecsq", "--kv-head-dim", "64"],
    );
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("kv-head-dim") || err.contains("ecsq"), "{err}");
}
