//! End-to-end tests of the `tensorvault` binary on real files.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{s, tv};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/cvc")
        .join(name)
}

fn npy_f32(path: &Path) -> (Vec<u64>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    let f = npyz::NpyFile::new(&bytes[..]).unwrap();
    (f.shape().to_vec(), f.into_vec().unwrap())
}

/// A failed command: exit code 2 and exactly one line on stderr.
fn assert_bad_input(out: &Output, needle: &str) {
    assert_eq!(
        out.status.code(),
        Some(2),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(err.lines().count(), 1, "one line expected: {err:?}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(needle), "{err:?} should mention {needle:?}");
}

#[test]
fn pack_reproduces_the_reference_file_and_load_its_decoding() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.cvc");
    let input = fixture("vectors_1000x768_f32.npy");
    let r = tv(&[
        "cvc",
        "pack",
        s(&input),
        s(&out),
        "--compression",
        "int8",
        "--chunk-size",
        "300",
        "--reference-exact",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(fixture("b_int8_cs300.cvc")).unwrap()
    );

    let npy = dir.path().join("b.npy");
    let r = tv(&[
        "cvc",
        "load",
        s(&fixture("b_int8_cs300.cvc")),
        s(&npy),
        "--json",
    ]);
    assert!(r.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(summary["rows"], 1000);
    let (shape, got) = npy_f32(&npy);
    let (_, want) = npy_f32(&fixture("b_int8_cs300_decoded.npy"));
    assert_eq!(shape, vec![1000, 768]);
    assert!(got
        .iter()
        .zip(&want)
        .all(|(a, b)| a.to_bits() == b.to_bits()));

    // A row range reads the chunks it needs and writes exactly those rows.
    let part = dir.path().join("part.npy");
    assert!(tv(&[
        "cvc",
        "load",
        s(&fixture("b_int8_cs300.cvc")),
        s(&part),
        "--rows",
        "250:950"
    ])
    .status
    .success());
    let (shape, got) = npy_f32(&part);
    assert_eq!(shape, vec![700, 768]);
    assert_eq!(got, want[250 * 768..950 * 768]);
}

#[test]
fn filters_select_sections_metadata_and_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("arxiv.npy");
    let r = tv(&[
        "cvc",
        "load",
        s(&fixture("i_sections_int8.cvc")),
        s(&out),
        "--section",
        "source=arxiv",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        npy_f32(&out),
        npy_f32(&fixture("i_sections_int8_arxiv_decoded.npy"))
    );

    let r = tv(&[
        "cvc",
        "load",
        s(&fixture("h_chunk_metadata.cvc")),
        s(&out),
        "--metadata",
        "source=arxiv",
    ]);
    assert!(r.status.success());
    let (_, all) = npy_f32(&fixture("h_chunk_metadata_decoded.npy"));
    assert_eq!(npy_f32(&out), (vec![4, 3], all[12..24].to_vec()));

    let r = tv(&[
        "cvc",
        "load",
        s(&fixture("h_chunk_metadata.cvc")),
        s(&out),
        "--chunks",
        "2,0",
    ]);
    assert!(r.status.success());
    let mut want = all[24..30].to_vec();
    want.extend_from_slice(&all[..12]);
    assert_eq!(npy_f32(&out), (vec![6, 3], want));
}

#[test]
fn inspect_and_verify_report_the_file() {
    let r = tv(&["cvc", "inspect", s(&fixture("b_int8_cs300.cvc")), "--json"]);
    assert!(r.status.success());
    let info: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(info["format"], "v1.0");
    assert_eq!(info["num_vectors"], 1000);
    assert_eq!(info["chunks"].as_array().unwrap().len(), 4);
    assert_eq!(info["chunks"][3]["rows"], 100);

    let table = tv(&["cvc", "inspect", s(&fixture("e_legacy_v010_int8_cs4.cvc"))]);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.contains("CVC v0") && text.contains("no checksums"),
        "{text}"
    );

    let ok = tv(&["cvc", "verify", s(&fixture("a_fp16_cs300.cvc"))]);
    assert_eq!(ok.status.code(), Some(0));
    assert!(String::from_utf8(ok.stdout).unwrap().starts_with("OK"));
}

#[test]
fn corrupt_file_fails_cleanly_and_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.cvc");
    let mut bytes = std::fs::read(fixture("a_fp16_cs300.cvc")).unwrap();
    let n = bytes.len();
    bytes[n - 1000] ^= 0x10; // a bit in the last chunk's payload
    std::fs::write(&bad, &bytes).unwrap();

    let v = tv(&["cvc", "verify", s(&bad), "--json"]);
    assert_eq!(v.status.code(), Some(1));
    let rep: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(rep["valid"], false);
    assert_eq!(rep["corrupt_chunks"][0]["chunk"], 3);

    let out = dir.path().join("out.npy");
    let r = tv(&["cvc", "load", s(&bad), s(&out)]);
    assert_bad_input(&r, "checksum mismatch in chunk 3 payload");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no output or temp file left"
    );

    // Truncated exactly at a chunk boundary: refused at open, before any output exists.
    let cut = dir.path().join("cut.cvc");
    std::fs::write(
        &cut,
        &std::fs::read(fixture("b_int8_cs300.cvc")).unwrap()[..768_459 - (100 * 768 + 8)],
    )
    .unwrap();
    assert_bad_input(&tv(&["cvc", "load", s(&cut), s(&out)]), "truncated");
    assert!(!out.exists());
}

#[test]
fn bad_arguments_and_inputs_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.cvc");
    assert_bad_input(
        &tv(&[
            "cvc",
            "load",
            s(&fixture("c_tiny_fp16.cvc")),
            s(&out),
            "--rows",
            "5:99",
        ]),
        "--rows",
    );
    assert_bad_input(
        &tv(&["cvc", "inspect", s(&fixture("c_tiny_10x3_f32.npy"))]),
        "bad magic",
    );
    assert_bad_input(
        &tv(&["cvc", "pack", s(&fixture("c_tiny_fp16.cvc")), s(&out)]),
        "not a valid .npy",
    );
    // A 1-D array is not a collection of vectors.
    let one_d = dir.path().join("one_d.npy");
    let mut bytes = Vec::new();
    {
        use npyz::WriterBuilder;
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[4])
            .writer(&mut bytes)
            .begin_nd()
            .unwrap();
        w.extend([1.0f32, 2.0, 3.0, 4.0]).unwrap();
        w.finish().unwrap();
    }
    std::fs::write(&one_d, bytes).unwrap();
    assert_bad_input(&tv(&["cvc", "pack", s(&one_d), s(&out)]), "2-D");
    // A header whose shape claims more data than any file holds (the length sum would wrap).
    let huge = dir.path().join("huge.npy");
    let mut header =
        b"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387903, 1), }".to_vec();
    while !(header.len() + 11).is_multiple_of(64) {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(&[0u8; 64]);
    std::fs::write(&huge, bytes).unwrap();
    assert_bad_input(&tv(&["cvc", "pack", s(&huge), s(&out)]), "truncated");
    assert!(!out.exists());
    assert_bad_input(
        &tv(&["cvc", "pack", s(&fixture("missing.npy")), s(&out)]),
        "missing.npy",
    );
}

#[test]
fn demo_runs_and_reports_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let r = tv(&[
        "demo",
        s(&dir.path().join("d")),
        "--rows",
        "3000",
        "--dim",
        "96",
        "--chunk-size",
        "1000",
        "--json",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let rep: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let results = rep["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for res in results {
        let ratio = res["ratio_vs_f32"].as_f64().unwrap();
        let cos = res["mean_cosine"].as_f64().unwrap();
        match res["compression"].as_str().unwrap() {
            "fp16" | "bf16" => assert!((1.9..2.0).contains(&ratio), "{ratio}"),
            "int8" => assert!((3.8..4.0).contains(&ratio), "{ratio}"),
            other => panic!("unexpected {other}"),
        }
        assert!(cos > 0.999, "{cos}");
        assert_eq!(res["verified"], true);
    }
    // The pack from the demo's .npy through the CLI gives the same bytes as the library.
    let d = dir.path().join("d");
    let again = dir.path().join("again.cvc");
    let r = tv(&[
        "cvc",
        "pack",
        s(&d.join("embeddings.npy")),
        s(&again),
        "--compression",
        "int8",
        "--chunk-size",
        "1000",
    ]);
    assert!(r.status.success());
    assert_eq!(
        std::fs::read(&again).unwrap(),
        std::fs::read(d.join("embeddings_int8.cvc")).unwrap()
    );
}

/// SIGTERM during `cvc load` used to leave the hidden temporary output file behind (issue
/// 16): the CLI now removes it and exits with 128 + 15.
#[test]
fn sigterm_during_load_leaves_no_temp_file() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("in.npy");
    let (rows, dim) = (60_000u64, 256u64);
    let vals: Vec<f32> = (0..rows * dim).map(|i| (i % 977) as f32 * 0.001).collect();
    common::write_npy(&npy, &[rows, dim], &vals);
    let cvc = dir.path().join("in.cvc");
    common::ok(&tv(&["cvc", "pack", s(&npy), s(&cvc)]));
    std::fs::remove_file(&npy).unwrap();
    let out = dir.path().join("out.npy");
    let temps = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| {
                let n = e.unwrap().file_name().to_string_lossy().into_owned();
                n.ends_with(".tmp").then_some(n)
            })
            .collect::<Vec<_>>()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_tensorvault"))
        .args(["-q", "cvc", "load", s(&cvc), s(&out)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while temps().is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "load finished before the test could signal it"
        );
        assert!(start.elapsed().as_secs() < 30, "no temp file appeared");
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15), "{status:?}");
    assert!(temps().is_empty(), "left: {:?}", temps());
    assert!(!out.exists());
}

/// `cvc pack` seals the v1.0 header by default; `cvc verify` checks it, and a changed
/// header byte (here a digit of an int8 chunk's `min`) is a verify finding (exit 1).
#[test]
fn verify_checks_the_header_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("h.cvc");
    let input = fixture("vectors_1000x768_f32.npy");
    common::ok(&tv(&[
        "cvc",
        "pack",
        s(&input),
        s(&out),
        "--compression",
        "int8",
        "--chunk-size",
        "300",
    ]));
    let v = common::ok(&tv(&["cvc", "verify", s(&out)]));
    assert!(
        v.contains("header checksum and 4 chunk CRC-32 checks passed"),
        "{v}"
    );
    let mut bytes = std::fs::read(&out).unwrap();
    let at = bytes.windows(6).position(|w| w == b"\"min\":").unwrap() + 8;
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(&out, &bytes).unwrap();
    let r = tv(&["cvc", "verify", s(&out)]);
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("CORRUPT header"));
    let load = tv(&["cvc", "load", s(&out), s(&dir.path().join("o.npy"))]);
    assert_eq!(load.status.code(), Some(2));
    assert!(!dir.path().join("o.npy").exists());
}

#[test]
fn lossy_pack_reports_its_error_and_chunks_by_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("vectors_1000x768_f32.npy");
    let (_, x) = npy_f32(&input);
    let pack = |out: &Path, comp: &str, extra: &[&str]| {
        let mut args = vec!["cvc", "pack", s(&input), s(out), "--compression", comp];
        args.extend_from_slice(extra);
        let r = tv(&args);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        String::from_utf8(r.stdout).unwrap()
    };
    for comp in ["int8", "fp16", "bf16"] {
        let out = dir.path().join(format!("{comp}.cvc"));
        let v: serde_json::Value = serde_json::from_str(&pack(&out, comp, &["--json"])).unwrap();
        // 4 MiB of f32 per chunk: 1365 rows of 768 -> the 1000 rows are one chunk.
        assert_eq!(
            (v["chunk_size"].as_u64(), v["chunks"].as_u64()),
            (Some(1365), Some(1))
        );
        // The reported error is the real one: recompute it from a load.
        let back = dir.path().join(format!("{comp}.npy"));
        let r = tv(&["cvc", "load", s(&out), s(&back)]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let (_, y) = npy_f32(&back);
        let max = x
            .iter()
            .zip(&y)
            .map(|(a, b)| f64::from((a - b).abs()))
            .fold(0.0, f64::max);
        let got = v["max_abs_error"].as_f64().unwrap();
        assert!(
            max > 0.0 && (got - max).abs() <= 1e-12 * max.max(1.0),
            "{comp}: {got} vs {max}"
        );
        let rmse = v["rmse"].as_f64().unwrap();
        assert!(rmse > 0.0 && rmse <= got, "{comp}: {v}");
        let cos = v["min_cosine"].as_f64().unwrap();
        assert!(cos > 0.99 && cos < 1.0, "{comp}: {v}");
    }
    // The table says it on one line; --no-error leaves the pass out.
    let out = dir.path().join("t.cvc");
    let text = pack(&out, "int8", &["--chunk-size", "100"]);
    assert!(text.contains("chunks       10 of 100 rows"), "{text}");
    assert!(
        text.contains("max |err|") && text.contains("min cosine"),
        "{text}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&pack(&out, "int8", &["--no-error", "--json"])).unwrap();
    assert!(v.get("rmse").is_none(), "{v}");
    // A chunk size of 0 is refused by the parser.
    assert_eq!(
        tv(&["cvc", "pack", s(&input), s(&out), "--chunk-size", "0"])
            .status
            .code(),
        Some(2)
    );
}
