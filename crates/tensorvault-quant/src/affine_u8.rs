//! The CVC int8 codec: one affine `(min, scale)` pair per chunk, `u8` codes.
//!
//! Bit-exact with `decompressed` 2.1.1 (see `docs/formats/cvc.md`):
//!
//! ```text
//! min, max = f32 minimum and maximum over every value of the chunk
//! scale    = f32(f32(max - min) / 255), or 1.0 when max == min
//! q        = u8(round_half_even(f32(f32(x - min) / scale)))
//! decode   = f32(f32(q * scale) + min)          -- two roundings, never fused
//! ```
//!
//! Rust never contracts `a * b + c` into a fused multiply-add on its own, so the decode
//! loop below keeps both roundings on every target.

use crate::error::check_len;
use crate::QuantError;

/// The per-chunk parameters of the affine u8 codec.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AffineU8 {
    /// The chunk minimum (decoded value of code 0).
    pub min: f32,
    /// The step between codes.
    pub scale: f32,
}

/// `1.5 * 2^23`: adding and subtracting it rounds an f32 in `[0, 2^22)` to the nearest
/// integer, ties to even, using the default rounding mode (no SSE4.1 `roundps` needed, so
/// the loop vectorises on baseline x86-64).
const RNE_MAGIC: f32 = 12_582_912.0;

impl AffineU8 {
    /// Compute the parameters for `values` exactly as the reference does.
    ///
    /// # Errors
    /// [`QuantError::NonFinite`] naming the first NaN or infinite value (the reference
    /// would silently store a NaN scale).
    pub fn fit(values: &[f32]) -> Result<Self, QuantError> {
        let (min, max) = min_max_finite(values)?;
        Self::from_min_max(min, max)
    }

    /// Parameters for a chunk whose minimum and maximum are already known (e.g. reduced
    /// in parallel with [`min_max_finite`]): the same result as [`AffineU8::fit`].
    ///
    /// # Errors
    /// [`QuantError::InvalidParam`] if `max - min` overflows f32.
    pub fn from_min_max(min: f32, max: f32) -> Result<Self, QuantError> {
        let scale = if max == min { 1.0 } else { (max - min) / 255.0 };
        Self::checked(min, scale)
    }

    /// Parameters as `decompressed` 0.1.0 computed them (legacy v0 files): the stored
    /// scale is the f64 `(f64(max) - f64(min)) / 255`, and values quantize with that scale
    /// rounded to f32. Returns the codec and the f64 scale to store.
    ///
    /// # Errors
    /// As [`AffineU8::fit`].
    pub fn fit_v010(values: &[f32]) -> Result<(Self, f64), QuantError> {
        let (min, max) = min_max_finite(values)?;
        let scale64 = if max == min {
            1.0
        } else {
            (f64::from(max) - f64::from(min)) / 255.0
        };
        #[allow(
            clippy::cast_possible_truncation,
            reason = "the legacy writer quantizes with an f32 scale"
        )]
        let codec = Self::checked(min, scale64 as f32)?;
        Ok((codec, scale64))
    }

    fn checked(min: f32, scale: f32) -> Result<Self, QuantError> {
        if !scale.is_finite() {
            return Err(QuantError::InvalidParam {
                field: "scale",
                value: f64::from(scale),
                reason: "value range max - min overflows f32",
            });
        }
        // A range so small that (max - min) / 255 underflows to zero: the reference would
        // divide by zero; use the smallest positive step instead so codes stay defined.
        let scale = if scale == 0.0 {
            f32::from_bits(1)
        } else {
            scale
        };
        Ok(AffineU8 { min, scale })
    }

    /// Parameters read from a file: `min` and `scale` as stored (f64 in JSON), rounded to
    /// f32 as the reference reader does (legacy files store an unrounded f64 scale).
    ///
    /// # Errors
    /// [`QuantError::InvalidParam`] if either is not finite after rounding to f32.
    pub fn from_stored(min: f64, scale: f64) -> Result<Self, QuantError> {
        #[allow(
            clippy::cast_possible_truncation,
            reason = "rounding to f32 is the format's rule"
        )]
        let (min32, scale32) = (min as f32, scale as f32);
        if !min32.is_finite() {
            return Err(QuantError::InvalidParam {
                field: "min",
                value: min,
                reason: "not a finite f32",
            });
        }
        if !scale32.is_finite() {
            return Err(QuantError::InvalidParam {
                field: "scale",
                value: scale,
                reason: "not a finite f32",
            });
        }
        Ok(AffineU8 {
            min: min32,
            scale: scale32,
        })
    }

    /// Quantize `values` into `codes` with these parameters.
    ///
    /// Values outside `[min, min + 255 * scale]` saturate to 0 or 255 (the reference has no
    /// clamp because it always fits its own parameters; this only matters for callers that
    /// reuse parameters across chunks).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] if the slices differ in length.
    pub fn encode(&self, values: &[f32], codes: &mut [u8]) -> Result<(), QuantError> {
        check_len("affine u8 encode", values.len(), codes.len())?;
        encode_kernel(self.min, self.scale, values, codes);
        Ok(())
    }

    /// Dequantize `codes` into `values`: `f32(f32(q * scale) + min)`.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] if the slices differ in length.
    pub fn decode(&self, codes: &[u8], values: &mut [f32]) -> Result<(), QuantError> {
        check_len("affine u8 decode", codes.len(), values.len())?;
        decode_kernel(self.min, self.scale, codes, values);
        Ok(())
    }
}

/// Define `$name`, which runs `$body` compiled for AVX2 when the CPU has it (detected at
/// run time) and the baseline build of the same safe code otherwise. Results are
/// identical: no fast-math and no FMA in either build (Rust never contracts `a * b + c`).
macro_rules! avx2_dispatch {
    ($name:ident, $avx2:ident, $body:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        fn $name($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 support was checked at run time just above.
                return unsafe { $avx2($($arg),*) };
            }
            $body($($arg),*)
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn $avx2($($arg: $ty),*) -> $ret {
            $body($($arg),*)
        }
    };
}

avx2_dispatch!(encode_kernel, encode_avx2, encode_body, (min: f32, scale: f32, values: &[f32], codes: &mut [u8]) -> ());
avx2_dispatch!(decode_kernel, decode_avx2, decode_body, (min: f32, scale: f32, codes: &[u8], values: &mut [f32]) -> ());
avx2_dispatch!(min_max_kernel, min_max_avx2, min_max_body, (values: &[f32]) -> Result<(f32, f32), QuantError>);

#[inline(always)]
fn encode_body(min: f32, scale: f32, values: &[f32], codes: &mut [u8]) {
    for (x, q) in values.iter().zip(codes.iter_mut()) {
        let v = ((*x - min) / scale).clamp(0.0, 255.0);
        // v + 1.5*2^23 has exponent 2^23, so its low mantissa bits hold round(v) (ties
        // to even); 0 <= round(v) <= 255 fits the low byte. Pure integer ops from here,
        // so the loop vectorises without SSE4.1 rounding or a saturating cast.
        *q = ((v + RNE_MAGIC).to_bits() & 0xff) as u8;
    }
}

#[inline(always)]
fn decode_body(min: f32, scale: f32, codes: &[u8], values: &mut [f32]) {
    for (q, x) in codes.iter().zip(values.iter_mut()) {
        *x = f32::from(*q) * scale + min;
    }
}

/// Minimum and maximum of `values` (`(0, 0)` when empty), rejecting NaN and infinities.
/// Lane-wise so it vectorises; the finiteness test is an OR-reduction without early exit.
///
/// # Errors
/// [`QuantError::NonFinite`] naming the first NaN or infinite value.
pub fn min_max_finite(values: &[f32]) -> Result<(f32, f32), QuantError> {
    min_max_kernel(values)
}

#[inline(always)]
fn min_max_body(values: &[f32]) -> Result<(f32, f32), QuantError> {
    const LANES: usize = 16;
    let mut lo = [f32::INFINITY; LANES];
    let mut hi = [f32::NEG_INFINITY; LANES];
    // Largest magnitude bit pattern: >= 0x7f80_0000 exactly when a NaN or infinity was
    // seen (an integer max vectorises; `x < lo` alone would skip NaNs silently).
    let mut mag = [0u32; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            let x = c[i];
            lo[i] = if x < lo[i] { x } else { lo[i] };
            hi[i] = if x > hi[i] { x } else { hi[i] };
            mag[i] = mag[i].max(x.to_bits() & 0x7fff_ffff);
        }
    }
    for &x in chunks.remainder() {
        lo[0] = if x < lo[0] { x } else { lo[0] };
        hi[0] = if x > hi[0] { x } else { hi[0] };
        mag[0] = mag[0].max(x.to_bits() & 0x7fff_ffff);
    }
    let bad = mag.iter().any(|&m| m >= 0x7f80_0000);
    if bad {
        let index = values
            .iter()
            .position(|x| !x.is_finite())
            .expect("a non-finite value was seen");
        return Err(QuantError::NonFinite {
            index,
            value: values[index],
        });
    }
    let min = lo.iter().copied().fold(f32::INFINITY, f32::min);
    let max = hi.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if values.is_empty() {
        return Ok((0.0, 0.0));
    }
    Ok((min, max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn constant_chunk_gets_scale_one_and_zero_codes() {
        let p = AffineU8::fit(&[0.25; 12]).unwrap();
        assert_eq!(
            p,
            AffineU8 {
                min: 0.25,
                scale: 1.0
            }
        );
        let mut q = [9u8; 12];
        p.encode(&[0.25; 12], &mut q).unwrap();
        assert_eq!(q, [0; 12]);
    }

    #[test]
    fn non_finite_input_is_rejected_with_its_index() {
        let mut v = vec![0.5f32; 40];
        v[33] = f32::NAN;
        assert!(matches!(
            AffineU8::fit(&v),
            Err(QuantError::NonFinite { index: 33, .. })
        ));
        v[33] = 0.0;
        v[2] = f32::NEG_INFINITY;
        assert!(matches!(
            AffineU8::fit(&v),
            Err(QuantError::NonFinite { index: 2, .. })
        ));
    }

    #[test]
    fn stored_params_are_rounded_and_checked() {
        // A legacy (decompressed 0.1.0) f64 scale is used rounded to f32. That is not always
        // the f32 the 2.1.1 writer computes for the same chunk (double rounding).
        let p = AffineU8::from_stored(-1.930582880973816, 0.018260685135336484).unwrap();
        assert_eq!(
            p.scale.to_bits(),
            (0.018260685135336484f64 as f32).to_bits()
        );
        assert_ne!(
            p.scale.to_bits(),
            (0.018260683864355087f64 as f32).to_bits()
        );
        assert!(matches!(
            AffineU8::from_stored(0.0, 1e300),
            Err(QuantError::InvalidParam { field: "scale", .. })
        ));
        assert!(matches!(
            AffineU8::from_stored(f64::NAN, 1.0),
            Err(QuantError::InvalidParam { field: "min", .. })
        ));
    }

    #[test]
    fn magic_rounding_is_half_even() {
        let p = AffineU8 {
            min: 0.0,
            scale: 1.0,
        };
        let mut q = [0u8; 6];
        p.encode(&[0.5, 1.5, 2.5, 254.5, 3.49, 300.0], &mut q)
            .unwrap();
        assert_eq!(q, [0, 2, 2, 254, 3, 255]);
    }

    proptest! {
        #[test]
        fn round_trip_within_half_a_step(v in proptest::collection::vec(-1e6f32..1e6, 1..2000)) {
            let p = AffineU8::fit(&v).unwrap();
            let mut q = vec![0u8; v.len()];
            p.encode(&v, &mut q).unwrap();
            let mut back = vec![0f32; v.len()];
            p.decode(&q, &mut back).unwrap();
            for (a, b) in v.iter().zip(&back) {
                // half a step, plus the f32 rounding of the two decode operations
                let tol = p.scale * 0.5 + (a.abs() + p.min.abs()) * 4.0 * f32::EPSILON;
                prop_assert!((a - b).abs() <= tol, "{} vs {} (scale {})", a, b, p.scale);
            }
        }
    }
}
