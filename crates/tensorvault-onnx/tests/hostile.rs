//! Crafted and hostile models: each kind of bad input gives its typed error, never a
//! panic, an allocation sized by a claimed length, or a partial output file.

mod common;

use common::*;
use prost::Message;
use tensorvault_onnx::proto::OperatorSetIdProto;
use tensorvault_onnx::{convert_file, import, ImportOptions, OnnxError};

fn relu_model() -> Vec<u8> {
    model(
        13,
        vec![node("Relu", "r", &["x"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[2])],
        vec![vi("y", FLOAT, &[2])],
        vec![],
    )
}

fn err(bytes: &[u8]) -> OnnxError {
    import(bytes, &ImportOptions::default()).unwrap_err()
}

#[test]
fn truncated_protobuf_is_a_decode_error() {
    let bytes = relu_model();
    for cut in [1, bytes.len() / 2, bytes.len() - 1] {
        let e = err(&bytes[..cut]);
        assert!(matches!(e, OnnxError::Decode { .. }), "cut {cut}: {e}");
    }
}

#[test]
fn a_huge_claimed_length_is_refused_without_allocating_it() {
    // Field 7 (graph), wire type 2, length varint 2^62: far past the 5 bytes present.
    let bytes = [
        0x3a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 1, 2, 3, 4, 5,
    ];
    let e = err(&bytes);
    assert!(
        matches!(e, OnnxError::Decode { ref detail } if detail.contains("ModelProto")),
        "{e}"
    );
}

#[test]
fn a_model_above_the_size_limit_is_refused_before_reading() {
    let bytes = relu_model();
    let opts = ImportOptions {
        max_model_bytes: 8,
        ..ImportOptions::default()
    };
    let e = import(&bytes, &opts).unwrap_err();
    assert!(matches!(e, OnnxError::TooLarge { limit: 8, .. }), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.onnx");
    std::fs::write(&src, &bytes).unwrap();
    let e = tensorvault_onnx::read_model(&src, 8).unwrap_err();
    assert!(matches!(e, OnnxError::TooLarge { limit: 8, .. }), "{e}");
}

#[test]
fn missing_or_unknown_opsets_are_refused() {
    let mut p = model_proto(13, vec![], vec![], vec![], vec![]);
    p.opset_import = vec![OperatorSetIdProto {
        domain: Some("com.microsoft".into()),
        version: Some(1),
    }];
    assert!(matches!(
        err(&p.encode_to_vec()),
        OnnxError::UnsupportedOpset { version: 0, .. }
    ));
    p.opset_import = vec![OperatorSetIdProto {
        domain: Some(String::new()),
        version: Some(99),
    }];
    assert!(matches!(
        err(&p.encode_to_vec()),
        OnnxError::UnsupportedOpset { version: 99, .. }
    ));
    let mut p = model_proto(13, vec![], vec![], vec![], vec![]);
    p.graph = None;
    assert!(matches!(err(&p.encode_to_vec()), OnnxError::NoGraph));
}

#[test]
fn a_string_initializer_is_an_unsupported_dtype() {
    let mut t = tf32("c", &[1], &[1.0]);
    t.data_type = Some(8);
    let bytes = model(
        13,
        vec![node("Add", "a", &["x", "c"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1])],
        vec![vi("y", FLOAT, &[1])],
        vec![t],
    );
    let e = err(&bytes);
    assert!(
        matches!(e, OnnxError::UnsupportedDtype { dtype: 8, ref name, .. } if name == "c"),
        "{e}"
    );
}

#[test]
fn raw_data_that_does_not_match_the_dims_is_refused() {
    let mut t = tf32("w", &[2, 3], &[1.0; 6]);
    t.raw_data.as_mut().unwrap().truncate(20);
    let bytes = model(
        13,
        vec![node("MatMul", "m", &["x", "w"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1, 2])],
        vec![vi("y", FLOAT, &[1, 3])],
        vec![t],
    );
    let e = err(&bytes);
    assert!(
        matches!(
            e,
            OnnxError::TensorSize {
                field: "raw_data",
                expected: 24,
                found: 20,
                ..
            }
        ),
        "{e}"
    );
    let mut t = tf32("w", &[2, 3], &[]);
    t.raw_data = None;
    t.float_data = vec![1.0; 5];
    let bytes = model(
        13,
        vec![node("MatMul", "m", &["x", "w"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1, 2])],
        vec![vi("y", FLOAT, &[1, 3])],
        vec![t],
    );
    assert!(matches!(
        err(&bytes),
        OnnxError::TensorSize {
            field: "float_data",
            expected: 6,
            found: 5,
            ..
        }
    ));
}

#[test]
fn negative_or_enormous_dims_are_refused_before_allocating() {
    let mut t = tf32("w", &[2], &[1.0, 2.0]);
    t.dims = vec![-2];
    let bytes = model(13, vec![], vec![], vec![], vec![t]);
    assert!(matches!(
        err(&bytes),
        OnnxError::BadDims {
            index: 0,
            value: -2,
            ..
        }
    ));
    let mut t = tf32("w", &[2], &[1.0, 2.0]);
    t.dims = vec![1 << 40, 1 << 40];
    let bytes = model(13, vec![], vec![], vec![], vec![t]);
    assert!(matches!(err(&bytes), OnnxError::TensorTooLarge { .. }));
}

#[test]
fn external_data_is_refused() {
    let mut t = tf32("w", &[2], &[]);
    t.raw_data = None;
    t.data_location = Some(1);
    t.external_data = vec![tensorvault_onnx::proto::StringStringEntryProto {
        key: Some("location".into()),
        value: Some("../../etc/passwd".into()),
    }];
    let bytes = model(13, vec![], vec![], vec![], vec![t]);
    assert!(matches!(err(&bytes), OnnxError::ExternalData { ref tensor } if tensor == "w"));
}

#[test]
fn a_dangling_input_names_the_node_and_the_value() {
    let bytes = model(
        13,
        vec![node("Relu", "r", &["nowhere"], &["y"], vec![])],
        vec![],
        vec![vi("y", FLOAT, &[1])],
        vec![],
    );
    let e = err(&bytes);
    assert!(
        matches!(e, OnnxError::DanglingValue { ref node, ref input, .. } if node == "r" && input == "nowhere"),
        "{e}"
    );
    let bytes = model(
        13,
        vec![],
        vec![vi("x", FLOAT, &[1])],
        vec![vi("ghost", FLOAT, &[1])],
        vec![],
    );
    assert!(matches!(err(&bytes), OnnxError::DanglingOutput { .. }));
}

#[test]
fn a_cycle_is_refused() {
    let bytes = model(
        13,
        vec![
            node("Add", "a", &["x", "c"], &["b"], vec![]),
            node("Relu", "r", &["b"], &["c"], vec![]),
        ],
        vec![vi("x", FLOAT, &[1])],
        vec![vi("c", FLOAT, &[1])],
        vec![],
    );
    assert!(matches!(err(&bytes), OnnxError::Cycle { .. }));
}

#[test]
fn a_value_defined_twice_is_refused() {
    let bytes = model(
        13,
        vec![
            node("Relu", "a", &["x"], &["y"], vec![]),
            node("Sigmoid", "b", &["x"], &["y"], vec![]),
        ],
        vec![vi("x", FLOAT, &[1])],
        vec![vi("y", FLOAT, &[1])],
        vec![],
    );
    assert!(matches!(err(&bytes), OnnxError::DuplicateValue { ref name, .. } if name == "y"));
}

#[test]
fn unsupported_ops_and_domains_name_the_node() {
    let bytes = model(
        13,
        vec![node("LSTM", "lstm0", &["x"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1])],
        vec![vi("y", FLOAT, &[1])],
        vec![],
    );
    let e = err(&bytes);
    assert!(
        matches!(e, OnnxError::UnsupportedOp { ref op, ref node, .. } if op == "LSTM" && node == "lstm0"),
        "{e}"
    );
    assert!(e.to_string().contains("lstm0"));
    let mut p = model_proto(
        13,
        vec![node("FusedConv", "f", &["x"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1])],
        vec![vi("y", FLOAT, &[1])],
        vec![],
    );
    p.graph.as_mut().unwrap().node[0].domain = Some("com.microsoft".into());
    assert!(
        matches!(err(&p.encode_to_vec()), OnnxError::UnsupportedOp { ref domain, .. } if domain == "com.microsoft")
    );
}

#[test]
fn wrong_attribute_types_and_missing_attributes_are_typed() {
    let bytes = model(
        13,
        vec![node(
            "Softmax",
            "s",
            &["x"],
            &["y"],
            vec![attr_f("axis", 1.0)],
        )],
        vec![vi("x", FLOAT, &[1, 2])],
        vec![vi("y", FLOAT, &[1, 2])],
        vec![],
    );
    assert!(
        matches!(err(&bytes), OnnxError::BadAttribute { ref attribute, why: "must be INT", .. } if attribute == "axis")
    );
    let bytes = model(
        13,
        vec![node("MaxPool", "p", &["x"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1, 1, 4, 4])],
        vec![vi("y", FLOAT, &[1, 1, 4, 4])],
        vec![],
    );
    assert!(matches!(
        err(&bytes),
        OnnxError::BadAttribute {
            why: "is missing",
            ..
        }
    ));
}

#[test]
fn runtime_weights_and_wrong_arity_are_typed() {
    let bytes = model(
        13,
        vec![node("Conv", "c", &["x", "w"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1, 1, 4, 4]), vi("w", FLOAT, &[1, 1, 3, 3])],
        vec![vi("y", FLOAT, &[1, 1, 2, 2])],
        vec![],
    );
    assert!(matches!(
        err(&bytes),
        OnnxError::NotConstant { index: 1, .. }
    ));
    let bytes = model(
        13,
        vec![node("Relu", "r", &["x", "x"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1])],
        vec![vi("y", FLOAT, &[1])],
        vec![],
    );
    assert!(matches!(err(&bytes), OnnxError::Arity { found: 2, .. }));
}

#[test]
fn shape_mismatches_are_typed() {
    let bytes = model(
        13,
        vec![node("Add", "a", &["x", "z"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[2]), vi("z", FLOAT, &[3])],
        vec![vi("y", FLOAT, &[3])],
        vec![],
    );
    assert!(matches!(err(&bytes), OnnxError::Shape { ref node, .. } if node == "a"));
    // A declared output shape that disagrees with the computed one.
    let bytes = model(
        13,
        vec![node("Relu", "r", &["x"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[2])],
        vec![vi("y", FLOAT, &[3])],
        vec![],
    );
    assert!(matches!(err(&bytes), OnnxError::Shape { .. }));
    // Gather with an out-of-range constant index.
    let bytes = model(
        13,
        vec![node("Gather", "g", &["d", "i"], &["y"], vec![])],
        vec![],
        vec![vi("y", INT64, &[])],
        vec![ti64("d", &[2], &[1, 2]), ti64("i", &[], &[5])],
    );
    assert!(matches!(err(&bytes), OnnxError::Shape { ref node, .. } if node == "g"));
}

#[test]
fn a_failed_conversion_leaves_no_file_and_a_good_one_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("m.onnx"), dir.path().join("m.mobi"));
    let bad = model(
        13,
        vec![node("LSTM", "l", &["x"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1])],
        vec![vi("y", FLOAT, &[1])],
        vec![],
    );
    std::fs::write(&src, &bad).unwrap();
    assert!(convert_file(&src, &dst, &ImportOptions::default(), false, &mut |_, _| {}).is_err());
    assert!(!dst.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary file left"
    );
    std::fs::write(&src, relu_model()).unwrap();
    let (m, stats, size) =
        convert_file(&src, &dst, &ImportOptions::default(), true, &mut |_, _| {}).unwrap();
    assert_eq!(stats.nodes_in, 1);
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), size);
    assert_eq!(
        tensorvault_formats::mobi::Model::open(&dst).unwrap(),
        m.with_options(&tensorvault_formats::mobi::WriteOptions {
            quantize: None,
            gzip: true
        })
        .unwrap()
    );
}
