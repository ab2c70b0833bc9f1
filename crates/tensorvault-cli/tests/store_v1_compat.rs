//! Stores written before codec v2 (MetaLog header version 1, TQTC version 1 segments)
//! still open, decode bit for bit as they did, migrate, and take new writes.

mod common;

use std::path::Path;

use common::{ok, s, store_put, tv};

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/store-v1")
}

fn read_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    npy.into_vec::<f32>().unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

#[test]
fn a_codec_v1_store_reads_migrates_and_grows() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    copy_dir(&fixture().join("store"), &root);
    let header_before = std::fs::read(root.join("t/c/meta.log")).unwrap()[..128].to_vec();
    assert_eq!(
        &header_before[8..12],
        &1u32.to_le_bytes(),
        "fixture is a v1 log"
    );
    for t in 0..4 {
        let out = dir.path().join(format!("kv{t}.npy"));
        ok(&tv(&[
            "store",
            "get",
            s(&root),
            "t",
            "c",
            &format!("kv{t}"),
            s(&out),
        ]));
        let want = read_f32(&fixture().join(format!("kv{t}.npy")));
        let got = read_f32(&out);
        assert_eq!(want.len(), got.len());
        assert!(
            want.iter()
                .zip(&got)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "tier {t}: values differ from what the v1 build returned"
        );
    }
    // Migrations and new puts in a v1 collection stay codec v1 (its slot sizes).
    ok(&tv(&[
        "store",
        "migrate",
        s(&root),
        "t",
        "c",
        "kv1",
        "--tier",
        "3",
    ]));
    let out = dir.path().join("m.npy");
    ok(&tv(&["store", "get", s(&root), "t", "c", "kv1", s(&out)]));
    assert_eq!(read_f32(&out).len(), 256 * 64);
    ok(&store_put(
        &root,
        ["t", "c", "new"],
        &fixture().join("kv0.npy"),
        "2",
        &["--kind", "kv_key"],
    ));
    ok(&tv(&["store", "verify", s(&root), "t", "c"]));
    // The new block's Create record keeps byte 112 (kind) zero in a v1 collection, so a
    // pre-v2 build still reads every record of it.
    let log = std::fs::read(root.join("t/c/meta.log")).unwrap();
    assert!(log[128..]
        .chunks_exact(128)
        .all(|r| r[0] != 0 || r[112] == 0));
    // stats report the error per tier: the median largest step, 0 where nothing is stored.
    let st: serde_json::Value =
        serde_json::from_str(&ok(&tv(&["store", "stats", s(&root), "--json"]))).unwrap();
    let steps = &st["collections"][0]["stats"]["step_median"];
    assert_eq!(steps[0], 0.0);
    assert!(
        steps[2].as_f64().unwrap() > 0.0 && steps[3].as_f64().unwrap() > steps[2].as_f64().unwrap()
    );
    let header_after = std::fs::read(root.join("t/c/meta.log")).unwrap()[..128].to_vec();
    assert_eq!(header_before, header_after, "the v1 header is kept");
}

#[test]
fn quant_eval_reports_codec_v2_per_kind_next_to_v1() {
    // 256 x 64: SmolLM2's layer-0 keys of head 0 (after the v1 8-bit round trip).
    let input = fixture().join("kv1.npy");
    let run = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["quant", "eval", s(&input), "--bits", "3,5", "--json"];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(&tv(&args))).unwrap()
    };
    let v1 = run(&[]);
    let v2 = run(&["--kind", "kv_key"]);
    for (a, b) in v1.as_array().unwrap().iter().zip(v2.as_array().unwrap()) {
        assert!(a["layout"].as_str().unwrap().starts_with("v1"));
        assert_eq!(b["layout"], "v2 per column + f16 row 0");
        // Per-channel asymmetric groups: far lower error at similar bits.
        assert!(b["rel_rmse"].as_f64().unwrap() < 0.5 * a["rel_rmse"].as_f64().unwrap());
        assert!(b["bits_per_value"].as_f64().unwrap() < 5.3);
    }
    let bad = tv(&[
        "quant",
        "eval",
        s(&input),
        "--kind",
        "weight",
        "--group",
        "3",
    ]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn store_maintain_moves_blocks_out_of_full_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let input = fixture().join("kv0.npy"); // 256 x 64 f32: 4 blocks
    ok(&store_put(&root, ["t", "c", "x"], &input, "1", &[]));
    let out = ok(&tv(&[
        "store",
        "maintain",
        s(&root),
        "t",
        "c",
        "--max-blocks=-,1,-,-",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["moved"], 3);
    assert_eq!(v["moves"][0]["reason"], "capacity");
    assert_eq!(v["blocks_after"], serde_json::json!([0, 1, 3, 0]));
    // Nothing cold or over capacity: a second run moves nothing.
    let v: serde_json::Value = serde_json::from_str(&ok(&tv(&[
        "store",
        "maintain",
        s(&root),
        "t",
        "c",
        "--json",
    ])))
    .unwrap();
    assert_eq!(v["moved"], 0);
    let bad = tv(&[
        "store",
        "maintain",
        s(&root),
        "t",
        "c",
        "--max-blocks",
        "1,2",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("four comma-separated"));
}
