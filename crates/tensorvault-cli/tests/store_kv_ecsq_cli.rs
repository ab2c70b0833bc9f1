//! `store put --kv-head-dim 64 --kv-ecsq` creates a codec 4 KV cache with the entropy flag
//! and entropy-coded tier 3 values (MetaLog header byte 49 bits 0 and 2, codec byte 4);
//! `--kv-ecsq` without `--kv-head-dim` is refused by the argument parser.

mod common;

use common::{ok, s, store_put, tv, write_npy};
use half::f16;

#[test]
fn kv_ecsq_creates_a_codec_4_entropy_coded_kv_cache() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("v.npy");
    let vals: Vec<f16> = (0..512 * 64)
        .map(|i| {
            let i = i as f32;
            f16::from_f32((i * 0.37).sin() + (i * 1.13).sin() + (i * 2.71).sin())
        })
        .collect();
    write_npy(&npy, &[512, 64], &vals);
    let put = |collection: &str, extra: &[&str]| {
        let mut args = vec!["--kv-head-dim", "64", "--kind", "kv_value"];
        args.extend_from_slice(extra);
        ok(&store_put(&root, ["t", collection, "v"], &npy, "3", &args));
    };
    put("plain", &[]);
    put("ecsq", &["--kv-ecsq"]);
    let header = |c: &str| std::fs::read(root.join("t").join(c).join("meta.log")).unwrap();
    let (h, p) = (header("ecsq"), header("plain"));
    assert_eq!((h[48], h[49]), (4, 0b101));
    assert_eq!((p[48], p[49]), (2, 0));
    let out = dir.path().join("out.npy");
    ok(&tv(&["store", "get", s(&root), "t", "ecsq", "v", s(&out)]));
    assert!(std::fs::metadata(&out).unwrap().len() >= 512 * 64 * 2);
    let bad = store_put(&root, ["t", "bad", "v"], &npy, "3", &["--kv-ecsq"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("kv-head-dim"), "{err}");
}
