//! `store put --allocation extent` creates a collection whose blocks take payload-sized
//! extents (MetaLog header byte 49 bit 1): `store get` returns what a slot collection
//! returns, and `store stats --json` shows the live bytes following the payload.

mod common;

use common::{bell, collection_header, collection_stat, ok, store_get, store_put, write_npy};

#[test]
fn extent_collections_read_back_and_take_less_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("x.npy");
    // Three blocks and a short one: bell-shaped values, entropy-coded below the slot.
    let vals = bell(3 * 4096 + 700);
    write_npy(&npy, &[vals.len() as u64], &vals);
    ok(&store_put(
        &root,
        ["t", "slot", "x"],
        &npy,
        "3",
        &["--entropy"],
    ));
    let ext = ["--entropy", "--allocation", "extent"];
    ok(&store_put(&root, ["t", "ext", "x"], &npy, "3", &ext));
    let get = |c: &str| store_get(&root, ["t", c, "x"], &dir.path().join(format!("{c}.npy")));
    assert_eq!(get("slot"), get("ext"), "the same codes either way");
    let flags = |c: &str| collection_header(&root, "t", c)[49];
    assert_eq!((flags("slot"), flags("ext")), (0b01, 0b11));
    let field = |c: &str, f: &str| collection_stat(&root, c, f, 3);
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

#[test]
fn slot_align_sets_the_extent_unit_of_a_new_collection() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("x.npy");
    let vals = bell(3 * 4096 + 700);
    write_npy(&npy, &[vals.len() as u64], &vals);
    let ext = ["--entropy", "--allocation", "extent"];
    ok(&store_put(&root, ["t", "a64", "x"], &npy, "3", &ext));
    let fine = ["--entropy", "--allocation", "extent", "--slot-align", "16"];
    ok(&store_put(&root, ["t", "a16", "x"], &npy, "3", &fine));
    let get = |c: &str| store_get(&root, ["t", c, "x"], &dir.path().join(format!("{c}.npy")));
    assert_eq!(get("a64"), get("a16"), "the same codes either way");
    let field = |c: &str, f: &str| collection_stat(&root, c, f, 3);
    assert_eq!(
        (field("a64", "alloc_unit"), field("a16", "alloc_unit")),
        (64, 16)
    );
    let (pay, live) = (field("a16", "payload_bytes"), field("a16", "live_bytes"));
    assert!(live >= pay && live < pay + 4 * 16, "{live} for {pay}");
    let live64 = field("a64", "live_bytes");
    assert!(live <= live64, "{live} > {live64} (payload {pay})");
    // Not a power of two in 8..=2^20: refused before anything is created.
    let bad = ["--entropy", "--allocation", "extent", "--slot-align", "48"];
    let out = store_put(&root, ["t", "a48", "x"], &npy, "3", &bad);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("slot_align"), "{err}");
    assert!(!root.join("t").join("a48").join("meta.log").exists());
}
