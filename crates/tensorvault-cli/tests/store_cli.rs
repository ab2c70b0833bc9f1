//! `tensorvault store ...` end to end on real directories.

mod common;

use std::path::Path;

use common::{ok, s, store_put, tv, write_npy};

fn read_f32(path: &Path) -> (Vec<u64>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    let f = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = f.shape().to_vec();
    (shape, f.into_vec::<f32>().unwrap())
}

/// A temp dir holding `root/t/c` with tensor `x` = 0..n as f32 at tier 1.
fn store_with_x(n: u32) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let input = dir.path().join("a.npy");
    let vals: Vec<f32> = (0..n).map(|i| i as f32).collect();
    write_npy(&input, &[u64::from(n)], &vals);
    ok(&store_put(&root, ["t", "c", "x"], &input, "1", &[]));
    (dir, root)
}

fn fails(o: &std::process::Output, code: i32, needle: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        err.contains(needle) || out.contains(needle),
        "{needle:?} not in\n{err}\n{out}"
    );
}

#[test]
fn put_get_ls_migrate_verify_compact() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let input = dir.path().join("a.npy");
    let vals: Vec<f32> = (0..300 * 40).map(|i| ((i as f32) * 0.013).sin()).collect();
    write_npy(&input, &[300, 40], &vals);
    let out = ok(&store_put(&root, ["acme", "emb", "w"], &input, "0", &[]));
    assert!(out.contains("3 blocks in tier 0"), "{out}");
    ok(&store_put(&root, ["acme", "emb", "w3"], &input, "3", &[]));
    let back = dir.path().join("back.npy");
    ok(&tv(&[
        "store",
        "get",
        s(&root),
        "acme",
        "emb",
        "w",
        s(&back),
    ]));
    let (shape, got) = read_f32(&back);
    assert_eq!(shape, [300, 40]);
    assert_eq!(got, vals, "tier 0 is bit-exact");
    ok(&tv(&[
        "store",
        "get",
        s(&root),
        "acme",
        "emb",
        "w3",
        s(&back),
    ]));
    let (_, got3) = read_f32(&back);
    let max_err = vals
        .iter()
        .zip(&got3)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(max_err > 0.0 && max_err < 0.2, "3-bit error {max_err}");

    let ls = ok(&tv(&["store", "ls", s(&root), "acme", "emb", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&ls).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[0]["name"], "w");
    assert_eq!(v[1]["tier_blocks"], serde_json::json!([0, 0, 0, 3]));
    let cols = ok(&tv(&["store", "ls", s(&root)]));
    assert!(cols.contains("acme") && cols.contains("emb"), "{cols}");

    let mig = ok(&tv(&[
        "store",
        "migrate",
        s(&root),
        "acme",
        "emb",
        "w",
        "--tier",
        "2",
    ]));
    assert!(mig.contains("3 blocks moved to tier 2"), "{mig}");
    let stats = ok(&tv(&["store", "stats", s(&root), "--json"]));
    let st: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(st["total"]["blocks"], serde_json::json!([0, 0, 3, 3]));
    ok(&tv(&["store", "verify", s(&root)]));
    let c = ok(&tv(&["store", "compact", s(&root), "acme", "emb"]));
    assert!(c.contains("acme/emb: meta.log"), "{c}");
    ok(&tv(&["store", "rm", s(&root), "acme", "emb", "w3"]));
    fails(
        &tv(&["store", "get", s(&root), "acme", "emb", "w3", s(&back)]),
        2,
        "not found",
    );
}

#[test]
fn verify_exits_1_on_a_flipped_bit_and_names_the_block() {
    let (dir, root) = store_with_x(8192);
    let tier1 = root.join("t/c/tier1.dat");
    let mut b = std::fs::read(&tier1).unwrap();
    b[4224 + 500] ^= 1; // block 1's payload (slot length 4224 in the default geometry)
    std::fs::write(&tier1, b).unwrap();
    let o = tv(&["store", "verify", s(&root)]);
    fails(&o, 1, "CORRUPT");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("/1 (x) in tier1"), "{out}");
    fails(
        &tv(&[
            "store",
            "get",
            s(&root),
            "t",
            "c",
            "x",
            s(&dir.path().join("o.npy")),
        ]),
        2,
        "corrupt",
    );
    assert!(!dir.path().join("o.npy").exists(), "no partial output");

    // An emptied tier file: its blocks are lost, and verify says so (issue 16).
    std::fs::write(&tier1, b"").unwrap();
    let o = tv(&["store", "verify", s(&root)]);
    fails(&o, 1, "CORRUPT");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("beyond the end of the tier1 file"), "{out}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let input = dir.path().join("a.npy");
    write_npy(&input, &[4], &[1.0f32, 2.0, 3.0, 4.0]);
    fails(
        &tv(&["store", "put", s(&root), "..", "c", "x", s(&input)]),
        2,
        "invalid tenant name",
    );
    fails(
        &tv(&["store", "put", s(&root), "t", "a/b", "x", s(&input)]),
        2,
        "invalid collection name",
    );
    let ints = dir.path().join("i.npy");
    write_npy(&ints, &[2], &[1i64, 2]);
    fails(
        &tv(&["store", "put", s(&root), "t", "c", "x", s(&ints)]),
        2,
        "not float32",
    );
    let trunc = dir.path().join("t.npy");
    let b = std::fs::read(&input).unwrap();
    std::fs::write(&trunc, &b[..b.len() - 3]).unwrap();
    fails(
        &tv(&["store", "put", s(&root), "t", "c", "x", s(&trunc)]),
        2,
        "needs 16 data bytes",
    );
    fails(
        &tv(&["store", "ls", s(&root), "t", "nope"]),
        2,
        "no such collection",
    );
    fails(
        &tv(&["store", "verify", s(&root), "t"]),
        2,
        "give both or neither",
    );
    let nan = dir.path().join("n.npy");
    write_npy(&nan, &[2], &[1.0f32, f32::NAN]);
    fails(&store_put(&root, ["t", "c", "x"], &nan, "2", &[]), 2, "");
    // The NaN was refused before anything was written; tier 0 keeps it bit-exact.
    ok(&store_put(&root, ["t", "c", "x"], &nan, "0", &[]));
}

/// Read-only commands never write (issue 16): a flipped bit in the last meta.log record
/// used to be cut away by `store verify` itself as a torn tail. Now `ls`, `stats` and
/// `verify` leave every file byte for byte as it was, and verify reports the bad tail.
#[test]
fn read_only_commands_leave_a_damaged_store_untouched() {
    let (_dir, root) = store_with_x(5000);
    let coll = root.join("t/c");
    let log = coll.join("meta.log");
    let mut b = std::fs::read(&log).unwrap();
    let n = b.len();
    b[n - 60] ^= 0x04; // inside the last record
    std::fs::write(&log, &b).unwrap();
    let snapshot = || {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&coll)
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
    };
    let before = snapshot();
    ok(&tv(&["store", "ls", s(&root)]));
    ok(&tv(&["store", "stats", s(&root)]));
    let o = tv(&["store", "verify", s(&root)]);
    fails(&o, 1, "CORRUPT");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("128 bytes are not valid records"), "{out}");
    assert!(
        before == snapshot(),
        "a read-only command modified the store"
    );

    // A corrupt names.log record is reported too (it used to go unreported).
    std::fs::write(
        &log,
        &before.iter().find(|(n, _)| n == "meta.log").unwrap().1,
    )
    .unwrap();
    let names = coll.join("names.log");
    let mut nb = std::fs::read(&names).unwrap();
    nb[128 + 20] ^= 0x01;
    std::fs::write(&names, &nb).unwrap();
    let o = tv(&["store", "verify", s(&root)]);
    fails(&o, 1, "names.log: 1 corrupt records skipped");
    assert_eq!(std::fs::read(&names).unwrap(), nb, "verify wrote names.log");
}

#[test]
fn put_without_a_tier_is_lossless() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let input = dir.path().join("a.npy");
    let back = dir.path().join("b.npy");
    let vals: Vec<f32> = (0..5000)
        .map(|i| ((i as f32) * 0.37).sin() * 1e-3)
        .collect();
    write_npy(&input, &[50, 100], &vals);
    ok(&tv(&["store", "put", s(&root), "t", "c", "x", s(&input)]));
    let ls = ok(&tv(&["store", "ls", s(&root), "t", "c", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&ls).unwrap();
    assert_eq!(v[0]["tier_blocks"], serde_json::json!([2, 0, 0, 0]), "{v}");
    ok(&tv(&["store", "get", s(&root), "t", "c", "x", s(&back)]));
    let (shape, got) = read_f32(&back);
    assert_eq!(shape, [50, 100]);
    assert!(
        got.iter()
            .zip(&vals)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "tier 0 is bit-exact"
    );
}

#[test]
fn readers_do_not_wait_for_a_writer_and_a_wait_says_why() {
    use tensorvault_store::{DirStore, StoreConfig};
    let (_dir, root) = store_with_x(5000);
    // A writer (another program, here this test process) holds t/c open.
    let w = DirStore::open_path(&root, "t", "c", StoreConfig::default(), false).unwrap();
    let t = std::time::Instant::now();
    let ls = ok(&tv(&["store", "ls", s(&root), "t", "c", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&ls).unwrap();
    assert_eq!(v[0]["name"], "x", "{v}");
    let st = ok(&tv(&["store", "stats", s(&root), "--json"]));
    assert!(st.contains("\"tensors\""), "{st}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "ls and stats took {:?} with a writer open",
        t.elapsed()
    );
    // verify needs blocks that hold still: it waits, and says for what.
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        drop(w);
    });
    let out = tv(&["store", "verify", s(&root), "t", "c"]);
    release.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("waiting up to 30 s for t/c: it is open for writing in another process"),
        "{err}"
    );
}
