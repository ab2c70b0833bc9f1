//! Crafted `.npy` inputs (issue 16, "Hostile inputs"): every command that reads an npy
//! file refuses a lying preamble or header with exit code 2 and one line naming the field
//! and its offset, under an address-space limit (a header length of 0xFFFFFFF0 in a 20-byte
//! file used to make the npy parser allocate 4 GiB and abort), and leaves no output.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::s;

/// Address-space limit for each run, KiB: well under the 4 GiB a lying header asks for.
const VMEM_KIB: u64 = 3 << 20;

/// Run `tensorvault -q ARGS...` under `ulimit -v` and a 60 s timeout.
fn tv_limited(args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {VMEM_KIB}; exec timeout 60 \"$0\" -q \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_tensorvault"))
        .args(args)
        .output()
        .expect("run tensorvault")
}

/// Preamble of a version `major` npy file with `header_len` in its length field.
fn preamble(major: u8, header_len: u32) -> Vec<u8> {
    let mut b = b"\x93NUMPY".to_vec();
    b.extend_from_slice(&[major, 0]);
    if major == 1 {
        b.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        b.extend_from_slice(&header_len.to_le_bytes());
    }
    b
}

/// A well-formed v1 header dictionary padded as numpy pads it.
fn header_dict(dict: &str) -> Vec<u8> {
    let mut h = dict.as_bytes().to_vec();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut b = preamble(1, h.len() as u32);
    b.extend_from_slice(&h);
    b
}

/// (case name, file bytes, text the one-line error must contain).
fn cases() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let mut huge_v2 = preamble(2, 0xFFFF_FFF0);
    huge_v2.resize(20, b' ');
    let mut huge_v3 = preamble(3, 0x7FFF_FFFF);
    huge_v3.resize(20, b' ');
    let mut huge_v1 = preamble(1, 0xFFFF);
    huge_v1.resize(20, b' ');
    let mut bad_version = preamble(9, 10);
    bad_version.resize(40, b' ');
    let mut garbage = preamble(1, 54);
    garbage.extend_from_slice(&[b'{'; 54]);
    let mut rows_lie =
        header_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 768), }");
    rows_lie.extend_from_slice(&[0u8; 64]);
    vec![
        (
            "header_len 0xFFFFFFF0 (v2)",
            huge_v2,
            "header_len at offset 8",
        ),
        (
            "header_len 0x7FFFFFFF (v3)",
            huge_v3,
            "header_len at offset 8",
        ),
        ("header_len 0xFFFF (v1)", huge_v1, "header_len at offset 8"),
        (
            "truncated v2 preamble",
            preamble(2, 100)[..11].to_vec(),
            "offset",
        ),
        ("empty file", Vec::new(), "magic at offset 0"),
        (
            "bad magic",
            b"\x93NUMPX\x01\x00\x10\x00{}              ".to_vec(),
            "magic at offset 0",
        ),
        ("major version 9", bad_version, "version at offset 6"),
        ("header is not a dict", garbage, "header at offset 11"),
        ("shape larger than the file", rows_lie, "offset"),
    ]
}

fn assert_refused(case: &str, cmd: &str, o: &Output, want: &str, leftover: &Path) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{case} / {cmd}: exit {:?}, stderr {err}",
        o.status.code()
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{case} / {cmd}: {err}");
    assert!(err.contains(want), "{case} / {cmd}: {err:?} lacks {want:?}");
    assert!(
        !leftover.exists(),
        "{case} / {cmd}: left {}",
        leftover.display()
    );
}

#[test]
fn crafted_npy_inputs_are_refused_by_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, (case, bytes, want)) in cases().into_iter().enumerate() {
        let input = tmp.path().join(format!("in{i}.npy"));
        std::fs::write(&input, &bytes).unwrap();
        let out = tmp.path().join(format!("out{i}"));
        let cvc = out.with_extension("cvc");
        let o = tv_limited(&["cvc", "pack", s(&input), s(&cvc)]);
        assert_refused(case, "cvc pack", &o, want, &cvc);
        let o = tv_limited(&["cgeb", "pack", s(&input), s(&out)]);
        assert_refused(case, "cgeb pack", &o, want, &out.with_extension("cgeb"));
        let root = tmp.path().join(format!("store{i}"));
        let o = tv_limited(&[
            "store",
            "put",
            s(&root),
            "t",
            "c",
            "x",
            s(&input),
            "--tier",
            "0",
        ]);
        assert_refused(
            case,
            "store put",
            &o,
            want,
            &root.join("t").join("c").join("tier0.dat"),
        );
        let o = tv_limited(&["quant", "eval", s(&input), "--bits", "8"]);
        assert_refused(case, "quant eval", &o, want, &tmp.path().join("none"));
    }
}
