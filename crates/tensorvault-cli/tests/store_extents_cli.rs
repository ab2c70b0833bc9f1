//! `store put --allocation extent` creates a collection whose blocks take payload-sized
//! extents (MetaLog header byte 49 bit 1): `store get` returns what a slot collection
//! returns, and `store stats --json` shows the live bytes following the payload.

mod common;

use common::{ok, s, store_put, tv, write_npy};

#[test]
fn extent_collections_read_back_and_take_less_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("x.npy");
    // Three blocks and a short one: bell-shaped values, entropy-coded below the slot.
    let vals: Vec<f32> = (0..3 * 4096 + 700)
        .map(|i| {
            let i = i as f32;
            (i * 0.37).sin() + (i * 1.13).sin() + (i * 2.71).sin()
        })
        .collect();
    write_npy(&npy, &[vals.len() as u64], &vals);
    ok(&store_put(
        &root,
        ["t", "slot", "x"],
        &npy,
        "3",
        &["--entropy"],
    ));
    ok(&store_put(
        &root,
        ["t", "ext", "x"],
        &npy,
        "3",
        &["--entropy", "--allocation", "extent"],
    ));
    let get = |c: &str| {
        let out = dir.path().join(format!("{c}.npy"));
        ok(&tv(&["store", "get", s(&root), "t", c, "x", s(&out)]));
        std::fs::read(out).unwrap()
    };
    assert_eq!(get("slot"), get("ext"), "the same codes either way");
    let flags = |c: &str| std::fs::read(root.join("t").join(c).join("meta.log")).unwrap()[49];
    assert_eq!((flags("slot"), flags("ext")), (0b01, 0b11));
    let st = ok(&tv(&["store", "stats", s(&root), "--json"]));
    let v: serde_json::Value = serde_json::from_str(&st).unwrap_or_else(|e| panic!("{e}: {st}"));
    let field = |c: &str, f: &str| -> u64 {
        let coll = v["collections"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["collection"] == c))
            .unwrap_or_else(|| panic!("{c} missing: {v}"));
        coll["stats"][f][3].as_u64().unwrap()
    };
    let (pay, live_slot, live_ext) = (
        field("ext", "payload_bytes"),
        field("slot", "live_bytes"),
        field("ext", "live_bytes"),
    );
    assert_eq!(pay, field("slot", "payload_bytes"));
    assert!(
        live_ext >= pay && live_ext < pay + 4 * 64,
        "{live_ext} for {pay}"
    );
    assert!(live_ext < live_slot, "{live_ext} >= {live_slot}");
    assert_eq!(field("ext", "alloc_unit"), 64);
}
