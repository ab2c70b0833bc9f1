//! `store put --wide-lanes` (with entropy coding) creates a collection whose entropy-coded
//! KV and generic blocks use 64 rANS lanes (MetaLog header byte 78 bit 1): `store get`
//! returns exactly what the same put into a 4-lane entropy collection returns, and the
//! flag without entropy coding is refused with a one-line error naming it.

mod common;

use common::{bell, ok, refused, store_get, store_put, write_npy};

#[test]
fn wide_lane_collections_read_back_what_four_lane_ones_do() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("x.npy");
    let vals = bell(3 * 4096);
    write_npy(&npy, &[vals.len() as u64], &vals);
    for tier in ["2", "3"] {
        let (e, w) = (format!("e{tier}"), format!("w{tier}"));
        ok(&store_put(
            &root,
            ["t", &e, "x"],
            &npy,
            tier,
            &["--entropy"],
        ));
        ok(&store_put(
            &root,
            ["t", &w, "x"],
            &npy,
            tier,
            &["--entropy", "--wide-lanes"],
        ));
        let a = store_get(&root, ["t", &e, "x"], &dir.path().join(format!("{e}.npy")));
        let b = store_get(&root, ["t", &w, "x"], &dir.path().join(format!("{w}.npy")));
        assert_eq!(a, b, "tier {tier}: the same values");
        // The MetaLog header record (flags byte 49, flags2 byte 78).
        let header = |c: &str| std::fs::read(root.join("t").join(c).join("meta.log")).unwrap();
        assert_eq!((header(&e)[49], header(&w)[49]), (1, 1), "tier {tier}");
        assert_eq!((header(&e)[78], header(&w)[78]), (0, 2), "tier {tier}");
    }
    let o = store_put(&root, ["t", "bad", "x"], &npy, "3", &["--wide-lanes"]);
    refused(&o, "wide_lanes");
}
