//! ArgMax/ArgMin, comparisons, logic ops and Where: imported (parameters by opset, i64
//! outputs for ONNX BOOL, BOOL/INT32 graph inputs) and run by the reference runtime
//! with the results ONNX specifies.

mod common;

use common::*;
use tensorvault_formats::mobi::{DataType, OperatorType, ParamValue};
use tensorvault_mobi_runtime::{Session, Tensor};
use tensorvault_onnx::{import, ImportOptions, OnnxError};

const BOOL: i32 = 9;
const INT32: i32 = 6;

/// Import `node` over input x (`elem`, `shape`) and run it on `x`; the i64 output.
fn run_i64(
    opset: i64,
    node: tensorvault_onnx::proto::NodeProto,
    x: (i32, &[i64], Tensor),
    out: (&str, i32, &[i64]),
    inits: Vec<tensorvault_onnx::proto::TensorProto>,
) -> (Vec<usize>, Vec<i64>) {
    let (elem, shape, t) = x;
    let m = imp(&model(
        opset,
        vec![node],
        vec![vi("x", elem, shape)],
        vec![vi(out.0, out.1, out.2)],
        inits,
    ));
    let got = Session::new(&m).unwrap().run(&[("x", t)]).unwrap();
    let t = &got[0].1;
    (t.shape.clone(), t.as_i64().expect("i64 output").to_vec())
}

#[test]
fn argmax_and_argmin_by_opset() {
    let x = || Tensor::f32(vec![2, 3], vec![1.0, 5.0, 5.0, 7.0, -2.0, 7.0]).unwrap();
    let n = node(
        "ArgMax",
        "a",
        &["x"],
        &["y"],
        vec![attr_i("axis", -1), attr_i("select_last_index", 1)],
    );
    let got = run_i64(13, n, (FLOAT, &[2, 3], x()), ("y", INT64, &[2, 1]), vec![]);
    assert_eq!(got, (vec![2, 1], vec![2, 2]));
    let n = node("ArgMin", "a", &["x"], &["y"], vec![attr_i("keepdims", 0)]);
    let got = run_i64(11, n, (FLOAT, &[2, 3], x()), ("y", INT64, &[3]), vec![]);
    assert_eq!(got, (vec![3], vec![0, 1, 0]));
    // Before opset 12 there is no select_last_index; before 11 no negative axis.
    for (opset, attr) in [
        (11, attr_i("select_last_index", 1)),
        (10, attr_i("axis", -1)),
    ] {
        let bytes = model(
            opset,
            vec![node("ArgMax", "a", &["x"], &["y"], vec![attr])],
            vec![vi("x", FLOAT, &[2, 3])],
            vec![vi("y", INT64, &[2, 1])],
            vec![],
        );
        let e = import(&bytes, &ImportOptions::default()).unwrap_err();
        assert!(matches!(e, OnnxError::UnsupportedAttribute { .. }), "{e}");
    }
}

#[test]
fn comparisons_give_i64_outputs_for_bool_and_take_int32_inputs() {
    let x = Tensor::i64(vec![4], vec![-3, 0, 2, 9]).unwrap();
    let n = node("Less", "c", &["x", "b"], &["y"], vec![]);
    let got = run_i64(
        13,
        n,
        (INT32, &[4], x),
        ("y", BOOL, &[4]),
        vec![ti64("b", &[1], &[2])],
    );
    assert_eq!(got, (vec![4], vec![1, 1, 0, 0]));
    let m = imp(&model(
        13,
        vec![node("Equal", "c", &["x", "b"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[2, 2])],
        vec![vi("y", BOOL, &[2, 2])],
        vec![tf32("b", &[2], &[1.0, 0.5])],
    ));
    assert_eq!(ops(&m), vec![OperatorType::Equal]);
    // The BOOL output is declared i64 (booleans run as 0/1).
    assert_eq!(m.outputs[0].dtype, DataType::I64);
    let x = Tensor::f32(vec![2, 2], vec![1.0, 1.0, 0.5, 0.5]).unwrap();
    let out = Session::new(&m).unwrap().run(&[("x", x)]).unwrap();
    assert_eq!(out[0].1.as_i64().unwrap(), &[1, 0, 0, 1]);
    // Operands of different types are refused at import.
    let bytes = model(
        13,
        vec![node("Greater", "c", &["x", "b"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[2])],
        vec![vi("y", BOOL, &[2])],
        vec![ti64("b", &[1], &[1])],
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, OnnxError::Shape { .. }), "{e}");
}

#[test]
fn not_and_where_on_bool_inputs() {
    let x = Tensor::i64(vec![3], vec![1, 0, 1]).unwrap();
    let n = node("Not", "n", &["x"], &["y"], vec![]);
    assert_eq!(
        run_i64(13, n, (BOOL, &[3], x), ("y", BOOL, &[3]), vec![]).1,
        vec![0, 1, 0]
    );
    let x = Tensor::i64(vec![3], vec![1, 0, 1]).unwrap();
    let n = node("Or", "o", &["x", "b"], &["y"], vec![]);
    let got = run_i64(
        13,
        n,
        (BOOL, &[3], x),
        ("y", BOOL, &[3]),
        vec![ti64("b", &[3], &[0, 0, 1])],
    );
    assert_eq!(got.1, vec![1, 0, 1]);
    // Where(x, a, b) with float branches: the output is f32.
    let m = imp(&model(
        16,
        vec![node("Where", "w", &["x", "a", "b"], &["y"], vec![])],
        vec![vi("x", BOOL, &[2, 1])],
        vec![vi("y", FLOAT, &[2, 2])],
        vec![tf32("a", &[2], &[1.0, 2.0]), tf32("b", &[1], &[-1.0])],
    ));
    assert_eq!(m.outputs[0].dtype, DataType::F32);
    let x = Tensor::i64(vec![2, 1], vec![0, 1]).unwrap();
    let out = Session::new(&m).unwrap().run(&[("x", x)]).unwrap();
    assert_eq!(out[0].1.as_f32().unwrap(), &[-1.0, -1.0, 1.0, 2.0]);
    let w = &m.operators[0];
    assert_eq!(w.params, Vec::<(String, ParamValue)>::new());
}

#[test]
fn cast_lowers_to_mobi_cast_with_the_target_name() {
    let x = || Tensor::f32(vec![3], vec![-1.5, 2.5, 300.0]).unwrap();
    let n = node(
        "Cast",
        "c",
        &["x"],
        &["y"],
        vec![attr_i("to", INT32.into())],
    );
    let got = run_i64(13, n, (FLOAT, &[3], x()), ("y", INT32, &[3]), vec![]);
    assert_eq!(got.1, vec![-1, 2, 300]);
    let n = node("Cast", "c", &["x"], &["y"], vec![attr_i("to", 2)]); // UINT8
    assert_eq!(
        run_i64(13, n, (FLOAT, &[3], x()), ("y", 2, &[3]), vec![]).1,
        vec![255, 2, 44]
    );
    // Int64 to float: an f32 output.
    let m = imp(&model(
        13,
        vec![node(
            "Cast",
            "c",
            &["x"],
            &["y"],
            vec![attr_i("to", FLOAT.into())],
        )],
        vec![vi("x", INT64, &[2])],
        vec![vi("y", FLOAT, &[2])],
        vec![],
    ));
    assert_eq!(ops(&m), vec![OperatorType::Cast]);
    assert_eq!(
        m.operators[0].params,
        vec![("to".to_string(), ParamValue::Str("f32".into()))]
    );
    let out = Session::new(&m)
        .unwrap()
        .run(&[("x", Tensor::i64(vec![2], vec![3, -4]).unwrap())])
        .unwrap();
    assert_eq!(out[0].1.as_f32().unwrap(), &[3.0, -4.0]);
    // Strings and bfloat16 stay refused.
    for to in [8, 16] {
        let bytes = model(
            13,
            vec![node("Cast", "c", &["x"], &["y"], vec![attr_i("to", to)])],
            vec![vi("x", FLOAT, &[2])],
            vec![vi("y", FLOAT, &[2])],
            vec![],
        );
        let e = import(&bytes, &ImportOptions::default()).unwrap_err();
        assert!(matches!(e, OnnxError::UnsupportedAttribute { .. }), "{e}");
    }
}

#[test]
fn an_f32_op_refuses_integer_run_time_inputs_at_import() {
    let bytes = model(
        13,
        vec![node("Relu", "r", &["x"], &["y"], vec![])],
        vec![vi("x", INT32, &[2])],
        vec![vi("y", INT32, &[2])],
        vec![],
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    match e {
        OnnxError::UnsupportedDtype { name, dtype, .. } => {
            assert_eq!((name.as_str(), dtype), ("x", INT32));
        }
        e => panic!("{e}"),
    }
    // Data movement takes them (Reshape of an int input).
    let m = imp(&model(
        13,
        vec![node("Reshape", "r", &["x", "s"], &["y"], vec![])],
        vec![vi("x", INT32, &[2, 2])],
        vec![vi("y", INT32, &[4])],
        vec![ti64("s", &[1], &[4])],
    ));
    assert_eq!(ops(&m), vec![OperatorType::Reshape]);
}

#[test]
fn castlike_takes_the_type_of_its_second_input() {
    let x = || Tensor::f32(vec![3], vec![-1.5, 2.7, 300.0]).unwrap();
    // A constant UINT8 target: truncate, then wrap to 8 bits.
    let like = tensorvault_onnx::proto::TensorProto {
        name: Some("like".into()),
        dims: vec![1],
        data_type: Some(2), // UINT8
        raw_data: Some(vec![0]),
        ..Default::default()
    };
    let n = node("CastLike", "c", &["x", "like"], &["y"], vec![]);
    let got = run_i64(15, n, (FLOAT, &[3], x()), ("y", 2, &[3]), vec![like]);
    assert_eq!(got.1, vec![255, 2, 44]);
    // A constant first input is folded to the run-time input's type (f32): no operator.
    let m = imp(&model(
        15,
        vec![
            node("CastLike", "c", &["k", "x"], &["kf"], vec![]),
            node("Add", "a", &["x", "kf"], &["y"], vec![]),
        ],
        vec![vi("x", FLOAT, &[1])],
        vec![vi("y", FLOAT, &[1])],
        vec![ti64("k", &[1], &[2])],
    ));
    assert_eq!(ops(&m), vec![OperatorType::Add]);
    let out = Session::new(&m)
        .unwrap()
        .run(&[("x", Tensor::f32(vec![1], vec![0.5]).unwrap())])
        .unwrap();
    assert_eq!(out[0].1.as_f32().unwrap(), &[2.5]);
    // A run-time i64 target could stand for any integer type: refused, not guessed.
    let bytes = model(
        15,
        vec![node("CastLike", "c", &["x", "t"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[3]), vi("t", INT64, &[1])],
        vec![vi("y", INT64, &[3])],
        vec![],
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    assert!(
        matches!(
            &e,
            OnnxError::UnsupportedAttribute {
                attribute: "target_type",
                ..
            }
        ),
        "{e}"
    );
}
