//! Folds: BatchNorm into Conv (numerics against the unfused math), Gemm into
//! FullyConnected (transB, alpha, beta), MatMul + Add, Identity/Dropout/Cast, Shape and
//! constant subgraphs.

mod common;

use common::*;
use tensorvault_formats::mobi::{OperatorType as Op, ParamValue};
use tensorvault_onnx::{import_with_report, ImportOptions};

fn conv_bn_model(extra_reader: bool) -> Vec<u8> {
    let (c, m) = (2usize, 3usize);
    let w = values(m * c * 9, 1);
    let b = values(m, 2);
    let scale = [0.5, 2.0, -1.5];
    let bias = [0.1, -0.2, 0.3];
    let mean = [0.05, -0.4, 0.25];
    let var = [0.9, 0.2, 1.7];
    let mut nodes = vec![
        node(
            "Conv",
            "conv",
            &["x", "w", "b"],
            &["y"],
            vec![attr_ints("pads", &[1, 1, 1, 1])],
        ),
        node(
            "BatchNormalization",
            "bn",
            &["y", "s", "bb", "mu", "var"],
            &["z"],
            vec![attr_f("epsilon", 1e-3)],
        ),
    ];
    let mut outputs = vec![vi("z", FLOAT, &[1, 3, 5, 5])];
    if extra_reader {
        nodes.push(node("Relu", "r", &["y"], &["r"], vec![]));
        outputs.push(vi("r", FLOAT, &[1, 3, 5, 5]));
    }
    model(
        13,
        nodes,
        vec![vi("x", FLOAT, &[1, 2, 5, 5])],
        outputs,
        vec![
            tf32("w", &[3, 2, 3, 3], &w),
            tf32("b", &[3], &b),
            tf32("s", &[3], &scale),
            tf32("bb", &[3], &bias),
            tf32("mu", &[3], &mean),
            tf32("var", &[3], &var),
        ],
    )
}

#[test]
fn batchnorm_folds_into_conv_and_computes_the_same() {
    let bytes = conv_bn_model(false);
    let (m, stats) = import_with_report(&bytes, &ImportOptions::default(), &mut |_, _| {}).unwrap();
    assert_eq!(ops(&m), vec![Op::Conv2D]);
    assert_eq!(stats.folded_batchnorm, 1);
    let conv = &m.operators[0];
    let (w2, b2) = (const_input(&m, conv, 1), const_input(&m, conv, 2));
    // Unfused: conv(x, w) + b, then (y - mean) / sqrt(var + eps) * scale + bias.
    let x = values(2 * 25, 9);
    let w = values(3 * 2 * 9, 1);
    let b = values(3, 2);
    let (y, ys) = conv2d(&x, [1, 2, 5, 5], &w, [3, 2, 3, 3], &b, 1, [1, 1, 1, 1]);
    let (scale, bias, mean, var) = (
        [0.5f32, 2.0, -1.5],
        [0.1f32, -0.2, 0.3],
        [0.05f32, -0.4, 0.25],
        [0.9f32, 0.2, 1.7],
    );
    let plane = ys[2] * ys[3];
    let unfused: Vec<f32> = y
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let c = i / plane % 3;
            (v - mean[c]) / (var[c] + 1e-3).sqrt() * scale[c] + bias[c]
        })
        .collect();
    let (fused, _) = conv2d(&x, [1, 2, 5, 5], &w2, [3, 2, 3, 3], &b2, 1, [1, 1, 1, 1]);
    for (a, b) in unfused.iter().zip(&fused) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "{a} vs {b}");
    }
    assert_eq!(m.outputs[0].name, "z");
    assert_eq!(m.outputs[0].fixed_shape(), Some(vec![1, 3, 5, 5]));
}

#[test]
fn batchnorm_is_kept_when_the_conv_output_has_another_reader() {
    let m = imp(&conv_bn_model(true));
    assert_eq!(ops(&m), vec![Op::Conv2D, Op::BatchNorm, Op::Relu]);
    let bn = &m.operators[1];
    assert_eq!(bn.inputs.len(), 5);
    assert_eq!(
        bn.param("epsilon"),
        Some(&ParamValue::Float(f64::from(1e-3f32)))
    );
}

fn gemm(trans_b: i64, alpha: f32, beta: f32, c: Option<(Vec<i64>, Vec<f32>)>) -> Vec<u8> {
    // A [2, 3], B [3, 4] (or [4, 3] transposed).
    let bvals = values(12, 5);
    let bdims: &[i64] = if trans_b == 1 { &[4, 3] } else { &[3, 4] };
    let mut inits = vec![tf32("B", bdims, &bvals)];
    let mut inputs = vec!["A", "B"];
    if let Some((dims, v)) = &c {
        inits.push(tf32("C", dims, v));
        inputs.push("C");
    }
    let attrs = vec![
        attr_i("transB", trans_b),
        attr_f("alpha", alpha),
        attr_f("beta", beta),
    ];
    model(
        11,
        vec![node("Gemm", "fc", &inputs, &["Y"], attrs)],
        vec![vi("A", FLOAT, &[2, 3])],
        vec![vi("Y", FLOAT, &[2, 4])],
        inits,
    )
}

#[test]
fn gemm_becomes_fully_connected_with_trans_b_alpha_and_beta_folded() {
    let bvals = values(12, 5);
    for trans_b in [0, 1] {
        let m = imp(&gemm(
            trans_b,
            0.5,
            2.0,
            Some((vec![4], vec![1.0, 2.0, 3.0, 4.0])),
        ));
        assert_eq!(ops(&m), vec![Op::FullyConnected]);
        let fc = &m.operators[0];
        let w = const_input(&m, fc, 1);
        assert_eq!(m.tensor(fc.inputs[1]).unwrap().shape, vec![4, 3]);
        for n in 0..4 {
            for k in 0..3 {
                let b = if trans_b == 1 {
                    bvals[n * 3 + k]
                } else {
                    bvals[k * 4 + n]
                };
                assert_eq!(w[n * 3 + k], 0.5 * b);
            }
        }
        assert_eq!(const_input(&m, fc, 2), vec![2.0, 4.0, 6.0, 8.0]);
    }
}

#[test]
fn gemm_with_a_full_c_matrix_adds_it_after_the_fully_connected() {
    let m = imp(&gemm(1, 1.0, 0.5, Some((vec![2, 4], vec![1.0; 8]))));
    assert_eq!(ops(&m), vec![Op::FullyConnected, Op::Add]);
    assert_eq!(const_input(&m, &m.operators[1], 1), vec![0.5; 8]);
}

#[test]
fn gemm_with_a_computed_b_is_a_matmul() {
    let bytes = model(
        13,
        vec![node(
            "Gemm",
            "g",
            &["A", "B"],
            &["Y"],
            vec![attr_i("transA", 1), attr_f("alpha", 3.0)],
        )],
        vec![vi("A", FLOAT, &[3, 2]), vi("B", FLOAT, &[3, 4])],
        vec![vi("Y", FLOAT, &[2, 4])],
        vec![],
    );
    let m = imp(&bytes);
    assert_eq!(ops(&m), vec![Op::Transpose, Op::MatMul, Op::Multiply]);
    assert_eq!(m.outputs[0].fixed_shape(), Some(vec![2, 4]));
}

#[test]
fn matmul_then_add_becomes_one_fully_connected() {
    let w = values(6, 3);
    let bytes = model(
        13,
        vec![
            node("MatMul", "mm", &["x", "W"], &["h"], vec![]),
            node("Add", "add", &["bias", "h"], &["y"], vec![]),
        ],
        vec![vi("x", FLOAT, &[1, 3])],
        vec![vi("y", FLOAT, &[1, 2])],
        vec![tf32("W", &[3, 2], &w), tf32("bias", &[2], &[7.0, 8.0])],
    );
    let (m, stats) = import_with_report(&bytes, &ImportOptions::default(), &mut |_, _| {}).unwrap();
    assert_eq!(ops(&m), vec![Op::FullyConnected]);
    assert_eq!(stats.folded_matmul_add, 1);
    let fc = &m.operators[0];
    assert_eq!(
        const_input(&m, fc, 1),
        vec![w[0], w[2], w[4], w[1], w[3], w[5]]
    );
    assert_eq!(const_input(&m, fc, 2), vec![7.0, 8.0]);
}

#[test]
fn identity_dropout_and_same_type_cast_disappear() {
    let bytes = model(
        13,
        vec![
            node("Identity", "i", &["x"], &["a"], vec![]),
            node("Dropout", "d", &["a"], &["b"], vec![]),
            node("Cast", "c", &["b"], &["c"], vec![attr_i("to", 1)]),
            node("Relu", "r", &["c"], &["y"], vec![]),
        ],
        vec![vi("x", FLOAT, &[2, 2])],
        vec![vi("y", FLOAT, &[2, 2])],
        vec![],
    );
    let (m, stats) = import_with_report(&bytes, &ImportOptions::default(), &mut |_, _| {}).unwrap();
    assert_eq!(ops(&m), vec![Op::Relu]);
    assert_eq!(stats.removed, 3);
    assert_eq!(m.operators[0].inputs, vec![0]);
}

#[test]
fn a_shape_subgraph_folds_into_one_reshape() {
    // y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): x [2, 3, 4] -> [2, 12].
    let bytes = model(
        13,
        vec![
            node("Shape", "s", &["x"], &["s"], vec![]),
            node(
                "Gather",
                "g",
                &["s", "zero"],
                &["n"],
                vec![attr_i("axis", 0)],
            ),
            node("Unsqueeze", "u", &["n", "axes"], &["n1"], vec![]),
            node(
                "Constant",
                "k",
                &[],
                &["m1"],
                vec![attr_t("value", ti64("", &[1], &[-1]))],
            ),
            node(
                "Concat",
                "c",
                &["n1", "m1"],
                &["shape"],
                vec![attr_i("axis", 0)],
            ),
            node("Reshape", "r", &["x", "shape"], &["y"], vec![]),
        ],
        vec![vi("x", FLOAT, &[2, 3, 4])],
        vec![vi("y", FLOAT, &[2, 12])],
        vec![ti64("zero", &[], &[0]), ti64("axes", &[1], &[0])],
    );
    let (m, stats) = import_with_report(&bytes, &ImportOptions::default(), &mut |_, _| {}).unwrap();
    assert_eq!(ops(&m), vec![Op::Reshape]);
    assert_eq!(
        m.operators[0].param("shape"),
        Some(&ParamValue::Ints(vec![2, 12]))
    );
    assert_eq!(stats.folded_shape, 1);
    assert_eq!(stats.folded_constant, 3);
    assert_eq!(stats.constants, 1);
    assert!(
        m.tensors.is_empty(),
        "no constant is stored: {:?}",
        m.tensors
    );
}

#[test]
fn constant_weights_computed_by_a_subgraph_are_folded() {
    // W = Transpose(Wt) feeding a MatMul: folded, then FullyConnected.
    let wt = values(6, 4);
    let bytes = model(
        13,
        vec![
            node("Transpose", "t", &["Wt"], &["W"], vec![]),
            node("MatMul", "mm", &["x", "W"], &["y"], vec![]),
        ],
        vec![vi("x", FLOAT, &[1, 3])],
        vec![vi("y", FLOAT, &[1, 2])],
        vec![tf32("Wt", &[2, 3], &wt)],
    );
    let m = imp(&bytes);
    assert_eq!(ops(&m), vec![Op::FullyConnected]);
    assert_eq!(const_input(&m, &m.operators[0], 1), wt);
}

#[test]
fn size_and_constant_of_shape_become_constants() {
    // y = x + ConstantOfShape(Shape(x), value 1.5) * Size(x): Shape, Size,
    // ConstantOfShape, the Cast and the Mul of constants all fold; only the Add runs.
    let value = tensorvault_onnx::proto::TensorProto {
        name: Some("v".into()),
        dims: vec![1],
        data_type: Some(FLOAT),
        float_data: vec![1.5],
        ..Default::default()
    };
    let bytes = model(
        13,
        vec![
            node("Shape", "s", &["x"], &["s"], vec![]),
            node("Size", "n", &["x"], &["n"], vec![]),
            node(
                "Cast",
                "nf",
                &["n"],
                &["nf"],
                vec![attr_i("to", FLOAT.into())],
            ),
            node(
                "ConstantOfShape",
                "c",
                &["s"],
                &["c"],
                vec![attr_t("value", value)],
            ),
            node("Mul", "m", &["c", "nf"], &["cm"], vec![]),
            node("Add", "a", &["x", "cm"], &["y"], vec![]),
        ],
        vec![vi("x", FLOAT, &[2, 3])],
        vec![vi("y", FLOAT, &[2, 3])],
        vec![],
    );
    let (m, stats) = import_with_report(&bytes, &ImportOptions::default(), &mut |_, _| {}).unwrap();
    assert_eq!(ops(&m), vec![Op::Add]);
    assert!(stats.folded_shape >= 2, "{stats:?}");
    // The Add's constant operand: 1.5 * 6 everywhere.
    assert_eq!(const_input(&m, &m.operators[0], 1), vec![9.0; 6]);
    // A run-time shape input is refused by name.
    let bytes = model(
        13,
        vec![node("ConstantOfShape", "c", &["s"], &["y"], vec![])],
        vec![vi("s", INT64, &[2])],
        vec![vi("y", FLOAT, &[2, 2])],
        vec![],
    );
    let e = import_with_report(&bytes, &ImportOptions::default(), &mut |_, _| {}).unwrap_err();
    assert!(
        matches!(e, tensorvault_onnx::OnnxError::NotConstant { index: 0, .. }),
        "{e}"
    );
}

#[test]
fn mod_comparisons_logic_and_where_fold_on_constants() {
    // Attention's expanded head-count check: kv = Where(Not(Equal(q % kv, 0)) And ..., ...)
    // reduced here to y = x * Where(And(Equal(Mod(7, 4), 3), Not(Less(2, 1))), a, b).
    let bytes = model(
        13,
        vec![
            node("Mod", "m", &["seven", "four"], &["r"], vec![]),
            node("Equal", "e", &["r", "three"], &["eq"], vec![]),
            node("Less", "l", &["two", "one"], &["lt"], vec![]),
            node("Not", "n", &["lt"], &["nl"], vec![]),
            node("And", "a", &["eq", "nl"], &["c"], vec![]),
            node("Where", "w", &["c", "fa", "fb"], &["k"], vec![]),
            node("Mul", "mul", &["x", "k"], &["y"], vec![]),
        ],
        vec![vi("x", FLOAT, &[2])],
        vec![vi("y", FLOAT, &[2])],
        vec![
            ti64("seven", &[], &[7]),
            ti64("four", &[], &[4]),
            ti64("three", &[], &[3]),
            ti64("two", &[], &[2]),
            ti64("one", &[], &[1]),
            tf32("fa", &[2], &[10.0, 20.0]),
            tf32("fb", &[2], &[-1.0, -2.0]),
        ],
    );
    let (m, _) = import_with_report(&bytes, &ImportOptions::default(), &mut |_, _| {}).unwrap();
    assert_eq!(ops(&m), vec![Op::Multiply]);
    assert_eq!(const_input(&m, &m.operators[0], 1), vec![10.0, 20.0]);
    // Mod's sign rules: fmod 0 follows the divisor, fmod 1 the dividend.
    for (fmod, want) in [(0, vec![2.0f32, -2.0]), (1, vec![-1.0, 1.0])] {
        let bytes = model(
            13,
            vec![
                node("Mod", "m", &["p", "q"], &["r"], vec![attr_i("fmod", fmod)]),
                node(
                    "Cast",
                    "c",
                    &["r"],
                    &["rf"],
                    vec![attr_i("to", FLOAT.into())],
                ),
                node("Add", "a", &["x", "rf"], &["y"], vec![]),
            ],
            vec![vi("x", FLOAT, &[2])],
            vec![vi("y", FLOAT, &[2])],
            vec![ti64("p", &[2], &[-7, 7]), ti64("q", &[2], &[3, -3])],
        );
        let (m, _) = import_with_report(&bytes, &ImportOptions::default(), &mut |_, _| {}).unwrap();
        assert_eq!(const_input(&m, &m.operators[0], 1), want, "fmod {fmod}");
    }
    // Integer Mod by zero is a typed error, not a panic.
    let bytes = model(
        13,
        vec![
            node("Mod", "m", &["p", "z"], &["r"], vec![]),
            node(
                "Cast",
                "c",
                &["r"],
                &["rf"],
                vec![attr_i("to", FLOAT.into())],
            ),
            node("Add", "a", &["x", "rf"], &["y"], vec![]),
        ],
        vec![vi("x", FLOAT, &[1])],
        vec![vi("y", FLOAT, &[1])],
        vec![ti64("p", &[1], &[5]), ti64("z", &[1], &[0])],
    );
    let e = import_with_report(&bytes, &ImportOptions::default(), &mut |_, _| {}).unwrap_err();
    assert!(
        matches!(e, tensorvault_onnx::OnnxError::Shape { .. }),
        "{e}"
    );
}
