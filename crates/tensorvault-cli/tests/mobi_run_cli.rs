//! `tensorvault mobi run` end to end: .npy in, one .npy per output, equal to the
//! library's result; bad inputs give one-line errors and exit code 2.

use std::path::Path;

mod common;
use common::{ok, s, tv, write_npy};
use tensorvault_formats::mobi::{
    models, DataType, ModelBuilder, OperatorType, ParamValue, WriteOptions,
};
use tensorvault_mobi_runtime::{Session, Tensor};

fn read_f32(path: &Path) -> (Vec<u64>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<f32>().unwrap())
}

fn fail(out: &std::process::Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let e = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(e.trim_end().lines().count(), 1, "one-line error: {e}");
    e
}

#[test]
fn lenet5_batch_of_two_matches_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("lenet.mobi");
    ok(&tv(&["mobi", "example", "lenet5", s(&m)]));
    let x: Vec<f32> = (0..2 * 784)
        .map(|i| ((i * 13) % 97) as f32 / 97.0)
        .collect();
    let xp = dir.path().join("x.npy");
    write_npy(&xp, &[2, 1, 28, 28], &x);
    let out = dir.path().join("out");
    // One-input model: NAME= may be left out; with it, the same.
    for arg in [s(&xp).to_string(), format!("image={}", s(&xp))] {
        let j: serde_json::Value = serde_json::from_str(&ok(&tv(&[
            "mobi",
            "run",
            s(&m),
            "--input",
            &arg,
            "--output-dir",
            s(&out),
            "--json",
        ])))
        .unwrap();
        assert_eq!(j["outputs"][0]["name"], "probabilities");
        assert_eq!(j["outputs"][0]["shape"], serde_json::json!([2, 10]));
    }
    let (shape, got) = read_f32(&out.join("probabilities.npy"));
    assert_eq!(shape, [2, 10]);
    let model = models::lenet5(1).unwrap();
    let want = Session::new(&model)
        .unwrap()
        .run(&[("image", Tensor::f32(vec![2, 1, 28, 28], x).unwrap())])
        .unwrap();
    assert_eq!(got, want[0].1.as_f32().unwrap());
    let text = ok(&tv(&[
        "mobi",
        "run",
        s(&m),
        "--input",
        s(&xp),
        "--output-dir",
        s(&out),
    ]));
    assert!(text.contains("probabilities [2, 10] f32"), "{text}");
}

#[test]
fn bad_inputs_fail_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("lenet.mobi");
    ok(&tv(&["mobi", "example", "lenet5", s(&m)]));
    let out = dir.path().join("out");
    let wrong = dir.path().join("wrong.npy");
    write_npy(&wrong, &[1, 1, 27, 27], &vec![0f32; 27 * 27]);
    let e = fail(&tv(&[
        "mobi",
        "run",
        s(&m),
        "--input",
        s(&wrong),
        "--output-dir",
        s(&out),
    ]));
    assert!(
        e.contains("input \"image\" has shape [1, 1, 27, 27]"),
        "{e}"
    );
    let ints = dir.path().join("ints.npy");
    write_npy(&ints, &[1, 1, 28, 28], &vec![0i64; 784]);
    let e = fail(&tv(&[
        "mobi",
        "run",
        s(&m),
        "--input",
        s(&ints),
        "--output-dir",
        s(&out),
    ]));
    assert!(e.contains("is i64, the model expects f32"), "{e}");
    let bytes = dir.path().join("u8.npy");
    write_npy(&bytes, &[4], &[0u8; 4]);
    let e = fail(&tv(&[
        "mobi",
        "run",
        s(&m),
        "--input",
        s(&bytes),
        "--output-dir",
        s(&out),
    ]));
    // A uint8 array feeds an i64 input: refused for this f32 input, by its type.
    assert!(e.contains("is i64, the model expects f32"), "{e}");
    let bad = dir.path().join("c8.npy");
    let mut raw = b"\x93NUMPY\x01\x00".to_vec();
    let header = "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }";
    let pad = 64 - (10 + header.len() + 1) % 64;
    let h = format!("{header}{}\n", " ".repeat(pad % 64));
    raw.extend_from_slice(&(h.len() as u16).to_le_bytes());
    raw.extend_from_slice(h.as_bytes());
    raw.extend_from_slice(&[0u8; 8]);
    std::fs::write(&bad, raw).unwrap();
    let e = fail(&tv(&[
        "mobi",
        "run",
        s(&m),
        "--input",
        s(&bad),
        "--output-dir",
        s(&out),
    ]));
    assert!(e.contains("dtype <c8"), "{e}");
    assert!(!out.exists(), "nothing written on failure");
}

#[test]
fn output_names_cannot_escape_the_output_dir() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = ModelBuilder::new("names");
    let x = b.input("a", DataType::F32, &[2]);
    let y = b.input("b", DataType::F32, &[2]);
    let s1 = b.op(OperatorType::Add, &[x, y], vec![]);
    let s2 = b.op(
        OperatorType::Clip,
        &[s1],
        vec![("max".into(), ParamValue::Float(1.0))],
    );
    b.output("../escape", DataType::F32, &[2], s1);
    b.output("sub/dir:x", DataType::F32, &[2], s2);
    let m = dir.path().join("m.mobi");
    b.build()
        .unwrap()
        .save(&m, &WriteOptions::default())
        .unwrap();
    let (a, bp) = (dir.path().join("a.npy"), dir.path().join("b.npy"));
    write_npy(&a, &[2], &[1f32, 2.0]);
    write_npy(&bp, &[2], &[0.5f32, -0.5]);
    let out = dir.path().join("out");
    let e = fail(&tv(&[
        "mobi",
        "run",
        s(&m),
        "--input",
        s(&a),
        "--output-dir",
        s(&out),
    ]));
    assert!(e.contains("NAME=PATH.npy"), "{e}");
    let e = fail(&tv(&[
        "mobi",
        "run",
        s(&m),
        "--input",
        &format!("a={}", s(&a)),
        "--output-dir",
        s(&out),
    ]));
    assert!(e.contains("missing input \"b\""), "{e}");
    // No --input at all: the first missing input is named.
    let e = fail(&tv(&["mobi", "run", s(&m), "--output-dir", s(&out)]));
    assert!(e.contains("missing input \"a\""), "{e}");
    ok(&tv(&[
        "mobi",
        "run",
        s(&m),
        "--input",
        &format!("a={}", s(&a)),
        "--input",
        &format!("b={}", s(&bp)),
        "--output-dir",
        s(&out),
    ]));
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(files, ["output_0.._escape.npy", "sub_dir_x.npy"]);
    assert_eq!(read_f32(&out.join("output_0.._escape.npy")).1, [1.5, 1.5]);
    assert_eq!(read_f32(&out.join("sub_dir_x.npy")).1, [1.0, 1.0]);
    assert!(!dir.path().join("escape.npy").exists());
}
