//! Long commands show the CLI's one kind of progress bar on a terminal (run here under
//! `script`, which gives the command a pseudo-terminal), and `-q` / `--json` hide it.
//! The other tests run without a terminal, where bars never draw.

use std::path::Path;
use std::process::Command;

use prost::Message;
use tensorvault_onnx::proto::type_proto::{Tensor, Value as TV};
use tensorvault_onnx::proto::{
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto,
    ValueInfoProto,
};

mod common;
use common::s;

/// Everything `tensorvault ARGS...` writes to its terminal (stdout and stderr), and
/// whether it succeeded.
fn on_terminal(args: &[&str]) -> (bool, String) {
    let mut cmd = format!("'{}'", env!("CARGO_BIN_EXE_tensorvault"));
    for a in args {
        assert!(!a.contains('\''), "test arguments are quoted with '");
        cmd.push_str(&format!(" '{a}'"));
    }
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("TERM", "xterm")
        .env("COLUMNS", "160")
        .output()
        .expect("`script` (util-linux) runs the command on a pseudo-terminal");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A safetensors file of one f32 tensor of `n` values.
fn st_file(path: &Path, n: usize) {
    let data: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let view =
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![n], &data).unwrap();
    safetensors::serialize_to_file(vec![("w".to_owned(), view)], &None, path).unwrap();
}

#[test]
fn registry_save_shows_bytes_saved_unless_quiet_or_json() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("model.safetensors");
    st_file(&src, 24 << 20 >> 2); // 24 MiB: several progress reports
    let root = dir.path().join("reg");
    let (ok, shown) = on_terminal(&["registry", "save", s(&root), "1.0.0", "--from", s(&src)]);
    assert!(ok, "{shown}");
    assert!(shown.contains("saving"), "no bar: {shown}");
    assert!(shown.contains("MiB"), "no byte counts: {shown}");
    assert!(shown.contains("1.0.0"), "no result table: {shown}");
    for quiet in [&["-q"][..], &["--json"][..]] {
        let mut args = vec!["registry", "save", s(&root), "--from", s(&src)];
        args.extend_from_slice(quiet);
        let (ok, shown) = on_terminal(&args);
        assert!(ok, "{shown}");
        assert!(!shown.contains("saving"), "{quiet:?} shows a bar: {shown}");
    }
}

/// An ONNX model of `n` Relu nodes in a chain (x -> r1 -> ... -> y), f32 [1, 4].
fn relu_chain(n: usize) -> Vec<u8> {
    let name = |i: usize| match i {
        0 => "x".to_owned(),
        i if i == n => "y".to_owned(),
        i => format!("r{i}"),
    };
    let vi = |name: &str| {
        ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            denotation: None,
            value: Some(TV::TensorType(Tensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: [1, 4]
                        .iter()
                        .map(|&d| tensorvault_onnx::proto::tensor_shape_proto::Dimension {
                            denotation: None,
                            value: Some(
                                tensorvault_onnx::proto::tensor_shape_proto::dimension::Value::DimValue(d),
                            ),
                        })
                        .collect(),
                }),
            })),
        }),
        ..Default::default()
    }
    };
    let node = (1..=n)
        .map(|i| NodeProto {
            op_type: Some("Relu".into()),
            name: Some(format!("relu{i}")),
            input: vec![name(i - 1)],
            output: vec![name(i)],
            ..Default::default()
        })
        .collect();
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        }],
        graph: Some(GraphProto {
            name: Some("chain".into()),
            node,
            input: vec![vi("x")],
            output: vec![vi("y")],
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

#[test]
fn mobi_convert_shows_nodes_converted_unless_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let onnx = dir.path().join("chain.onnx");
    std::fs::write(&onnx, relu_chain(2000)).unwrap();
    let out = dir.path().join("chain.mobi");
    let (ok, shown) = on_terminal(&["mobi", "convert", s(&onnx), s(&out)]);
    assert!(ok, "{shown}");
    assert!(shown.contains("converting"), "no bar: {shown}");
    assert!(shown.contains("nodes"), "{shown}");
    assert!(shown.contains("2000 ONNX nodes"), "no summary: {shown}");
    let (ok, shown) = on_terminal(&["-q", "mobi", "convert", s(&onnx), s(&out)]);
    assert!(ok, "{shown}");
    assert!(!shown.contains("converting"), "-q shows a bar: {shown}");
}
