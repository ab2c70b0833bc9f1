//! review15: read-only commands on a collection using both flags2 bits (byte 78 =
//! 0b11: `kv_keys_ecsq`, `wide_lanes`) never write, report what they read, and the
//! v8 key blocks verify; a flags2 bit this build does not know makes every one of them
//! fail with a one-line error naming `flags2` and offset 78, still without writing.

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
fn read_only_commands_on_a_flags2_collection_never_write() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("r");
    let kv = dir.path().join("k.npy");
    let vals: Vec<f16> = bell(512 * 64).into_iter().map(f16::from_f32).collect();
    write_npy(&kv, &[512, 64], &vals);
    let args = [
        "--kv-head-dim",
        "64",
        "--kind",
        "kv_key",
        "--kv-ecsq",
        "--kv-keys-ecsq",
        "--wide-lanes",
    ];
    ok(&store_put(&root, ["t", "c", "x"], &kv, "2", &args));
    assert_eq!(collection_header(&root, "t", "c")[78], 0b11);
    let coll = root.join("t").join("c");
    // `store get` records the access (tiering input), so it runs before the snapshot.
    let got = store_get(&root, ["t", "c", "x"], &dir.path().join("back.npy"));
    assert!(!got.is_empty());
    let before = snapshot(&coll);
    for cmd in [
        vec!["store", "ls", s(&root)],
        vec!["store", "stats", s(&root)],
        vec!["store", "stats", s(&root), "--json"],
        vec!["store", "verify", s(&root)],
    ] {
        let out = ok(&tv(&cmd));
        if cmd[1] == "verify" {
            assert!(!out.contains("CORRUPT"), "{out}");
        }
        assert!(before == snapshot(&coll), "{cmd:?} modified the store");
    }

    // A later build's flags2 bit (bit 3; bit 2 is `kv_keys_wstep` since session 16),
    // resealed: refused by every command, naming the field and the offset, and nothing
    // is written.
    let log = coll.join("meta.log");
    let mut b = std::fs::read(&log).unwrap();
    b[78] |= 1 << 3;
    let crc = tensorvault_core::checksum::crc32c(&b[..120]);
    b[120..124].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&log, &b).unwrap();
    let damaged = snapshot(&coll);
    for cmd in [
        vec!["store", "ls", s(&root)],
        vec!["store", "stats", s(&root)],
        vec!["store", "verify", s(&root)],
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
