//! End-to-end tests of `tensorvault cgeb` on real files.

use std::path::PathBuf;
use std::process::Output;

mod common;
use common::{s, tv};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/cvc/vectors_1000x768_f32.npy")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn pack_inspect_get_verify_and_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("emb");
    let p = json(&tv(&["cgeb", "pack", s(&fixture()), s(&out), "--json"]));
    assert_eq!(p["records"], 1000);
    assert_eq!(
        p["bytes"].as_u64().unwrap(),
        999 * 4096 + 64 + 768 * 4 + 32 + 2
    );
    let i = json(&tv(&[
        "cgeb",
        "inspect",
        s(&out.with_extension("cgeb")),
        "--json",
    ]));
    assert_eq!(i["records"], 1000);
    assert_eq!(i["record_alignment"], 4096);
    let g = json(&tv(&["cgeb", "get", s(&out), "--index", "999", "--json"]));
    assert_eq!(g["dimension"], 768);
    assert_eq!(g["selected_experts"].as_array().unwrap().len(), 2);
    let want = npyz::NpyFile::new(&std::fs::read(fixture()).unwrap()[..])
        .unwrap()
        .into_vec::<f32>()
        .unwrap();
    let got: Vec<f32> = g["vector"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(got, want[999 * 768..]);
    let v = json(&tv(&["cgeb", "verify", s(&out), "--json"]));
    assert_eq!(v["ok"], true);
    for cmd in ["inspect", "get", "verify"] {
        assert!(
            tv(&["cgeb", cmd, s(&out)]).status.success(),
            "{cmd} text output"
        );
    }

    // Flip one payload byte of record 5: verify names it and exits 1; get fails with 2.
    let data = out.with_extension("cgeb");
    let mut b = std::fs::read(&data).unwrap();
    b[5 * 4096 + 100] ^= 0x10;
    std::fs::write(&data, b).unwrap();
    let v = tv(&["cgeb", "verify", s(&out), "--json"]);
    assert_eq!(v.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(v["data_hash_ok"], false);
    assert_eq!(v["bad_records"][0]["record"], 5);
    let g = tv(&["cgeb", "get", s(&out), "--index", "5"]);
    assert_eq!(g.status.code(), Some(2));
    let err = String::from_utf8(g.stderr).unwrap();
    assert_eq!(err.lines().count(), 1);
    assert!(err.contains("data file hash mismatch"), "{err}");
}

#[test]
fn single_record_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("e");
    assert!(tv(&[
        "cgeb",
        "pack",
        s(&fixture()),
        s(&out),
        "--alignment",
        "64",
        "--le-payload"
    ])
    .status
    .success());
    // Cut the first record out as a single-record file.
    let data = std::fs::read(out.with_extension("cgeb")).unwrap();
    let one = dir.path().join("one.cgeb");
    std::fs::write(&one, &data[..64 + 768 * 4 + 32 + 2]).unwrap();
    let i = json(&tv(&["cgeb", "inspect", s(&one), "--json"]));
    assert_eq!(i["payload"], "little-endian");
    assert_eq!(
        json(&tv(&["cgeb", "verify", s(&one), "--json"]))["ok"],
        true
    );
    // The batch data file without its .cgei: its first record is not the whole file, so
    // verify must not say ok (issue 16).
    let orphan = dir.path().join("orphan.cgeb");
    std::fs::write(&orphan, &data).unwrap();
    let v = tv(&["cgeb", "verify", s(&orphan)]);
    assert_eq!(v.status.code(), Some(1));
    let err = String::from_utf8_lossy(&v.stderr);
    assert!(err.contains("orphan.cgei: the batch index of"), "{err}");
    assert!(v.stdout.is_empty());
    std::fs::write(&one, &data[..100]).unwrap();
    let r = tv(&["cgeb", "get", s(&one)]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8(r.stderr).unwrap();
    assert!(
        err.starts_with(&format!("error: {}: cgeb: buffer too short", one.display()))
            && err.lines().count() == 1,
        "{err}"
    );
    let r = tv(&["cgeb", "pack", s(&fixture()), s(&out), "--alignment", "100"]);
    assert_eq!(r.status.code(), Some(2));
}

#[test]
fn demo_has_a_cgeb_section() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("demo");
    let out = tv(&[
        "demo",
        s(&d),
        "--rows",
        "300",
        "--dim",
        "32",
        "--chunk-size",
        "100",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(v["results"].as_array().unwrap().len(), 3);
    assert_eq!(v["cgeb"]["records"], 300);
    assert!(v["cgeb"]["random_get_per_s"].as_f64().unwrap() > 0.0);
    let text = tv(&[
        "demo",
        s(&d),
        "--rows",
        "300",
        "--dim",
        "32",
        "--chunk-size",
        "100",
    ]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("CGEB:"));
}

/// `cgeb pack` used to leave OUT.cgeb behind when OUT.cgei could not be written (issue
/// 16). Now a failed pack leaves neither file nor any temporary.
#[test]
fn failed_index_write_leaves_no_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("emb");
    // OUT.cgei is a non-empty directory: nothing can be renamed over it.
    std::fs::create_dir_all(out.with_extension("cgei").join("x")).unwrap();
    let o = tv(&["cgeb", "pack", s(&fixture()), s(&out)]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.with_extension("cgeb").exists(), "OUT.cgeb left behind");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["emb.cgei"], "leftovers: {names:?}");
}

/// The index `cgeb pack` writes is version 2 (checksummed): deleting one offset (count
/// fixed up) used to make `get --index 1` return record 2 with exit 0; now `get` fails and
/// `verify` reports the corrupt index with exit 1.
#[test]
fn a_deleted_index_entry_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("emb");
    common::ok(&tv(&["cgeb", "pack", s(&fixture()), s(&out)]));
    let v = json(&tv(&["cgeb", "verify", s(&out), "--json"]));
    assert_eq!(v["index_checksum"], "ok");
    let cgei = out.with_extension("cgei");
    let mut idx = std::fs::read(&cgei).unwrap();
    assert_eq!(&idx[4..6], &2u16.to_be_bytes());
    idx.drain(40..48);
    let n = u64::from_be_bytes(idx[8..16].try_into().unwrap()) - 1;
    idx[8..16].copy_from_slice(&n.to_be_bytes());
    std::fs::write(&cgei, &idx).unwrap();
    let g = tv(&["cgeb", "get", s(&out), "--index", "1"]);
    assert_eq!(g.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&g.stderr).contains("index checksum mismatch"));
    let r = tv(&["cgeb", "verify", s(&out)]);
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("CORRUPT index"));
}
