//! Op mappings, opset-dependent semantics, auto_pad, symbolic dims and weight modes.

mod common;

use common::*;
use tensorvault_formats::mobi::{DataType, Dim, OperatorType as Op, ParamValue, Quantization};
use tensorvault_onnx::{import, ImportOptions, OnnxError, WeightsMode};

fn unary_model(
    opset: i64,
    op: &str,
    attrs: Vec<tensorvault_onnx::proto::AttributeProto>,
    shape: &[i64],
    out: &[i64],
) -> Vec<u8> {
    model(
        opset,
        vec![node(op, "n", &["x"], &["y"], attrs)],
        vec![vi("x", FLOAT, shape)],
        vec![vi("y", FLOAT, out)],
        vec![],
    )
}

#[test]
fn activations_map_one_to_one() {
    for (onnx, mobi) in [
        ("Relu", Op::Relu),
        ("Sigmoid", Op::Sigmoid),
        ("Tanh", Op::Tanh),
    ] {
        let m = imp(&unary_model(13, onnx, vec![], &[2, 3], &[2, 3]));
        assert_eq!(ops(&m), vec![mobi]);
    }
}

#[test]
fn softmax_before_opset_13_is_coerced_to_2d() {
    let m = imp(&unary_model(
        11,
        "Softmax",
        vec![attr_i("axis", 1)],
        &[2, 3, 4],
        &[2, 3, 4],
    ));
    assert_eq!(ops(&m), vec![Op::Reshape, Op::Softmax, Op::Reshape]);
    assert_eq!(
        m.operators[0].param("shape"),
        Some(&ParamValue::Ints(vec![2, 12]))
    );
    assert_eq!(m.operators[1].param("axis"), Some(&ParamValue::Int(1)));
    assert_eq!(
        m.operators[2].param("shape"),
        Some(&ParamValue::Ints(vec![2, 3, 4]))
    );
    // Default axis before 13 is 1, too.
    let m = imp(&unary_model(11, "Softmax", vec![], &[2, 3, 4], &[2, 3, 4]));
    assert_eq!(ops(&m), vec![Op::Reshape, Op::Softmax, Op::Reshape]);
}

#[test]
fn softmax_over_the_last_axis_needs_no_coercion() {
    let m = imp(&unary_model(
        11,
        "Softmax",
        vec![attr_i("axis", 2)],
        &[2, 3, 4],
        &[2, 3, 4],
    ));
    assert_eq!(ops(&m), vec![Op::Softmax]);
    assert_eq!(m.operators[0].param("axis"), Some(&ParamValue::Int(2)));
    let m = imp(&unary_model(11, "Softmax", vec![], &[1, 10], &[1, 10]));
    assert_eq!(ops(&m), vec![Op::Softmax]);
}

#[test]
fn softmax_from_opset_13_is_per_axis() {
    let m = imp(&unary_model(
        13,
        "Softmax",
        vec![attr_i("axis", 1)],
        &[2, 3, 4],
        &[2, 3, 4],
    ));
    assert_eq!(ops(&m), vec![Op::Softmax]);
    assert_eq!(m.operators[0].param("axis"), Some(&ParamValue::Int(1)));
    let m = imp(&unary_model(13, "Softmax", vec![], &[2, 3, 4], &[2, 3, 4]));
    assert_eq!(m.operators[0].param("axis"), Some(&ParamValue::Int(2)));
}

#[test]
fn squeeze_and_unsqueeze_take_attributes_before_13_and_inputs_after() {
    let m = imp(&unary_model(
        11,
        "Squeeze",
        vec![attr_ints("axes", &[1])],
        &[2, 1, 3],
        &[2, 3],
    ));
    assert_eq!(ops(&m), vec![Op::Reshape]);
    assert_eq!(
        m.operators[0].param("shape"),
        Some(&ParamValue::Ints(vec![2, 3]))
    );
    let bytes = model(
        13,
        vec![node("Unsqueeze", "u", &["x", "axes"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[2, 3])],
        vec![vi("y", FLOAT, &[2, 1, 3, 1])],
        vec![ti64("axes", &[2], &[1, -1])],
    );
    let m = imp(&bytes);
    assert_eq!(
        m.operators[0].param("shape"),
        Some(&ParamValue::Ints(vec![2, 1, 3, 1]))
    );
    // Opset 13 Unsqueeze with an attribute instead of the input: axes missing.
    let e = import(
        &unary_model(
            13,
            "Unsqueeze",
            vec![attr_ints("axes", &[0])],
            &[2],
            &[1, 2],
        ),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(e, OnnxError::BadAttribute { ref attribute, .. } if attribute == "axes"),
        "{e}"
    );
}

#[test]
fn clip_takes_attributes_before_11_and_inputs_after() {
    let m = imp(&unary_model(
        10,
        "Clip",
        vec![attr_f("min", 0.0)],
        &[4],
        &[4],
    ));
    assert_eq!(ops(&m), vec![Op::Relu]);
    let bytes = model(
        12,
        vec![node("Clip", "c", &["x", "lo"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[4])],
        vec![vi("y", FLOAT, &[4])],
        vec![tf32("lo", &[], &[0.0])],
    );
    assert_eq!(ops(&imp(&bytes)), vec![Op::Relu]);
    let bytes = model(
        12,
        vec![node("Clip", "relu6", &["x", "lo", "hi"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[4])],
        vec![vi("y", FLOAT, &[4])],
        vec![tf32("lo", &[], &[0.0]), tf32("hi", &[], &[6.0])],
    );
    let m = imp(&bytes);
    assert_eq!(ops(&m), vec![Op::Clip]);
    assert_eq!(m.operators[0].param("min"), Some(&ParamValue::Float(0.0)));
    assert_eq!(m.operators[0].param("max"), Some(&ParamValue::Float(6.0)));
    let m = imp(&unary_model(
        10,
        "Clip",
        vec![attr_f("max", 1.0)],
        &[4],
        &[4],
    ));
    assert_eq!(
        m.operators[0].param("min"),
        Some(&ParamValue::Float(f64::NEG_INFINITY))
    );
}

#[test]
fn reduce_axes_are_an_attribute_before_18_and_an_input_after() {
    let m = imp(&unary_model(
        13,
        "ReduceMean",
        vec![attr_ints("axes", &[2, 3]), attr_i("keepdims", 0)],
        &[1, 8, 5, 5],
        &[1, 8],
    ));
    assert_eq!(ops(&m), vec![Op::ReduceMean]);
    assert_eq!(
        m.operators[0].param("axes"),
        Some(&ParamValue::Ints(vec![2, 3]))
    );
    assert_eq!(m.operators[0].param("keepdims"), Some(&ParamValue::Int(0)));
    let bytes = model(
        18,
        vec![node("ReduceMean", "rm", &["x", "axes"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1, 8, 5, 5])],
        vec![vi("y", FLOAT, &[1, 8, 1, 1])],
        vec![ti64("axes", &[2], &[-1, -2])],
    );
    assert_eq!(ops(&imp(&bytes)), vec![Op::ReduceMean]);
    // Opset 18 with an axes attribute instead of the input: reduces every axis.
    let m = imp(&unary_model(
        18,
        "ReduceMean",
        vec![attr_i("keepdims", 0)],
        &[1, 8, 5, 5],
        &[],
    ));
    assert_eq!(
        m.operators[0].param("axes"),
        Some(&ParamValue::Ints(vec![0, 1, 2, 3]))
    );
    let e = import(
        &unary_model(
            13,
            "ReduceMean",
            vec![attr_ints("axes", &[1, -3])],
            &[1, 8, 5, 5],
            &[1, 1, 5, 5],
        ),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            OnnxError::UnsupportedAttribute {
                attribute: "axes",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn reshape_resolves_zero_and_minus_one() {
    let bytes = model(
        13,
        vec![node("Reshape", "r", &["x", "s"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[2, 3, 4])],
        vec![vi("y", FLOAT, &[2, 12])],
        vec![ti64("s", &[2], &[0, -1])],
    );
    let m = imp(&bytes);
    assert_eq!(
        m.operators[0].param("shape"),
        Some(&ParamValue::Ints(vec![2, 12]))
    );
}

fn conv_model(auto_pad: &str, stride: i64, hw: i64, out_hw: i64) -> Vec<u8> {
    model(
        11,
        vec![node(
            "Conv",
            "c",
            &["x", "w"],
            &["y"],
            vec![
                attr_s("auto_pad", auto_pad),
                attr_ints("strides", &[stride, stride]),
            ],
        )],
        vec![vi("x", FLOAT, &[1, 1, hw, hw])],
        vec![vi("y", FLOAT, &[1, 2, out_hw, out_hw])],
        vec![tf32("w", &[2, 1, 3, 3], &values(18, 1))],
    )
}

#[test]
fn auto_pad_resolves_to_explicit_pads() {
    let pads = |bytes: &[u8]| imp(bytes).operators[0].param("padding").cloned();
    assert_eq!(
        pads(&conv_model("SAME_UPPER", 1, 5, 5)),
        Some(ParamValue::Ints(vec![1, 1, 1, 1]))
    );
    assert_eq!(
        pads(&conv_model("VALID", 1, 5, 3)),
        Some(ParamValue::Ints(vec![0, 0, 0, 0]))
    );
    // Stride 2 on 6: output 3, total pad 1: UPPER puts it at the end, LOWER at the start.
    assert_eq!(
        pads(&conv_model("SAME_UPPER", 2, 6, 3)),
        Some(ParamValue::Ints(vec![0, 0, 1, 1]))
    );
    assert_eq!(
        pads(&conv_model("SAME_LOWER", 2, 6, 3)),
        Some(ParamValue::Ints(vec![1, 1, 0, 0]))
    );
    let e = import(
        &conv_model("SAME_MIDDLE", 1, 5, 5),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            OnnxError::UnsupportedAttribute {
                attribute: "auto_pad",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn depthwise_and_grouped_convs_map_and_bad_groups_are_refused() {
    let dw = |group: i64, wshape: &[i64]| {
        let n: i64 = wshape.iter().product();
        model(
            13,
            vec![node(
                "Conv",
                "dw",
                &["x", "w"],
                &["y"],
                vec![attr_i("group", group)],
            )],
            vec![vi("x", FLOAT, &[1, 4, 5, 5])],
            vec![vi("y", FLOAT, &[1, wshape[0], 3, 3])],
            vec![tf32("w", wshape, &values(n as usize, 2))],
        )
    };
    assert_eq!(ops(&imp(&dw(4, &[4, 1, 3, 3]))), vec![Op::DepthwiseConv2D]);
    let m = imp(&dw(2, &[4, 2, 3, 3]));
    assert_eq!(ops(&m), vec![Op::Conv2D]);
    assert_eq!(m.operators[0].param("group"), Some(&ParamValue::Int(2)));
    let e = import(&dw(3, &[3, 1, 3, 3]), &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, OnnxError::Shape { .. }), "{e}");
}

#[test]
fn pools_carry_kernel_stride_pads_and_ceil_mode() {
    let m = imp(&unary_model(
        11,
        "MaxPool",
        vec![
            attr_ints("kernel_shape", &[2, 2]),
            attr_ints("strides", &[2, 2]),
            attr_i("ceil_mode", 1),
        ],
        &[1, 1, 5, 5],
        &[1, 1, 3, 3],
    ));
    let p = &m.operators[0];
    assert_eq!(p.op, Op::MaxPool2D);
    assert_eq!(p.param("ceil_mode"), Some(&ParamValue::Int(1)));
    assert_eq!(m.outputs[0].fixed_shape(), Some(vec![1, 1, 3, 3]));
    let m = imp(&unary_model(
        11,
        "AveragePool",
        vec![
            attr_ints("kernel_shape", &[3, 3]),
            attr_ints("pads", &[1, 1, 1, 1]),
            attr_i("count_include_pad", 1),
        ],
        &[1, 2, 4, 4],
        &[1, 2, 4, 4],
    ));
    assert_eq!(
        m.operators[0].param("count_include_pad"),
        Some(&ParamValue::Int(1))
    );
    let m = imp(&unary_model(
        11,
        "GlobalAveragePool",
        vec![],
        &[1, 2, 4, 4],
        &[1, 2, 1, 1],
    ));
    assert_eq!(ops(&m), vec![Op::GlobalAveragePool]);
    assert_eq!(m.outputs[0].fixed_shape(), Some(vec![1, 2, 1, 1]));
}

#[test]
fn elementwise_ops_broadcast_and_sum_is_one_op() {
    for (onnx, mobi) in [
        ("Add", Op::Add),
        ("Sub", Op::Subtract),
        ("Mul", Op::Multiply),
        ("Div", Op::Divide),
    ] {
        let bytes = model(
            13,
            vec![node(onnx, "e", &["x", "c"], &["y"], vec![])],
            vec![vi("x", FLOAT, &[2, 3])],
            vec![vi("y", FLOAT, &[2, 3])],
            vec![tf32("c", &[3], &[1.0, 2.0, 3.0])],
        );
        let m = imp(&bytes);
        assert_eq!(ops(&m), vec![mobi]);
        assert_eq!(const_input(&m, &m.operators[0], 1), vec![1.0, 2.0, 3.0]);
    }
    let bytes = model(
        13,
        vec![node("Sum", "s", &["a", "b", "c"], &["y"], vec![])],
        vec![
            vi("a", FLOAT, &[2]),
            vi("b", FLOAT, &[2]),
            vi("c", FLOAT, &[2]),
        ],
        vec![vi("y", FLOAT, &[2])],
        vec![],
    );
    assert_eq!(ops(&imp(&bytes)), vec![Op::Sum]);
}

#[test]
fn concat_flatten_and_transpose_map_with_normalized_axes() {
    let bytes = model(
        13,
        vec![
            node(
                "Concat",
                "c",
                &["a", "b"],
                &["ab"],
                vec![attr_i("axis", -1)],
            ),
            node(
                "Transpose",
                "t",
                &["ab"],
                &["t"],
                vec![attr_ints("perm", &[1, 0, 2])],
            ),
            node("Flatten", "f", &["t"], &["y"], vec![attr_i("axis", -1)]),
        ],
        vec![vi("a", FLOAT, &[2, 3, 1]), vi("b", FLOAT, &[2, 3, 2])],
        vec![vi("y", FLOAT, &[6, 3])],
        vec![],
    );
    let m = imp(&bytes);
    assert_eq!(ops(&m), vec![Op::Concat, Op::Transpose, Op::Flatten]);
    assert_eq!(m.operators[0].param("axis"), Some(&ParamValue::Int(2)));
    assert_eq!(m.operators[2].param("axis"), Some(&ParamValue::Int(2)));
}

#[test]
fn symbolic_batch_is_kept_or_pinned() {
    let bytes = unary_model(13, "Relu", vec![], &[-1, 3], &[-1, 3]);
    let m = import(&bytes, &ImportOptions::default()).unwrap();
    assert_eq!(
        m.inputs[0].shape,
        vec![Dim::Symbolic("N".into()), Dim::Fixed(3)]
    );
    assert_eq!(
        m.outputs[0].shape,
        vec![Dim::Symbolic("N".into()), Dim::Fixed(3)]
    );
    let opts = ImportOptions {
        pin_symbolic_dims: Some(4),
        ..ImportOptions::default()
    };
    let m = import(&bytes, &opts).unwrap();
    assert_eq!(m.inputs[0].fixed_shape(), Some(vec![4, 3]));
    assert_eq!(m.outputs[0].fixed_shape(), Some(vec![4, 3]));
}

#[test]
fn a_reshape_of_the_symbolic_batch_infers_it() {
    // Softmax before 13 over axis 1 of [N, 3, 4]: Reshape [N, 12] + Softmax + Reshape.
    let m = imp(&unary_model(
        11,
        "Softmax",
        vec![],
        &[-1, 3, 4],
        &[-1, 3, 4],
    ));
    assert_eq!(
        m.operators[0].param("shape"),
        Some(&ParamValue::Ints(vec![-1, 12]))
    );
    assert_eq!(
        m.operators[2].param("shape"),
        Some(&ParamValue::Ints(vec![-1, 3, 4]))
    );
}

#[test]
fn a_constant_computed_from_the_symbolic_batch_needs_a_pin() {
    // y = x * float(shape(x)[0]): the constant is the batch size.
    let bytes = model(
        13,
        vec![
            node("Shape", "s", &["x"], &["s"], vec![]),
            node("Gather", "g", &["s", "zero"], &["n"], vec![]),
            node("Cast", "c", &["n"], &["nf"], vec![attr_i("to", 1)]),
            node("Mul", "m", &["x", "nf"], &["y"], vec![]),
        ],
        vec![vi("x", FLOAT, &[-1, 2])],
        vec![vi("y", FLOAT, &[-1, 2])],
        vec![ti64("zero", &[], &[0])],
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, OnnxError::SymbolicShape { .. }), "{e}");
    let opts = ImportOptions {
        pin_symbolic_dims: Some(5),
        ..ImportOptions::default()
    };
    let m = import(&bytes, &opts).unwrap();
    assert_eq!(const_input(&m, &m.operators[0], 1), vec![5.0]);
}

#[test]
fn weights_modes_store_conv_weights_per_channel_and_keep_int_mode_biases_f32() {
    let bytes = model(
        13,
        vec![node("Conv", "c", &["x", "w", "b"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1, 16, 5, 5])],
        vec![vi("y", FLOAT, &[1, 32, 3, 3])],
        vec![
            tf32("w", &[32, 16, 3, 3], &values(32 * 16 * 9, 3)),
            tf32("b", &[32], &values(32, 4)),
        ],
    );
    for (mode, want) in [
        (WeightsMode::F32, DataType::F32),
        (WeightsMode::Fp16, DataType::F16),
        (WeightsMode::Int16, DataType::I16),
        (WeightsMode::Int8, DataType::I8),
    ] {
        let m = import(
            &bytes,
            &ImportOptions {
                weights: mode,
                ..ImportOptions::default()
            },
        )
        .unwrap();
        let conv = &m.operators[0];
        assert_eq!(m.tensor(conv.inputs[1]).unwrap().dtype, want, "{mode:?}");
        let bias = if mode == WeightsMode::Fp16 {
            DataType::F16
        } else {
            DataType::F32
        };
        assert_eq!(m.tensor(conv.inputs[2]).unwrap().dtype, bias, "{mode:?}");
        if mode == WeightsMode::Int8 {
            let q = m.tensor(conv.inputs[1]).unwrap().quant.clone();
            assert!(
                matches!(q, Some(Quantization::PerAxis { axis: 0, ref scales, .. }) if scales.len() == 32),
                "{q:?}"
            );
        }
        let back = const_input(&m, conv, 1);
        let orig = values(32 * 16 * 9, 3);
        let tol = match mode {
            WeightsMode::F32 => 0.0,
            WeightsMode::Fp16 => 1e-3,
            WeightsMode::Int16 => 1e-4,
            WeightsMode::Int8 => 1e-2,
        };
        let err = orig
            .iter()
            .zip(&back)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(err <= tol, "{mode:?}: max error {err}");
    }
}

#[test]
fn initializers_listed_as_graph_inputs_are_constants() {
    let mut p = model_proto(
        9,
        vec![node("Add", "a", &["x", "c"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[2]), vi("c", FLOAT, &[2])],
        vec![vi("y", FLOAT, &[2])],
        vec![tf32("c", &[2], &[1.0, 2.0])],
    );
    p.ir_version = Some(3);
    let m = imp(&prost::Message::encode_to_vec(&p));
    assert_eq!(m.inputs.len(), 1);
    assert_eq!(m.tensors.len(), 1);
}
