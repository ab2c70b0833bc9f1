//! `store put --entropy` creates a collection whose tier 2 and 3 blocks are entropy-coded
//! (MetaLog header byte 49 bit 0): `store get` returns exactly what the same put into a
//! collection without the flag returns, and the flag is the collection's.

mod common;

use common::{ok, s, store_put, tv, write_npy};

fn get(root: &std::path::Path, collection: &str, out: &std::path::Path) -> Vec<u8> {
    ok(&tv(&[
        "store",
        "get",
        s(root),
        "t",
        collection,
        "x",
        s(out),
    ]));
    std::fs::read(out).unwrap()
}

#[test]
fn entropy_collections_read_back_what_plain_ones_do() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let npy = dir.path().join("x.npy");
    // Bell-shaped values (sum of three sines of unrelated periods): far from uniform codes.
    let vals: Vec<f32> = (0..3 * 4096)
        .map(|i| {
            let i = i as f32;
            (i * 0.37).sin() + (i * 1.13).sin() + (i * 2.71).sin()
        })
        .collect();
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
        let a = get(&root, &p, &dir.path().join(format!("{p}.npy")));
        let b = get(&root, &e, &dir.path().join(format!("{e}.npy")));
        assert_eq!(a, b, "tier {tier}: lossless");
        let flags = |c: &str| std::fs::read(root.join("t").join(c).join("meta.log")).unwrap()[49];
        assert_eq!((flags(&p), flags(&e)), (0, 1), "tier {tier}");
    }
    // Fewer payload bytes in the entropy-coded collections (`store stats --json`).
    let st = ok(&tv(&["store", "stats", s(&root), "--json"]));
    let v: serde_json::Value = serde_json::from_str(&st).unwrap_or_else(|e| panic!("{e}: {st}"));
    let payload = |c: &str, tier: usize| -> u64 {
        let coll = v["collections"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["collection"] == c))
            .unwrap_or_else(|| panic!("{c} missing: {v}"));
        coll["stats"]["payload_bytes"][tier].as_u64().unwrap()
    };
    for tier in [2usize, 3] {
        let (p, e) = (
            payload(&format!("p{tier}"), tier),
            payload(&format!("e{tier}"), tier),
        );
        assert!(e < p, "tier {tier}: {e} >= {p}");
    }
}
