//! ConvTranspose: `output_shape` and `auto_pad` resolved to MOBI `padding` and
//! `output_padding` as the ONNX reference does, 1-D through Reshapes, 3-D refused, int8
//! weights quantized per output channel (axis 1 of `[C, M/group, k...]`).

mod common;

use common::*;
use tensorvault_formats::mobi::{Model, OperatorType, ParamValue, Quantization};
use tensorvault_mobi_runtime::{Session, Tensor};
use tensorvault_onnx::{import, ImportOptions, OnnxError, WeightsMode};

fn convt(
    x: &[i64],
    w: &[i64],
    attrs: Vec<tensorvault_onnx::proto::AttributeProto>,
    out: &[i64],
) -> Vec<u8> {
    let n: i64 = w.iter().product();
    model(
        13,
        vec![node("ConvTranspose", "t", &["x", "w"], &["y"], attrs)],
        vec![vi("x", FLOAT, x)],
        vec![vi("y", FLOAT, out)],
        vec![tf32("w", w, &vec![1.0; n as usize])],
    )
}

fn param<'m>(m: &'m Model, key: &str) -> Option<&'m ParamValue> {
    m.operators
        .iter()
        .find(|o| o.op == OperatorType::ConvTranspose2D)
        .and_then(|o| o.param(key))
}

#[test]
fn auto_pad_and_output_shape_follow_the_onnx_reference() {
    // SAME_UPPER, stride 2 on 3x3 with a 3x3 kernel: full 7, target 6, total 1 -> the
    // odd pixel goes to the end (reference), output 6x6.
    let m = imp(&convt(
        &[1, 1, 3, 3],
        &[1, 2, 3, 3],
        vec![
            attr_s("auto_pad", "SAME_UPPER"),
            attr_ints("strides", &[2, 2]),
        ],
        &[1, 2, 6, 6],
    ));
    assert_eq!(
        param(&m, "padding"),
        Some(&ParamValue::Ints(vec![0, 0, 1, 1]))
    );
    // SAME_LOWER puts it at the start.
    let m = imp(&convt(
        &[1, 1, 3, 3],
        &[1, 2, 3, 3],
        vec![
            attr_s("auto_pad", "SAME_LOWER"),
            attr_ints("strides", &[2, 2]),
        ],
        &[1, 2, 6, 6],
    ));
    assert_eq!(
        param(&m, "padding"),
        Some(&ParamValue::Ints(vec![1, 1, 0, 0]))
    );
    // output_shape [10, 8] with strides [3, 2]: full 9x7, one extra row and column.
    let m = imp(&convt(
        &[1, 1, 3, 3],
        &[1, 2, 3, 3],
        vec![
            attr_ints("strides", &[3, 2]),
            attr_ints("output_shape", &[10, 8]),
        ],
        &[1, 2, 10, 8],
    ));
    assert_eq!(
        param(&m, "output_padding"),
        Some(&ParamValue::Ints(vec![1, 1]))
    );
    let x = Tensor::f32(vec![1, 1, 3, 3], vec![1.0; 9]).unwrap();
    let y = Session::new(&m).unwrap().run(&[("x", x)]).unwrap();
    assert_eq!(y[0].1.shape, [1, 2, 10, 8]);
    // The extra last row only gets the (absent) bias: zeros.
    let v = y[0].1.as_f32().unwrap();
    assert!(v[9 * 8..10 * 8].iter().all(|&e| e == 0.0));
    assert!(v[..8].iter().any(|&e| e != 0.0));
}

#[test]
fn one_d_runs_as_2d_and_3d_is_refused() {
    let m = imp(&convt(&[1, 1, 3], &[1, 2, 3], vec![], &[1, 2, 5]));
    assert_eq!(
        ops(&m),
        vec![
            OperatorType::Reshape,
            OperatorType::ConvTranspose2D,
            OperatorType::Reshape
        ]
    );
    let x = Tensor::f32(vec![1, 1, 3], vec![1.0, 2.0, 3.0]).unwrap();
    let y = Session::new(&m).unwrap().run(&[("x", x)]).unwrap();
    assert_eq!(y[0].1.shape, [1, 2, 5]);
    // A ones kernel of 3 over [1, 2, 3]: running sums 1, 3, 6, 5, 3.
    assert_eq!(&y[0].1.as_f32().unwrap()[..5], &[1.0, 3.0, 6.0, 5.0, 3.0]);
    let e = import(
        &convt(&[1, 1, 2, 2, 2], &[1, 1, 2, 2, 2], vec![], &[1, 1, 3, 3, 3]),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, OnnxError::Shape { .. }), "{e}");
}

#[test]
fn int8_weights_per_output_channel() {
    // W [C=2, M=3, 4, 4] (96 values): int8 per axis 1.
    let bytes = convt(&[1, 2, 4, 4], &[2, 3, 4, 4], vec![], &[1, 3, 7, 7]);
    let opts = ImportOptions {
        weights: WeightsMode::Int8,
        ..ImportOptions::default()
    };
    let m = import(&bytes, &opts).unwrap();
    let w = m
        .tensors
        .iter()
        .find(|t| t.shape == [2, 3, 4, 4])
        .expect("weight");
    assert!(
        matches!(&w.quant, Some(Quantization::PerAxis { axis: 1, scales, .. }) if scales.len() == 3),
        "{:?}",
        w.quant
    );
}

#[test]
fn bad_geometry_is_refused() {
    for (w, attrs) in [
        // W's first axis must be the input channels.
        (vec![2, 2, 3, 3], vec![]),
        // kernel_shape disagreeing with W.
        (vec![1, 2, 3, 3], vec![attr_ints("kernel_shape", &[2, 2])]),
        // pads removing more than the full output.
        (vec![1, 2, 3, 3], vec![attr_ints("pads", &[4, 4, 4, 4])]),
        // Attribute values at the ends of i64: typed errors, no overflow.
        (
            vec![1, 2, 3, 3],
            vec![attr_ints("pads", &[i64::MAX, 0, i64::MAX, 0])],
        ),
        (
            vec![1, 2, 3, 3],
            vec![
                attr_ints("pads", &[i64::MAX, 0, 0, 0]),
                attr_ints("output_shape", &[i64::MAX, i64::MAX]),
            ],
        ),
        (
            vec![1, 2, 3, 3],
            vec![attr_ints("strides", &[i64::MAX, i64::MAX])],
        ),
        // output_shape larger than the full output with SAME: a negative begin pad.
        (
            vec![1, 2, 3, 3],
            vec![
                attr_s("auto_pad", "SAME_UPPER"),
                attr_ints("output_shape", &[20, 20]),
            ],
        ),
    ] {
        let e = import(
            &convt(&[1, 1, 3, 3], &w, attrs, &[1, 2, 5, 5]),
            &ImportOptions::default(),
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                OnnxError::Shape { .. }
                    | OnnxError::UnsupportedAttribute { .. }
                    | OnnxError::TensorTooLarge { .. }
            ),
            "{w:?}: {e}"
        );
    }
}
