//! Issue 25 classes 3 and 5 through `tensorvault cgeb`: an index rewritten with entries
//! removed and re-sealed with a valid checksum no longer verifies (the gap after a record
//! must be zero, the file ends at the last record's end); `get --index N` on a batch whose
//! `.cgei` is missing names the missing index; a version-2 record's reserved bytes are
//! refused naming version 2, the field and its offset.

use std::fs;
use std::path::Path;

use tensorvault_formats::cgeb::BatchIndex;

mod common;
use common::{s, tv, write_npy};

/// A 4-record batch `DIR/emb.cgeb` + `.cgei` (dimension 16, alignment 64).
fn pack(dir: &Path) -> std::path::PathBuf {
    let vals: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin()).collect();
    let npy = dir.join("v.npy");
    write_npy(&npy, &[4, 16], &vals);
    let out = dir.join("emb");
    let o = tv(&["cgeb", "pack", s(&npy), s(&out), "--alignment", "64"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// Rewrites the batch's index without entry `drop`, sealed with a valid checksum.
fn drop_entry(out: &Path, drop: usize) -> Vec<u64> {
    let ipath = out.with_extension("cgei");
    let data_len = fs::metadata(out.with_extension("cgeb")).unwrap().len();
    let mut idx = BatchIndex::parse(&fs::read(&ipath).unwrap(), data_len).unwrap();
    let offsets = idx.offsets.clone();
    idx.offsets.remove(drop);
    fs::write(&ipath, idx.to_bytes()).unwrap();
    offsets
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn an_index_with_a_middle_entry_removed_does_not_verify() {
    let dir = tempfile::tempdir().unwrap();
    let out = pack(dir.path());
    let o = drop_entry(&out, 2);
    let v = tv(&["cgeb", "verify", s(&out), "--json"]);
    assert_eq!(v.status.code(), Some(1));
    let j = json(&v);
    assert_eq!(
        (j["ok"].as_bool(), j["data_hash_ok"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(j["bad_records"][0]["record"], 1);
    let e = j["bad_records"][0]["error"].as_str().unwrap();
    assert!(
        e.contains(&format!("first non-zero byte at offset {}", o[2])),
        "{e}"
    );
    let t = tv(&["cgeb", "verify", s(&out)]);
    assert_eq!(t.status.code(), Some(1));
    let text = String::from_utf8_lossy(&t.stdout);
    assert!(
        text.contains("record 1: cgeb: record 1 ends at offset") && text.ends_with("CORRUPT\n"),
        "{text}"
    );
    let g = tv(&["cgeb", "get", s(&out), "--index", "1"]);
    assert_eq!(g.status.code(), Some(2));
    let err = String::from_utf8_lossy(&g.stderr);
    assert!(
        err.starts_with("error: cgeb: record 1 ends at offset") && err.lines().count() == 1,
        "{err}"
    );
    assert!(tv(&["cgeb", "get", s(&out), "--index", "0"])
        .status
        .success());
}

#[test]
fn an_index_with_the_last_entry_removed_does_not_verify() {
    let dir = tempfile::tempdir().unwrap();
    let out = pack(dir.path());
    drop_entry(&out, 3);
    let v = tv(&["cgeb", "verify", s(&out), "--json"]);
    assert_eq!(v.status.code(), Some(1));
    let j = json(&v);
    assert_eq!(j["bad_records"][0]["record"], 2);
    let e = j["bad_records"][0]["error"].as_str().unwrap();
    assert!(
        e.contains("its last record (record 2) ends at offset"),
        "{e}"
    );
}

#[test]
fn an_index_with_the_first_entry_removed_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = pack(dir.path());
    drop_entry(&out, 0);
    for cmd in ["verify", "inspect", "get"] {
        let r = tv(&["cgeb", cmd, s(&out)]);
        assert_eq!(r.status.code(), Some(2), "{cmd}");
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(
            err.starts_with(&format!(
                "error: {}: cgei: entry 0 at offset 32: record offset ",
                out.display()
            )) && err.contains("must start at offset 0"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn get_on_a_batch_without_its_index_names_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let out = pack(dir.path());
    let (data, index) = (out.with_extension("cgeb"), out.with_extension("cgei"));
    fs::remove_file(&index).unwrap();
    for i in ["3", "0"] {
        let r = tv(&["cgeb", "get", s(&data), "--index", i]);
        assert_eq!(r.status.code(), Some(2));
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(
            err.starts_with(&format!(
                "error: {}: the batch index of {} does not exist",
                index.display(),
                data.display()
            )) && !err.contains("only record 0")
                && err.lines().count() == 1,
            "--index {i}: {err}"
        );
    }
    // The batch by its name, without an extension: the index is named too.
    let r = tv(&["cgeb", "get", s(&out), "--index", "2"]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.starts_with(&format!(
            "error: {}: the batch index of {} does not exist",
            index.display(),
            data.display()
        )),
        "{err}"
    );
    let r = tv(&["cgeb", "inspect", s(&data)]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("the batch index of"));
    // A real single-record file still says it has only record 0.
    let bytes = fs::read(&data).unwrap();
    let one = dir.path().join("one.cgeb");
    fs::write(&one, &bytes[..64 + 16 * 4 + 32 + 2]).unwrap();
    let r = tv(&["cgeb", "get", s(&one), "--index", "1"]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("is a single-record file") && err.contains("only record 0"),
        "{err}"
    );
    assert!(tv(&["cgeb", "get", s(&one)]).status.success());
}

#[test]
fn reserved_bytes_of_a_version_2_record_name_version_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = pack(dir.path());
    let bytes = fs::read(out.with_extension("cgeb")).unwrap();
    let mut rec = bytes[..64 + 16 * 4 + 32 + 2].to_vec();
    assert_eq!(&rec[4..6], &2u16.to_be_bytes());
    rec[14] = 0x80;
    let one = dir.path().join("one.cgeb");
    fs::write(&one, &rec).unwrap();
    for cmd in ["inspect", "get", "verify"] {
        let r = tv(&["cgeb", cmd, s(&one)]);
        assert_eq!(r.status.code(), Some(2), "{cmd}");
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(
            err.trim_end(),
            format!(
                "error: {}: cgeb: invalid reserved at offset 14: must be zero in version 2",
                one.display()
            ),
            "{cmd}"
        );
    }
}
