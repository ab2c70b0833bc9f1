//! Tests of the affine quantizers (a child module of `affine`).

use super::*;
use proptest::prelude::*;

fn check_bound<T: AffineCode>(x: &[f32]) -> Result<(), TestCaseError> {
    let a = Affine::<T>::fit(x).unwrap();
    let mut q = vec![T::default(); x.len()];
    a.quantize(x, &mut q).unwrap();
    let mut y = vec![0f32; x.len()];
    a.dequantize(&q, &mut y).unwrap();
    for (i, (v, w)) in x.iter().zip(&y).enumerate() {
        let tol = a.scale() * 0.5 * (1.0 + 1e-5) + v.abs() * 1e-6;
        prop_assert!(
            (v - w).abs() <= tol,
            "{} at {}: |{} - {}| > {}",
            T::NAME,
            i,
            v,
            w,
            tol
        );
    }
    Ok(())
}

#[test]
fn zero_is_exact_and_params_are_checked() {
    let x = [-1.0f32, 0.0, 3.0];
    let a = Affine::<u8>::fit(&x).unwrap();
    let mut q = [0u8; 3];
    a.quantize(&x, &mut q).unwrap();
    let mut y = [1f32; 3];
    a.dequantize(&q, &mut y).unwrap();
    assert_eq!(y[1], 0.0);
    assert!(Affine::<i8>::new(0.0, 0).is_err());
    assert!(Affine::<i8>::new(f32::NAN, 0).is_err());
    assert!(Affine::<i8>::new(1.0, 128).is_err());
    assert!(Affine::<u8>::new(1.0, -1).is_err());
    let z = Affine::<i16>::fit(&[0.0; 4]).unwrap();
    assert_eq!(z.scale(), 1.0);
}

#[test]
fn bad_inputs_are_typed_errors() {
    assert!(matches!(
        Affine::<i8>::fit(&[1.0, f32::INFINITY]),
        Err(QuantError::NonFinite { index: 1, .. })
    ));
    let a = Affine::<i8>::new(0.1, 0).unwrap();
    let mut q = [0i8; 2];
    assert!(matches!(
        a.quantize(&[1.0], &mut q),
        Err(QuantError::LengthMismatch { .. })
    ));
    assert!(matches!(
        a.quantize(&[1.0, f32::NAN], &mut q),
        Err(QuantError::NonFinite { index: 1, .. })
    ));
    assert!(matches!(
        PerChannel::<i8>::fit(&[1.0; 10], 3),
        Err(QuantError::InvalidParam { .. })
    ));
    assert!(matches!(
        PerChannel::<i8>::fit(&[1.0; 10], 0),
        Err(QuantError::InvalidParam { .. })
    ));
    let mut h = [0u16; 3];
    assert!(matches!(
        to_f16_checked(&[1.0, 7.0e4, 2.0], &mut h),
        Err(QuantError::OutOfRange { index: 1, .. })
    ));
    assert!(matches!(
        to_f16_checked(&[f32::NAN, 1.0, 2.0], &mut h),
        Err(QuantError::NonFinite { index: 0, .. })
    ));
    to_f16_checked(&[1.0, 65504.0, -2.0], &mut h).unwrap();
}

#[test]
fn out_of_range_values_saturate() {
    let a = Affine::<i8>::new(0.01, 0).unwrap();
    let mut q = [0i8; 3];
    a.quantize(&[1.0e9, -1.0e9, 0.5], &mut q).unwrap();
    assert_eq!(q, [127, -128, 50]);
}

#[test]
fn per_channel_fits_each_row() {
    let x = [1.0f32, -1.0, 0.5, 100.0, -50.0, 25.0];
    let pc = PerChannel::<i8>::fit(&x, 2).unwrap();
    assert!(pc.channels()[0].scale() < pc.channels()[1].scale());
    let mut q = [0i8; 6];
    pc.quantize(&x, &mut q).unwrap();
    let mut y = [0f32; 6];
    pc.dequantize(&q, &mut y).unwrap();
    for (i, (v, w)) in x.iter().zip(&y).enumerate() {
        assert!((v - w).abs() <= pc.channels()[i / 3].scale() * 0.5 + 1e-5);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn bound_holds_for_every_code_type(x in proptest::collection::vec(-1.0e4f32..1.0e4, 0..400), shift in -1.0e4f32..1.0e4) {
        let x: Vec<f32> = x.iter().map(|v| v * 1e-3 + shift * 1e-3).collect();
        check_bound::<i8>(&x)?;
        check_bound::<u8>(&x)?;
        check_bound::<i16>(&x)?;
    }
}
