//! Issue 25 class 3 through `tensorvault store`: a `meta.log` record with a valid CRC that
//! replay cannot use is a defect `store verify` reports (exit 1, with the record's log
//! offset and why, in text and `--json`), and `store ls` and `store get` agree that the
//! tensor it belonged to is incomplete. Read-only commands leave the files as they were.

use std::path::{Path, PathBuf};

use tensorvault_store::meta_log::layout::RECORD_LEN;
use tensorvault_store::meta_log::{decode_record, encode_record};
use tensorvault_store::{BlockKey, MetaRecord};

mod common;
use common::{ok, s, store_put, tv, write_npy};

/// `root/t/c` with tensor `x`: 3 blocks at tier 1 (4096 elements per block by default).
fn store(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    let input = dir.join("a.npy");
    let vals: Vec<f32> = (0..3 * 4096).map(|i| i as f32).collect();
    write_npy(&input, &[3 * 4096], &vals);
    ok(&store_put(&root, ["t", "c", "x"], &input, "1", &[]));
    root
}

/// Re-seals block `block`'s Create with an impossible `data_len`; returns its log offset.
fn forge_block(root: &Path, block: u32) -> u64 {
    let path = root.join("t/c/meta.log");
    let mut bytes = std::fs::read(&path).unwrap();
    let mut found = None;
    for at in (RECORD_LEN..bytes.len()).step_by(RECORD_LEN) {
        let rec: [u8; RECORD_LEN] = bytes[at..at + RECORD_LEN].try_into().unwrap();
        if let Ok(MetaRecord::Create { mut meta }) = decode_record(&rec, at as u64) {
            if meta.key.block_index == block {
                meta.data_len = 1 << 30;
                bytes[at..at + RECORD_LEN]
                    .copy_from_slice(&encode_record(&MetaRecord::Create { meta }));
                found = Some(at as u64);
            }
        }
    }
    std::fs::write(&path, bytes).unwrap();
    found.unwrap()
}

fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(root.join("t/c"))
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
fn an_unusable_record_fails_verify_and_ls_and_get_agree() {
    for block in [0u32, 2] {
        let dir = tempfile::tempdir().unwrap();
        let root = store(dir.path());
        let at = forge_block(&root, block);
        let before = files(&root);

        let v = tv(&["store", "verify", s(&root)]);
        assert_eq!(
            v.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&v.stderr)
        );
        let out = String::from_utf8_lossy(&v.stdout);
        assert!(out.contains("CORRUPT"), "{out}");
        assert!(
            out.contains(&format!("meta.log record at offset {at} (create of block "))
                && out.contains(&format!("/{block}): impossible slot: data_len 1073741824")),
            "{out}"
        );
        let v = tv(&["store", "verify", s(&root), "t", "c", "--json"]);
        assert_eq!(v.status.code(), Some(1));
        let j: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
        assert_eq!(j[0]["replay_defects_total"], 1);
        let d = &j[0]["replay_defects"][0];
        assert_eq!(
            (d["log_offset"].as_u64(), d["record"].as_str()),
            (Some(at), Some("create"))
        );
        assert!(d["block"].as_str().unwrap().ends_with(&format!("/{block}")));

        let l = tv(&["store", "ls", s(&root), "t", "c", "--json"]);
        assert!(l.status.success());
        let j: serde_json::Value = serde_json::from_slice(&l.stdout).unwrap();
        assert_eq!(
            (
                j[0]["name"].as_str(),
                j[0]["blocks"].as_u64(),
                j[0]["expected_blocks"].as_u64()
            ),
            (Some("x"), Some(2), Some(3))
        );
        let text =
            String::from_utf8_lossy(&tv(&["store", "ls", s(&root), "t", "c"]).stdout).into_owned();
        assert!(text.contains("2/3 INCOMPLETE"), "{text}");

        let o = dir.path().join("o.npy");
        let g = tv(&["store", "get", s(&root), "t", "c", "x", s(&o)]);
        assert_eq!(g.status.code(), Some(2));
        let err = String::from_utf8_lossy(&g.stderr);
        assert!(
            err.contains("tensor \"x\" is incomplete: 2 of its 3 blocks are present")
                && err.lines().count() == 1,
            "block {block}: {err}"
        );
        assert!(!o.exists());
        assert_eq!(
            files(&root),
            before,
            "read-only commands changed the collection"
        );
    }
}

#[test]
fn a_record_for_a_block_that_is_not_live_fails_verify() {
    let dir = tempfile::tempdir().unwrap();
    let root = store(dir.path());
    let path = root.join("t/c/meta.log");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len();
    bytes.extend_from_slice(&encode_record(&MetaRecord::Delete {
        key: BlockKey::new(0xabc, 1),
    }));
    std::fs::write(&path, bytes).unwrap();
    let v = tv(&["store", "verify", s(&root)]);
    assert_eq!(v.status.code(), Some(1));
    let out = String::from_utf8_lossy(&v.stdout);
    assert!(
        out.contains(&format!("meta.log record at offset {at} (delete of block "))
            && out.contains("names a block that is not live"),
        "{out}"
    );
    // The tensor is intact and reads back.
    ok(&tv(&[
        "store",
        "get",
        s(&root),
        "t",
        "c",
        "x",
        s(&dir.path().join("o.npy")),
    ]));
}
