//! Lowerings onto MOBI's extended operator table: parameters and output shapes, and the
//! opset-dependent argument forms (attributes in old opsets, constant inputs in new ones).

mod common;

use common::*;
use tensorvault_formats::mobi::{OperatorType as Op, ParamValue};
use tensorvault_onnx::proto::AttributeProto;
use tensorvault_onnx::proto::TensorProto;
use tensorvault_onnx::{import, ImportOptions, OnnxError};

fn one(
    opset: i64,
    op: &str,
    ins: &[&str],
    attrs: Vec<AttributeProto>,
    x: &[i64],
    y: &[i64],
    inits: Vec<TensorProto>,
) -> tensorvault_formats::mobi::Model {
    let mut inputs = vec!["x"];
    inputs.extend_from_slice(ins);
    imp(&model(
        opset,
        vec![node(op, "n", &inputs, &["y"], attrs)],
        vec![vi("x", FLOAT, x)],
        vec![vi("y", FLOAT, y)],
        inits,
    ))
}

fn p(m: &tensorvault_formats::mobi::Model, k: &str) -> Option<ParamValue> {
    m.operators[0].param(k).cloned()
}

#[test]
fn unary_ops_carry_their_attributes_with_onnx_defaults() {
    let m = one(13, "LeakyRelu", &[], vec![], &[3], &[3], vec![]);
    assert_eq!(m.operators[0].op, Op::LeakyRelu);
    assert_eq!(p(&m, "alpha"), Some(ParamValue::Float(f64::from(0.01f32))));
    let m = one(
        13,
        "HardSigmoid",
        &[],
        vec![attr_f("alpha", 0.25)],
        &[3],
        &[3],
        vec![],
    );
    assert_eq!(p(&m, "alpha"), Some(ParamValue::Float(0.25)));
    assert_eq!(p(&m, "beta"), Some(ParamValue::Float(0.5)));
    for (onnx, mobi) in [
        ("HardSwish", Op::HardSwish),
        ("Exp", Op::Exp),
        ("Sqrt", Op::Sqrt),
        ("Erf", Op::Erf),
        ("Softplus", Op::Softplus),
    ] {
        assert_eq!(
            one(14, onnx, &[], vec![], &[2], &[2], vec![]).operators[0].op,
            mobi
        );
    }
    let m = one(
        20,
        "Gelu",
        &[],
        vec![attr_s("approximate", "tanh")],
        &[2],
        &[2],
        vec![],
    );
    assert_eq!(p(&m, "approximate"), Some(ParamValue::Str("tanh".into())));
}

#[test]
fn pow_prelu_and_variadic_ops_broadcast() {
    let m = one(
        13,
        "Pow",
        &["e"],
        vec![],
        &[2, 3],
        &[2, 3],
        vec![tf32("e", &[], &[2.0])],
    );
    assert_eq!(m.operators[0].op, Op::Pow);
    let m = one(
        13,
        "PRelu",
        &["s"],
        vec![],
        &[1, 3, 2, 2],
        &[1, 3, 2, 2],
        vec![tf32("s", &[3, 1, 1], &[0.1, 0.2, 0.3])],
    );
    assert_eq!(m.operators[0].op, Op::PRelu);
    let m = one(
        13,
        "Max",
        &["c"],
        vec![],
        &[2, 3],
        &[2, 3],
        vec![tf32("c", &[3], &[0.0; 3])],
    );
    assert_eq!(m.operators[0].op, Op::Max);
}

#[test]
fn pad_takes_attributes_before_11_and_inputs_after() {
    let m = one(
        10,
        "Pad",
        &[],
        vec![attr_ints("pads", &[0, 1, 0, 2]), attr_s("mode", "reflect")],
        &[2, 3],
        &[2, 6],
        vec![],
    );
    assert_eq!(m.operators[0].op, Op::Pad);
    assert_eq!(p(&m, "pads"), Some(ParamValue::Ints(vec![0, 1, 0, 2])));
    assert_eq!(p(&m, "mode"), Some(ParamValue::Str("reflect".into())));
    let m = one(
        18,
        "Pad",
        &["pads", "v", "axes"],
        vec![],
        &[2, 3],
        &[2, 5],
        vec![
            ti64("pads", &[2], &[1, 1]),
            tf32("v", &[], &[7.0]),
            ti64("axes", &[1], &[-1]),
        ],
    );
    assert_eq!(p(&m, "axes"), Some(ParamValue::Ints(vec![1])));
    assert_eq!(p(&m, "value"), Some(ParamValue::Float(7.0)));
    let bytes = model(
        11,
        vec![node("Pad", "p", &["x", "pads"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[2]), vi("pads", INT64, &[2])],
        vec![vi("y", FLOAT, &[4])],
        vec![],
    );
    assert!(matches!(
        import(&bytes, &ImportOptions::default()).unwrap_err(),
        OnnxError::NotConstant { index: 1, .. }
    ));
}

#[test]
fn slice_with_negative_steps_and_clamped_ends() {
    let m = one(
        13,
        "Slice",
        &["s", "e", "a", "st"],
        vec![],
        &[2, 10],
        &[2, 4],
        vec![
            ti64("s", &[1], &[-1]),
            ti64("e", &[1], &[i64::MIN]),
            ti64("a", &[1], &[-1]),
            ti64("st", &[1], &[-3]),
        ],
    );
    assert_eq!(m.operators[0].op, Op::Slice);
    assert_eq!(p(&m, "axes"), Some(ParamValue::Ints(vec![1])));
    assert_eq!(p(&m, "steps"), Some(ParamValue::Ints(vec![-3])));
    let m = one(
        9,
        "Slice",
        &[],
        vec![attr_ints("starts", &[1]), attr_ints("ends", &[100])],
        &[5, 2],
        &[4, 2],
        vec![],
    );
    assert_eq!(p(&m, "starts"), Some(ParamValue::Ints(vec![1])));
}

#[test]
fn split_sizes_by_opset() {
    let split = |opset: i64,
                 ins: &[&str],
                 attrs: Vec<AttributeProto>,
                 inits: Vec<TensorProto>,
                 outs: &[(&str, i64)]| {
        let mut inputs = vec!["x"];
        inputs.extend_from_slice(ins);
        let names: Vec<&str> = outs.iter().map(|(n, _)| *n).collect();
        let ovi = outs.iter().map(|(n, d)| vi(n, FLOAT, &[*d, 2])).collect();
        imp(&model(
            opset,
            vec![node("Split", "s", &inputs, &names, attrs)],
            vec![vi("x", FLOAT, &[5, 2])],
            ovi,
            inits,
        ))
    };
    let m = split(
        11,
        &[],
        vec![attr_ints("split", &[2, 3])],
        vec![],
        &[("a", 2), ("b", 3)],
    );
    assert_eq!(m.operators[0].op, Op::Split);
    assert_eq!(m.operators[0].outputs.len(), 2);
    assert_eq!(
        m.operators[0].param("split"),
        Some(&ParamValue::Ints(vec![2, 3]))
    );
    let m = split(
        13,
        &["sz"],
        vec![],
        vec![ti64("sz", &[2], &[4, 1])],
        &[("a", 4), ("b", 1)],
    );
    assert_eq!(
        m.operators[0].param("split"),
        Some(&ParamValue::Ints(vec![4, 1]))
    );
    let m = split(
        18,
        &[],
        vec![attr_i("num_outputs", 2)],
        vec![],
        &[("a", 3), ("b", 2)],
    );
    assert_eq!(
        m.operators[0].param("split"),
        Some(&ParamValue::Ints(vec![3, 2]))
    );
}

#[test]
fn gather_expand_tile_and_layer_norm() {
    let m = one(
        13,
        "Gather",
        &["i"],
        vec![attr_i("axis", 1)],
        &[2, 5],
        &[2, 3],
        vec![ti64("i", &[3], &[0, -1, 2])],
    );
    assert_eq!(m.operators[0].op, Op::Gather);
    assert_eq!(
        m.tensor(m.operators[0].inputs[1]).unwrap().dtype,
        tensorvault_formats::mobi::DataType::I64
    );
    let bad = model(
        13,
        vec![node("Gather", "g", &["x", "i"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[2])],
        vec![vi("y", FLOAT, &[])],
        vec![ti64("i", &[], &[2])],
    );
    assert!(matches!(
        import(&bad, &ImportOptions::default()).unwrap_err(),
        OnnxError::Shape { .. }
    ));
    let m = one(
        13,
        "Expand",
        &["s"],
        vec![],
        &[3, 1],
        &[2, 3, 4],
        vec![ti64("s", &[3], &[2, 1, 4])],
    );
    assert_eq!(p(&m, "shape"), Some(ParamValue::Ints(vec![2, 1, 4])));
    let m = one(
        13,
        "Tile",
        &["r"],
        vec![],
        &[2, 3],
        &[4, 3],
        vec![ti64("r", &[2], &[2, 1])],
    );
    assert_eq!(p(&m, "repeats"), Some(ParamValue::Ints(vec![2, 1])));
    let m = one(
        17,
        "LayerNormalization",
        &["g", "b"],
        vec![attr_i("axis", -1)],
        &[2, 4],
        &[2, 4],
        vec![tf32("g", &[4], &[1.0; 4]), tf32("b", &[4], &[0.0; 4])],
    );
    assert_eq!(m.operators[0].op, Op::LayerNorm);
    assert_eq!(p(&m, "axis"), Some(ParamValue::Int(1)));
}

#[test]
fn log_softmax_before_13_is_coerced_like_softmax() {
    let m = one(
        11,
        "LogSoftmax",
        &[],
        vec![],
        &[2, 3, 4],
        &[2, 3, 4],
        vec![],
    );
    let kinds: Vec<Op> = m.operators.iter().map(|o| o.op).collect();
    assert_eq!(kinds, vec![Op::Reshape, Op::LogSoftmax, Op::Reshape]);
    assert_eq!(m.operators[1].param("beta"), None);
    let m = one(13, "LogSoftmax", &[], vec![], &[2, 3], &[2, 3], vec![]);
    assert_eq!(m.operators[0].op, Op::LogSoftmax);
}

#[test]
fn dilated_pooling_carries_its_dilation() {
    let m = one(
        12,
        "MaxPool",
        &[],
        vec![
            attr_ints("kernel_shape", &[2, 2]),
            attr_ints("dilations", &[2, 2]),
        ],
        &[1, 1, 5, 5],
        &[1, 1, 3, 3],
        vec![],
    );
    assert_eq!(p(&m, "dilation"), Some(ParamValue::Ints(vec![2, 2])));
}
