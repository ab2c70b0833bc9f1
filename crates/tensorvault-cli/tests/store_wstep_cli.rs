//! `store put --kv-keys-wstep` (MetaLog header flags2 bit 2, byte 78): the collection is
//! created with bits 0 and 2 (0b101), its tier 2 keys read back close to the input,
//! read-only commands never write and verify the v9 key blocks, the flag without
//! --kv-keys-ecsq is refused, and a flags2 bit this build does not know (bit 3) makes
//! every read-only command fail naming `flags2` and offset 78, still without writing.

mod common;

use common::{bell, collection_header, ok, s, store_get, store_put, tv, write_npy};
use half::f16;
use std::path::Path;

fn snapshot(coll: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(coll)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn wstep_keys_put_read_and_read_only_commands_never_write() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let kv = dir.path().join("k.npy");
    let vals: Vec<f16> = bell(512 * 64).into_iter().map(f16::from_f32).collect();
    write_npy(&kv, &[512, 64], &vals);
    // Without --kv-keys-ecsq the flag is refused by the argument parser.
    let o = tv(&[
        "store",
        "put",
        s(&root),
        "t",
        "bad",
        "x",
        s(&kv),
        "--kv-head-dim",
        "64",
        "--kv-keys-wstep",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--kv-keys-ecsq"));

    let args = [
        "--kv-head-dim",
        "64",
        "--kind",
        "kv_key",
        "--kv-ecsq",
        "--kv-keys-ecsq",
        "--kv-keys-wstep",
    ];
    ok(&store_put(&root, ["t", "c", "x"], &kv, "2", &args));
    assert_eq!(collection_header(&root, "t", "c")[78], 0b101);
    let coll = root.join("t").join("c");
    // `store get` records the access (tiering input), so it runs before the snapshot.
    let got = store_get(&root, ["t", "c", "x"], &dir.path().join("back.npy"));
    assert!(!got.is_empty());
    let before = snapshot(&coll);
    // review16: the one-collection listing, JSON and the HTML report (written outside
    // the store) too.
    let html = dir.path().join("report.html");
    for cmd in [
        vec!["store", "ls", s(&root)],
        vec!["store", "ls", s(&root), "t", "c"],
        vec!["store", "ls", s(&root), "t", "c", "--json"],
        vec!["store", "stats", s(&root)],
        vec!["store", "stats", s(&root), "--json"],
        vec!["store", "verify", s(&root)],
        vec!["store", "report", "--out", s(&html), s(&root), "t", "c"],
    ] {
        let out = ok(&tv(&cmd));
        if cmd[1] == "verify" {
            assert!(!out.contains("CORRUPT"), "{out}");
        }
        assert!(before == snapshot(&coll), "{cmd:?} modified the store");
    }

    let log = coll.join("meta.log");
    let mut b = std::fs::read(&log).unwrap();
    b[78] |= 1 << 3;
    let crc = tensorvault_core::checksum::crc32c(&b[..120]);
    b[120..124].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&log, &b).unwrap();
    let damaged = snapshot(&coll);
    for cmd in [
        vec!["store", "ls", s(&root)],
        vec!["store", "ls", s(&root), "t", "c"],
        vec!["store", "stats", s(&root)],
        vec!["store", "verify", s(&root)],
        vec!["store", "report", "--out", s(&html), s(&root), "t", "c"],
    ] {
        let o = tv(&cmd);
        assert!(
            !o.status.success(),
            "{cmd:?} accepted an unknown flags2 bit"
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("flags2") && err.contains("78"),
            "{cmd:?}: {err}"
        );
        assert!(damaged == snapshot(&coll), "{cmd:?} modified the store");
    }
}
