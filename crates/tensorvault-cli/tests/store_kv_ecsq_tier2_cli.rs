//! `store put --kv-head-dim 64 --kv-ecsq --kv-ecsq-tier2` creates a codec 4 KV cache whose
//! tier 2 values are entropy-coded levels too (MetaLog header byte 49 bits 0, 2 and 4);
//! `--kv-ecsq-tier2` without `--kv-ecsq` is refused by the argument parser.

mod common;

use common::{ok, s, store_put, tv, write_npy};
use half::f16;

#[test]
fn kv_ecsq_tier2_sets_header_bit_4_and_reads_back() {
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
        ok(&store_put(&root, ["t", collection, "v"], &npy, "2", &args));
    };
    put("ecsq", &["--kv-ecsq"]);
    put("tier2", &["--kv-ecsq", "--kv-ecsq-tier2"]);
    let header = |c: &str| std::fs::read(root.join("t").join(c).join("meta.log")).unwrap();
    assert_eq!(header("ecsq")[49], 0b101);
    assert_eq!((header("tier2")[48], header("tier2")[49]), (4, 0b1_0101));
    let read = |c: &str| {
        let out = dir.path().join(format!("{c}.npy"));
        ok(&tv(&["store", "get", s(&root), "t", c, "v", s(&out)]));
        std::fs::read(out).unwrap()
    };
    let (a, b) = (read("ecsq"), read("tier2"));
    assert_eq!(a.len(), b.len());
    assert_ne!(a, b, "tier 2 values are stored another way with bit 4");
    let bad = store_put(
        &root,
        ["t", "bad", "v"],
        &npy,
        "2",
        &["--kv-head-dim", "64", "--kv-ecsq-tier2"],
    );
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("kv-ecsq"), "{err}");
}
