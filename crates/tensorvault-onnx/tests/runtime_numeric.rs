//! Imported graphs run by the reference runtime (tensorvault-mobi-runtime) give ONNX's
//! results, computed here by hand: the opset-dependent lowerings and the folds.

mod common;

use common::*;
use tensorvault_mobi_runtime::{Data, Session, Tensor};
use tensorvault_onnx::proto::{AttributeProto, TensorProto};

/// Import a one-node model on input `x` of `shape` and run it; outputs in order.
fn run(
    opset: i64,
    op: &str,
    ins: &[&str],
    outs: &[(&str, &[i64])],
    attrs: Vec<AttributeProto>,
    (shape, x): (&[i64], Vec<f32>),
    inits: Vec<TensorProto>,
) -> Vec<Vec<f32>> {
    let mut inputs = vec!["x"];
    inputs.extend_from_slice(ins);
    let names: Vec<&str> = outs.iter().map(|(n, _)| *n).collect();
    let ovi = outs.iter().map(|(n, s)| vi(n, FLOAT, s)).collect();
    let m = imp(&model(
        opset,
        vec![node(op, "n", &inputs, &names, attrs)],
        vec![vi("x", FLOAT, shape)],
        ovi,
        inits,
    ));
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let out = Session::new(&m)
        .unwrap()
        .run(&[("x", Tensor::f32(dims, x).unwrap())])
        .unwrap();
    out.into_iter()
        .map(|(_, t)| match t.data {
            Data::F32(v) => v,
            other => panic!("{other:?}"),
        })
        .collect()
}

fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{a:?} vs {b:?}");
    }
}

#[test]
fn softmax_before_13_normalizes_over_the_flattened_tail() {
    let x: Vec<f32> = (0..24).map(|i| (i as f32) * 0.1).collect();
    let got = run(
        11,
        "Softmax",
        &[],
        &[("y", &[2, 3, 4])],
        vec![attr_i("axis", 1)],
        (&[2, 3, 4], x.clone()),
        vec![],
    );
    let mut want = Vec::new();
    for row in x.chunks(12) {
        let mx = row.iter().copied().fold(f32::MIN, f32::max);
        let e: Vec<f32> = row.iter().map(|v| (v - mx).exp()).collect();
        let s: f32 = e.iter().sum();
        want.extend(e.iter().map(|v| v / s));
    }
    close(&got[0], &want);
}

#[test]
fn gemm_with_trans_a_alpha_and_beta() {
    // A' = A^T with A [3, 2]; B [3, 4]; Y = 0.5 * A'B + 2 * C.
    let a: Vec<f32> = values(6, 1);
    let b = values(12, 2);
    let c = [1.0f32, -1.0, 0.5, 0.0];
    let got = run(
        13,
        "Gemm",
        &["B", "C"],
        &[("y", &[2, 4])],
        vec![
            attr_i("transA", 1),
            attr_f("alpha", 0.5),
            attr_f("beta", 2.0),
        ],
        (&[3, 2], a.clone()),
        vec![tf32("B", &[3, 4], &b), tf32("C", &[4], &c)],
    );
    let mut want = vec![0f32; 8];
    for i in 0..2 {
        for j in 0..4 {
            let dot: f32 = (0..3).map(|k| a[k * 2 + i] * b[k * 4 + j]).sum();
            want[i * 4 + j] = 0.5 * dot + 2.0 * c[j];
        }
    }
    close(&got[0], &want);
}

#[test]
fn slice_with_a_negative_step_and_pad_edge() {
    let x: Vec<f32> = (0..10).map(|i| i as f32).collect();
    let got = run(
        13,
        "Slice",
        &["s", "e", "a", "st"],
        &[("y", &[4])],
        vec![],
        (&[10], x.clone()),
        vec![
            ti64("s", &[1], &[-1]),
            ti64("e", &[1], &[i64::MIN]),
            ti64("a", &[1], &[0]),
            ti64("st", &[1], &[-3]),
        ],
    );
    close(&got[0], &[9.0, 6.0, 3.0, 0.0]);
    let got = run(
        11,
        "Pad",
        &["p"],
        &[("y", &[2, 5])],
        vec![attr_s("mode", "edge")],
        (&[2, 2], vec![1.0, 2.0, 3.0, 4.0]),
        vec![ti64("p", &[4], &[0, 1, 0, 2])],
    );
    close(&got[0], &[1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0, 4.0]);
}

#[test]
fn split_by_num_outputs_and_reduce_sum_with_axes_input() {
    let x: Vec<f32> = (0..5).map(|i| i as f32).collect();
    let got = run(
        18,
        "Split",
        &[],
        &[("a", &[3]), ("b", &[2])],
        vec![attr_i("num_outputs", 2)],
        (&[5], x),
        vec![],
    );
    close(&got[0], &[0.0, 1.0, 2.0]);
    close(&got[1], &[3.0, 4.0]);
    let got = run(
        13,
        "ReduceSum",
        &["ax"],
        &[("y", &[2])],
        vec![attr_i("keepdims", 0)],
        (&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        vec![ti64("ax", &[1], &[-1])],
    );
    close(&got[0], &[6.0, 15.0]);
}

#[test]
fn clip_and_leaky_relu_keep_their_parameters() {
    let x = vec![-8.0, -1.0, 0.5, 7.0];
    let got = run(
        13,
        "Clip",
        &["lo", "hi"],
        &[("y", &[4])],
        vec![],
        (&[4], x.clone()),
        vec![tf32("lo", &[], &[0.0]), tf32("hi", &[], &[6.0])],
    );
    close(&got[0], &[0.0, 0.0, 0.5, 6.0]);
    let got = run(
        13,
        "LeakyRelu",
        &[],
        &[("y", &[4])],
        vec![attr_f("alpha", 0.1)],
        (&[4], x),
        vec![],
    );
    close(&got[0], &[-0.8, -0.1, 0.5, 7.0]);
}

#[test]
fn a_rank_3_matmul_plus_bias_is_one_fully_connected() {
    // x [2, 3, 4] @ W [4, 5] + b [5]: FullyConnected over the last axis.
    let x = values(24, 7);
    let w = values(20, 8);
    let b = values(5, 9);
    let bytes = model(
        13,
        vec![
            node("MatMul", "mm", &["x", "W"], &["h"], vec![]),
            node("Add", "add", &["h", "b"], &["y"], vec![]),
        ],
        vec![vi("x", FLOAT, &[2, 3, 4])],
        vec![vi("y", FLOAT, &[2, 3, 5])],
        vec![tf32("W", &[4, 5], &w), tf32("b", &[5], &b)],
    );
    let m = imp(&bytes);
    assert_eq!(
        ops(&m),
        vec![tensorvault_formats::mobi::OperatorType::FullyConnected]
    );
    let out = Session::new(&m)
        .unwrap()
        .run(&[("x", Tensor::f32(vec![2, 3, 4], x.clone()).unwrap())])
        .unwrap();
    assert_eq!(out[0].1.shape, vec![2, 3, 5]);
    let Data::F32(got) = &out[0].1.data else {
        panic!()
    };
    let want: Vec<f32> = (0..6)
        .flat_map(|r| {
            let x = &x;
            let (w, b) = (&w, &b);
            (0..5).map(move |j| b[j] + (0..4).map(|k| x[r * 4 + k] * w[k * 5 + j]).sum::<f32>())
        })
        .collect();
    close(got, &want);
}

#[test]
fn clip_with_min_above_max_gives_max() {
    // ONNX Clip is min(max(x, min), max): with min 2 > max 1 every value becomes 1, NaN
    // stays NaN (conformance case clip_min_greater_than_max).
    let y = run(
        13,
        "Clip",
        &["lo", "hi"],
        &[("y", &[4])],
        vec![],
        (&[4], vec![-2.0, 0.0, 6.0, f32::NAN]),
        vec![tf32("lo", &[], &[2.0]), tf32("hi", &[], &[1.0])],
    );
    assert_eq!(&y[0][..3], &[1.0, 1.0, 1.0]);
    assert!(y[0][3].is_nan());
}

#[test]
fn reshape_to_an_empty_dimension_keeps_it_empty() {
    // allowzero = 1: [0, 3, 4] -> [3, 4, 0] (conformance case reshape_allowzero_reordered);
    // the resolved target's 0 must not read as "copy the input dimension".
    let m = imp(&model(
        14,
        vec![node(
            "Reshape",
            "r",
            &["x", "s"],
            &["y"],
            vec![attr_i("allowzero", 1)],
        )],
        vec![vi("x", FLOAT, &[0, 3, 4])],
        vec![vi("y", FLOAT, &[3, 4, 0])],
        vec![ti64("s", &[3], &[3, 4, 0])],
    ));
    let out = Session::new(&m)
        .unwrap()
        .run(&[("x", Tensor::f32(vec![0, 3, 4], vec![]).unwrap())])
        .unwrap();
    assert_eq!(out[0].1.shape, [3, 4, 0]);
}

/// Graph outputs no operator computes — a constant (an initializer through Identity, which
/// the importer folds), the graph input itself, and one value listed under two names — are
/// copied by Identity operators: the file writes, reads back and runs to ONNX's outputs.
#[test]
fn passthrough_and_constant_outputs_convert_and_run() {
    let bytes = model(
        13,
        vec![
            node("Relu", "r", &["x"], &["y"], vec![]),
            node("Identity", "i", &["c"], &["k"], vec![]),
            node("Identity", "j", &["x"], &["same"], vec![]),
            node("Identity", "l", &["y"], &["y2"], vec![]),
        ],
        vec![vi("x", FLOAT, &[3])],
        vec![
            vi("y", FLOAT, &[3]),
            vi("k", FLOAT, &[2, 2]),
            vi("same", FLOAT, &[3]),
            vi("y2", FLOAT, &[3]),
        ],
        vec![tf32("c", &[2, 2], &[0.5, -1.5, 2.5, -3.5])],
    );
    let dir = tempfile::tempdir().unwrap();
    let (src, dst) = (dir.path().join("m.onnx"), dir.path().join("m.mobi"));
    std::fs::write(&src, &bytes).unwrap();
    let opts = tensorvault_onnx::ImportOptions::default();
    tensorvault_onnx::convert_file(&src, &dst, &opts, false, &mut |_, _| {}).unwrap();
    let m = tensorvault_formats::mobi::Model::open(&dst).unwrap();
    let x = [-1.0, 0.0, 2.0];
    let out = Session::new(&m)
        .unwrap()
        .run(&[("x", Tensor::f32(vec![3], x.to_vec()).unwrap())])
        .unwrap();
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["y", "k", "same", "y2"]);
    assert_eq!(out[0].1.as_f32().unwrap(), &[0.0, 0.0, 2.0]);
    assert_eq!(out[1].1.shape, vec![2, 2]);
    assert_eq!(out[1].1.as_f32().unwrap(), &[0.5, -1.5, 2.5, -3.5]);
    assert_eq!(out[2].1.as_f32().unwrap(), &x);
    assert_eq!(out[3].1.as_f32().unwrap(), &[0.0, 0.0, 2.0]);
}
