//! End-to-end tests of `tensorvault mobi convert` on the committed ONNX fixtures.

use std::path::PathBuf;
use std::process::Output;

mod common;
use common::{s, tv};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/onnx")
        .join(name)
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn convert_reports_folds_and_sizes_and_the_file_validates() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cnn.mobi");
    let src = fixture("tiny_cnn_opset13.onnx");
    let v: serde_json::Value = serde_json::from_str(&ok(&tv(&[
        "mobi",
        "convert",
        s(&src),
        s(&out),
        "--batch",
        "1",
        "--weights",
        "int8",
        "--json",
    ])))
    .unwrap();
    assert_eq!(v["opset"], 13);
    assert_eq!(v["nodes_in"], 13);
    assert_eq!(v["ops_out"], 6);
    assert_eq!(v["folded"]["batchnorm_into_conv"], 1);
    assert_eq!(v["folded"]["matmul_add_to_fully_connected"], 1);
    assert_eq!(v["tensors_quantized"], 2);
    assert_eq!(v["mobi_bytes"], std::fs::metadata(&out).unwrap().len());
    ok(&tv(&["mobi", "validate", s(&out)]));
    // Without --batch the batch stays symbolic.
    ok(&tv(&["mobi", "convert", s(&src), s(&out)]));
    let v: serde_json::Value =
        serde_json::from_str(&ok(&tv(&["mobi", "inspect", s(&out), "--json"]))).unwrap();
    assert_eq!(v["inputs"][0]["shape"][0], "N", "{v}");
    let text = ok(&tv(&[
        "mobi",
        "convert",
        s(&fixture("tiny_cnn_opset11.onnx")),
        s(&out),
        "--batch",
        "1",
    ]));
    assert!(text.contains("8 ONNX nodes -> 6 MOBI operators"), "{text}");
    assert!(text.contains("batchnorm_into_conv 1"), "{text}");
    assert!(text.contains("% of the ONNX file"), "{text}");
}

#[test]
fn convert_errors_are_one_line_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cnn.mobi");
    let lstm = dir.path().join("lstm.onnx");
    // A ModelProto (opset 13) whose graph has one LSTM node "l0": field 8 opset_import
    // {version 13}, field 7 graph {node {output "y", name "l0", op_type "LSTM"}}.
    let node = b"\x12\x01y\x1a\x02l0\x22\x04LSTM".to_vec();
    let graph = [&[0x0a, node.len() as u8][..], &node].concat();
    let model = [
        &[0x42, 0x02, 0x10, 0x0d, 0x3a, graph.len() as u8][..],
        &graph,
    ]
    .concat();
    std::fs::write(&lstm, model).unwrap();
    let r = tv(&["mobi", "convert", s(&lstm), s(&out)]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("LSTM") && err.contains("\"l0\""), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!out.exists());
    let garbage = dir.path().join("garbage.onnx");
    std::fs::write(&garbage, b"not a protobuf \xff\xff").unwrap();
    let r = tv(&["mobi", "convert", s(&garbage), s(&out)]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("invalid protobuf"));
    assert!(!out.exists());
}
