//! Resize and Upsample: the importer's per-opset rules (which inputs, which coordinate
//! modes, axes and keep_aspect_ratio_policy resolved to every axis, opset 10's nearest
//! rounding) and the numbers the reference runtime computes from the result.

mod common;

use common::*;
use tensorvault_formats::mobi::{Model, OperatorType, ParamValue};
use tensorvault_mobi_runtime::{Session, Tensor};
use tensorvault_onnx::{import, ImportOptions, OnnxError};

fn resize_model(
    opset: i64,
    op: &str,
    inputs: &[&str],
    attrs: Vec<tensorvault_onnx::proto::AttributeProto>,
    inits: Vec<tensorvault_onnx::proto::TensorProto>,
    out: &[i64],
) -> Vec<u8> {
    model(
        opset,
        vec![node(op, "r", inputs, &["y"], attrs)],
        vec![vi("x", FLOAT, &[1, 1, 2, 2])],
        vec![vi("y", FLOAT, out)],
        inits,
    )
}

fn param<'m>(m: &'m Model, key: &str) -> Option<&'m ParamValue> {
    m.operators[0].param(key)
}

fn run(m: &Model) -> (Vec<usize>, Vec<f32>) {
    let x = Tensor::f32(vec![1, 1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let got = Session::new(m).unwrap().run(&[("x", x)]).unwrap();
    let t = &got[0].1;
    (t.shape.clone(), t.as_f32().unwrap().to_vec())
}

#[test]
fn opset_19_scales_and_sizes() {
    let m = imp(&resize_model(
        19,
        "Resize",
        &["x", "", "s"],
        vec![attr_s("mode", "nearest")],
        vec![tf32("s", &[4], &[1.0, 1.0, 2.0, 2.0])],
        &[1, 1, 4, 4],
    ));
    assert_eq!(ops(&m), vec![OperatorType::Resize]);
    assert_eq!(
        param(&m, "scales"),
        Some(&ParamValue::Floats(vec![1.0, 1.0, 2.0, 2.0]))
    );
    assert_eq!(param(&m, "sizes"), None);
    let (shape, y) = run(&m);
    assert_eq!(shape, [1, 1, 4, 4]);
    assert_eq!(&y[..8], &[1., 1., 2., 2., 1., 1., 2., 2.]);
    // sizes: only `sizes` is written (the runtime derives out / in).
    let m = imp(&resize_model(
        19,
        "Resize",
        &["x", "", "", "z"],
        vec![attr_s("mode", "linear")],
        vec![ti64("z", &[4], &[1, 1, 1, 3])],
        &[1, 1, 1, 3],
    ));
    assert_eq!(
        param(&m, "sizes"),
        Some(&ParamValue::Ints(vec![1, 1, 1, 3]))
    );
    assert_eq!(param(&m, "scales"), None);
    assert_eq!(run(&m).0, [1, 1, 1, 3]);
}

#[test]
fn axes_and_keep_aspect_ratio_resolve_to_every_axis() {
    // axes [3, 2] with sizes [7, 8] and not_larger: scale min(7/2, 8/2) = 3.5 on both.
    let m = imp(&resize_model(
        19,
        "Resize",
        &["x", "", "", "z"],
        vec![
            attr_ints("axes", &[3, 2]),
            attr_s("keep_aspect_ratio_policy", "not_larger"),
        ],
        vec![ti64("z", &[2], &[7, 8])],
        &[1, 1, 7, 7],
    ));
    assert_eq!(
        param(&m, "scales"),
        Some(&ParamValue::Floats(vec![1.0, 1.0, 3.5, 3.5]))
    );
    assert_eq!(
        param(&m, "sizes"),
        Some(&ParamValue::Ints(vec![1, 1, 7, 7]))
    );
    assert_eq!(run(&m).0, [1, 1, 7, 7]);
    // axes before opset 18 is refused.
    let e = import(
        &resize_model(
            13,
            "Resize",
            &["x", "", "s"],
            vec![attr_ints("axes", &[2, 3])],
            vec![tf32("s", &[2], &[2.0, 2.0])],
            &[1, 1, 4, 4],
        ),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            &e,
            OnnxError::UnsupportedAttribute {
                attribute: "axes",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn coordinate_modes_by_opset() {
    for (opset, mode, ok) in [
        (11, "tf_half_pixel_for_nn", true),
        (13, "tf_half_pixel_for_nn", false),
        (18, "half_pixel_symmetric", false),
        (19, "half_pixel_symmetric", true),
    ] {
        let bytes = resize_model(
            opset,
            "Resize",
            &["x", "", "s"],
            vec![attr_s("coordinate_transformation_mode", mode)],
            vec![tf32("s", &[4], &[1.0, 1.0, 2.0, 2.0])],
            &[1, 1, 4, 4],
        );
        let r = import(&bytes, &ImportOptions::default());
        assert_eq!(r.is_ok(), ok, "opset {opset} {mode}: {:?}", r.err());
    }
    // Antialias needs opset 18 and a linear or cubic mode.
    let bytes = resize_model(
        13,
        "Resize",
        &["x", "", "s"],
        vec![attr_s("mode", "linear"), attr_i("antialias", 1)],
        vec![tf32("s", &[4], &[1.0, 1.0, 0.5, 0.5])],
        &[1, 1, 1, 1],
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    assert!(
        matches!(
            &e,
            OnnxError::UnsupportedAttribute {
                attribute: "antialias",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn opset_10_and_upsample_are_asymmetric() {
    // Resize-10 nearest, upsampling: floor.
    let m = imp(&resize_model(
        10,
        "Resize",
        &["x", "s"],
        vec![],
        vec![tf32("s", &[4], &[1.0, 1.0, 1.5, 1.5])],
        &[1, 1, 3, 3],
    ));
    assert_eq!(
        param(&m, "coordinate_transformation_mode"),
        Some(&ParamValue::Str("asymmetric".into()))
    );
    assert_eq!(
        param(&m, "nearest_mode"),
        Some(&ParamValue::Str("floor".into()))
    );
    // x / 1.5 floored: 0, 0, 1 on both axes.
    assert_eq!(run(&m).1, [1., 1., 2., 1., 1., 2., 3., 3., 4.]);
    // Upsample-7 (scales attribute) and Upsample-9 (scales input), linear.
    let a = imp(&model(
        7,
        vec![node(
            "Upsample",
            "u",
            &["x"],
            &["y"],
            vec![
                attr_s("mode", "linear"),
                tensorvault_onnx::proto::AttributeProto {
                    name: Some("scales".into()),
                    r#type: Some(6), // FLOATS
                    floats: vec![1.0, 1.0, 2.0, 2.0],
                    ..Default::default()
                },
            ],
        )],
        vec![vi("x", FLOAT, &[1, 1, 2, 2])],
        vec![vi("y", FLOAT, &[1, 1, 4, 4])],
        vec![],
    ));
    let b = imp(&resize_model(
        9,
        "Upsample",
        &["x", "s"],
        vec![attr_s("mode", "linear")],
        vec![tf32("s", &[4], &[1.0, 1.0, 2.0, 2.0])],
        &[1, 1, 4, 4],
    ));
    let (ya, yb) = (run(&a).1, run(&b).1);
    assert_eq!(ya, yb);
    // asymmetric linear: x / 2 -> 0, 0.5, 1, 1.5 (clamped).
    assert_eq!(&ya[..4], &[1.0, 1.5, 2.0, 2.0]);
    // Mixed up- and downsampling has no single opset-10 nearest rounding.
    let e = import(
        &resize_model(
            10,
            "Resize",
            &["x", "s"],
            vec![],
            vec![tf32("s", &[4], &[1.0, 1.0, 2.0, 0.5])],
            &[1, 1, 4, 1],
        ),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            &e,
            OnnxError::UnsupportedAttribute {
                attribute: "scales",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn run_time_scales_and_bad_inputs_are_refused() {
    // scales computed at run time: not a constant.
    let bytes = model(
        13,
        vec![node("Resize", "r", &["x", "", "s"], &["y"], vec![])],
        vec![vi("x", FLOAT, &[1, 1, 2, 2]), vi("s", FLOAT, &[4])],
        vec![vi("y", FLOAT, &[1, 1, 4, 4])],
        vec![],
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    assert!(matches!(&e, OnnxError::NotConstant { index: 2, .. }), "{e}");
    // An output over the tensor limit (sizes at the end of i64) is refused at import.
    let bytes = resize_model(
        13,
        "Resize",
        &["x", "", "", "z"],
        vec![],
        vec![ti64("z", &[4], &[1, 1, i64::MAX, i64::MAX])],
        &[1, 1, 4, 4],
    );
    let e = import(&bytes, &ImportOptions::default()).unwrap_err();
    assert!(matches!(&e, OnnxError::TensorTooLarge { .. }), "{e}");
    // Neither scales nor sizes; both; the wrong count; a zero scale; tf_crop without roi.
    for (inputs, inits, attrs) in [
        (vec!["x"], vec![], vec![]),
        (
            vec!["x", "", "s", "z"],
            vec![
                tf32("s", &[4], &[1.0, 1.0, 2.0, 2.0]),
                ti64("z", &[4], &[1, 1, 4, 4]),
            ],
            vec![],
        ),
        (
            vec!["x", "", "s"],
            vec![tf32("s", &[2], &[2.0, 2.0])],
            vec![],
        ),
        (
            vec!["x", "", "s"],
            vec![tf32("s", &[4], &[1.0, 0.0, 2.0, 2.0])],
            vec![],
        ),
        (
            vec!["x", "", "s"],
            vec![tf32("s", &[4], &[1.0, 1.0, 2.0, 2.0])],
            vec![attr_s(
                "coordinate_transformation_mode",
                "tf_crop_and_resize",
            )],
        ),
    ] {
        let bytes = resize_model(13, "Resize", &inputs, attrs, inits, &[1, 1, 4, 4]);
        let e = import(&bytes, &ImportOptions::default()).unwrap_err();
        assert!(
            matches!(
                e,
                OnnxError::BadAttribute { .. }
                    | OnnxError::UnsupportedAttribute { .. }
                    | OnnxError::Shape { .. }
            ),
            "{inputs:?}: {e}"
        );
    }
}
