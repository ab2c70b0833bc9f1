//! Values the store's quantized tiers cannot hold, through the CLI (issue 25 class 4):
//! `store put` of NaN into a quantized tier is refused naming the block, float64 beyond
//! float32 is refused unless `--clip`, and `store maintain` holds a NaN block in its tier
//! and reports it (tensor, block, count of non-finite values) while every other block
//! moves and the command succeeds.

mod common;

use common::{ok, s, store_put, tv, write_npy};

#[test]
fn maintain_holds_and_reports_a_nan_block_and_moves_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("x.npy");
    let mut vals: Vec<f32> = (0..4 * 4096).map(|i| (i as f32 * 0.01).sin()).collect();
    vals[10] = f32::NAN;
    vals[4000] = f32::INFINITY;
    write_npy(&npy, &[vals.len() as u64], &vals);
    // A quantized tier cannot hold them: one line naming the block, count and element.
    let q = store_put(&root, ["t", "c", "q"], &npy, "2", &[]);
    let err = String::from_utf8_lossy(&q.stderr);
    assert_eq!(q.status.code(), Some(2), "{err}");
    assert!(
        err.contains("2 values are NaN or infinite (the first at element 10 of the tensor)"),
        "{err}"
    );
    let put = [
        "store",
        "put",
        s(&root),
        "t",
        "c",
        "x",
        s(&npy),
        "--tier",
        "0",
    ];
    ok(&tv(&put));
    // A dry run reads and encodes the planned moves (writing nothing) and says which
    // would be held.
    let out = ok(&tv(&[
        "store",
        "maintain",
        s(&root),
        "t",
        "c",
        "--max-blocks=1,-,-,-",
        "--dry-run",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["planned"].as_array().map(Vec::len), Some(3), "{v}");
    assert_eq!(v["held"][0]["block"], 0, "{v}");
    assert_eq!(v["held"][0]["non_finite"], 2, "{v}");
    let dry = [
        "store",
        "maintain",
        s(&root),
        "t",
        "c",
        "--max-blocks=1,-,-,-",
        "--dry-run",
    ];
    assert!(ok(&tv(&dry)).contains("1 blocks would be held in their tier"));
    // Tier0 may hold one block: the three coldest (blocks 0, 1, 2) are evicted, block 0
    // cannot be quantized.
    let out = ok(&tv(&[
        "store",
        "maintain",
        s(&root),
        "t",
        "c",
        "--max-blocks=1,-,-,-",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["moved"], 2, "{v}");
    assert_eq!(v["blocks_after"], serde_json::json!([2, 2, 0, 0]), "{v}");
    let held = v["held"].as_array().expect("held list");
    assert_eq!(held.len(), 1, "{v}");
    assert_eq!(held[0]["tensor"], "x");
    assert_eq!(held[0]["block"], 0);
    assert_eq!(held[0]["tier"], 0);
    assert_eq!(held[0]["target_tier"], 1);
    assert_eq!(held[0]["non_finite"], 2);
    assert!(
        held[0]["reason"]
            .as_str()
            .unwrap()
            .contains("first at tensor element 10"),
        "{v}"
    );
    // The text report names it too; a fresh run finds it again (holds are not persisted)
    // and still exits 0.
    let text = ok(&tv(&[
        "store",
        "maintain",
        s(&root),
        "t",
        "c",
        "--max-blocks=1,-,-,-",
    ]));
    assert!(text.contains("1 blocks held in their tier"), "{text}");
    assert!(text.contains("2 non-finite values"), "{text}");
    // The data itself is untouched: Tier0 kept the NaN and the infinity.
    let back = dir.path().join("back.npy");
    ok(&tv(&["store", "get", s(&root), "t", "c", "x", s(&back)]));
    let bytes = std::fs::read(&back).unwrap();
    let got: Vec<f32> = npyz::NpyFile::new(&bytes[..]).unwrap().into_vec().unwrap();
    assert!(got[10].is_nan() && got[4000] == f32::INFINITY);
    assert_eq!(got[11], vals[11]);
}

#[test]
fn put_of_float64_beyond_float32_is_refused_unless_clipped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("big.npy");
    write_npy(&npy, &[4], &[1.0f64, 2.0, -1e39, f64::NAN]);
    let args = ["store", "put", s(&root), "t", "c", "x", s(&npy)];
    let o = tv(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("element 2 = -1e39 is beyond float32's range") && err.contains("--clip"),
        "{err}"
    );
    ok(&tv(&[&args[..], &["--clip"]].concat()));
    let back = dir.path().join("back.npy");
    ok(&tv(&["store", "get", s(&root), "t", "c", "x", s(&back)]));
    let bytes = std::fs::read(&back).unwrap();
    let got: Vec<f32> = npyz::NpyFile::new(&bytes[..]).unwrap().into_vec().unwrap();
    assert_eq!(&got[..3], &[1.0, 2.0, -f32::MAX]);
    assert!(got[3].is_nan(), "NaN stays NaN in tier 0");
}

#[test]
fn a_dry_run_over_corrupt_blocks_still_lists_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("x.npy");
    let vals: Vec<f32> = (0..4 * 4096).map(|i| i as f32).collect();
    write_npy(&npy, &[vals.len() as u64], &vals);
    ok(&tv(&["store", "put", s(&root), "t", "c", "x", s(&npy)]));
    // Flip a byte in every Tier0 slot (16 KiB each): every block fails its checksum.
    let tier0 = root.join("t/c/tier0.dat");
    let mut b = std::fs::read(&tier0).unwrap();
    for slot in 0..4 {
        b[slot * 16384 + 100] ^= 0x40;
    }
    std::fs::write(&tier0, &b).unwrap();
    let out = ok(&tv(&[
        "store",
        "maintain",
        s(&root),
        "t",
        "c",
        "--max-blocks=1,-,-,-",
        "--dry-run",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["planned"].as_array().map(Vec::len), Some(3), "{v}");
    assert_eq!(v["held"], serde_json::json!([]), "{v}");
}
