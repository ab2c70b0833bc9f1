//! `store put --entropy` creates a collection whose tier 2 and 3 blocks are entropy-coded
//! (MetaLog header byte 49 bit 0): `store get` returns exactly what the same put into a
//! collection without the flag returns, and the flag is the collection's.

mod common;

use common::{bell, collection_header, collection_stat, ok, store_get, store_put, write_npy};

#[test]
fn entropy_collections_read_back_what_plain_ones_do() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("x.npy");
    let vals = bell(3 * 4096);
    write_npy(&npy, &[vals.len() as u64], &vals);
    for tier in ["2", "3"] {
        let (p, e) = (format!("p{tier}"), format!("e{tier}"));
        ok(&store_put(&root, ["t", &p, "x"], &npy, tier, &[]));
        ok(&store_put(
            &root,
            ["t", &e, "x"],
            &npy,
            tier,
            &["--entropy"],
        ));
        let a = store_get(&root, ["t", &p, "x"], &dir.path().join(format!("{p}.npy")));
        let b = store_get(&root, ["t", &e, "x"], &dir.path().join(format!("{e}.npy")));
        assert_eq!(a, b, "tier {tier}: lossless");
        let flags = |c: &str| collection_header(&root, "t", c)[49];
        assert_eq!((flags(&p), flags(&e)), (0, 1), "tier {tier}");
    }
    // Fewer payload bytes in the entropy-coded collections (`store stats --json`).
    for tier in [2usize, 3] {
        let payload = |c: String| collection_stat(&root, &c, "payload_bytes", tier);
        let (p, e) = (payload(format!("p{tier}")), payload(format!("e{tier}")));
        assert!(e < p, "tier {tier}: {e} >= {p}");
    }
}
