//! Per-tensor and per-channel affine quantization to int8 / uint8 / int16 (scale + zero
//! point), and checked f16, for the model format's quantized weights.
//!
//! `fit` takes the range `[min(x, 0), max(x, 0)]` (so 0 is exactly representable),
//! `scale = (max - min) / (QMAX - QMIN)` and `zero_point = clamp(QMIN - round(min / scale))`.
//! Encoding is `q = clamp(round_ties_even(x * (1/scale)) + zero_point, QMIN, QMAX)`,
//! decoding `x' = (q - zero_point) * scale`; for values inside the fitted range
//! `|x - x'| <= scale / 2` (up to f32 rounding).
//!
//! ```
//! use tensorvault_quant::affine::Affine;
//! let w = [-0.5f32, 0.0, 0.25, 1.0];
//! let a = Affine::<i8>::fit(&w)?;
//! let mut q = [0i8; 4];
//! a.quantize(&w, &mut q)?;
//! let mut back = [0f32; 4];
//! a.dequantize(&q, &mut back)?;
//! assert!(w.iter().zip(&back).all(|(x, y)| (x - y).abs() <= a.scale() / 2.0 + 1e-7));
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use std::marker::PhantomData;

use crate::error::check_len;
use crate::QuantError;

mod sealed {
    pub trait Sealed {}
    impl Sealed for i8 {}
    impl Sealed for u8 {}
    impl Sealed for i16 {}
}

/// An integer code type of the affine quantizer (sealed: `i8`, `u8`, `i16`).
pub trait AffineCode: sealed::Sealed + Copy + Default + 'static {
    /// Smallest code.
    const QMIN: i32;
    /// Largest code.
    const QMAX: i32;
    /// Type name for messages.
    const NAME: &'static str;
    /// Narrow an in-range `i32` (callers clamp first).
    fn from_i32(v: i32) -> Self;
    /// Widen.
    fn to_i32(self) -> i32;
}

macro_rules! code {
    ($t:ty, $name:literal) => {
        impl AffineCode for $t {
            const QMIN: i32 = <$t>::MIN as i32;
            const QMAX: i32 = <$t>::MAX as i32;
            const NAME: &'static str = $name;
            #[inline(always)]
            fn from_i32(v: i32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_i32(self) -> i32 {
                i32::from(self)
            }
        }
    };
}
code!(i8, "int8");
code!(u8, "uint8");
code!(i16, "int16");

/// Scale and zero point of an affine quantizer to code type `T`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine<T: AffineCode> {
    scale: f32,
    zero_point: i32,
    _code: PhantomData<T>,
}

pub(crate) fn first_non_finite(x: &[f32]) -> Result<(), QuantError> {
    if x.iter().fold(true, |ok, v| ok & v.is_finite()) {
        return Ok(());
    }
    let index = x.iter().position(|v| !v.is_finite()).unwrap_or(0);
    Err(QuantError::NonFinite {
        index,
        value: x[index],
    })
}

/// `round_ties_even` for |y| < 2^22 by the 1.5 * 2^23 trick, which vectorises on every
/// x86-64 (no SSE4.1 needed).
#[inline(always)]
fn round_even_small(y: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (y + MAGIC) - MAGIC
}

impl<T: AffineCode> Affine<T> {
    /// A quantizer from stored parameters.
    ///
    /// # Errors
    /// [`QuantError::InvalidParam`] unless `scale` is finite and > 0 and `zero_point` is a
    /// valid code of `T`.
    pub fn new(scale: f32, zero_point: i32) -> Result<Self, QuantError> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(QuantError::InvalidParam {
                field: "scale",
                value: f64::from(scale),
                reason: "must be finite and > 0",
            });
        }
        if !(T::QMIN..=T::QMAX).contains(&zero_point) {
            return Err(QuantError::InvalidParam {
                field: "zero_point",
                value: f64::from(zero_point),
                reason: "outside the code type's range",
            });
        }
        Ok(Affine {
            scale,
            zero_point,
            _code: PhantomData,
        })
    }

    /// Fit to the range of `x` widened to include 0 (all-zero input: scale 1).
    ///
    /// # Errors
    /// [`QuantError::NonFinite`] naming the first NaN/Inf.
    pub fn fit(x: &[f32]) -> Result<Self, QuantError> {
        first_non_finite(x)?;
        let (lo, hi) = x
            .iter()
            .fold((0f32, 0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let span = f64::from(hi) - f64::from(lo);
        let scale = (span / f64::from(T::QMAX - T::QMIN)) as f32;
        let scale = if scale > 0.0 && scale.is_finite() {
            scale
        } else {
            1.0
        };
        let zp = (f64::from(T::QMIN) - (f64::from(lo) / f64::from(scale)).round()) as i32;
        Self::new(scale, zp.clamp(T::QMIN, T::QMAX))
    }

    /// Fit symmetrically: zero point 0 and `scale = max|x| / QMAX` (all-zero input:
    /// scale 1), so codes lie in `-QMAX..=QMAX` (for int8, -127..=127, as TFLite's
    /// per-channel weights). Only for signed code types; for `u8` the zero point would
    /// not be a valid code and [`QuantError::InvalidParam`] is returned.
    ///
    /// # Errors
    /// [`QuantError::NonFinite`] naming the first NaN/Inf, [`QuantError::InvalidParam`]
    /// for an unsigned code type.
    pub fn fit_symmetric(x: &[f32]) -> Result<Self, QuantError> {
        if T::QMIN >= 0 {
            return Err(QuantError::InvalidParam {
                field: "code type",
                value: f64::from(T::QMIN),
                reason: "symmetric quantization needs a signed code type",
            });
        }
        first_non_finite(x)?;
        let max_abs = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = (f64::from(max_abs) / f64::from(T::QMAX)) as f32;
        let scale = if scale > 0.0 && scale.is_finite() {
            scale
        } else {
            1.0
        };
        Self::new(scale, 0)
    }

    /// The scale.
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// The zero point.
    pub fn zero_point(&self) -> i32 {
        self.zero_point
    }

    /// Quantize `x` into `out` (same length).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`], [`QuantError::NonFinite`].
    pub fn quantize(&self, x: &[f32], out: &mut [T]) -> Result<(), QuantError> {
        check_len(T::NAME, x.len(), out.len())?;
        first_non_finite(x)?;
        let inv = 1.0 / self.scale;
        let zp = self.zero_point as f32;
        // Clamp in the float domain (exact for these integer bounds) so the rounding
        // trick's range holds and the cast cannot saturate.
        let (lo, hi) = (T::QMIN as f32, T::QMAX as f32);
        for (v, o) in x.iter().zip(out.iter_mut()) {
            let q = (round_even_small((v * inv).clamp(-70_000.0, 70_000.0)) + zp).clamp(lo, hi);
            *o = T::from_i32(q as i32);
        }
        Ok(())
    }

    /// Dequantize `q` into `out` (same length).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`].
    pub fn dequantize(&self, q: &[T], out: &mut [f32]) -> Result<(), QuantError> {
        check_len(T::NAME, q.len(), out.len())?;
        let zp = self.zero_point as f32;
        for (c, o) in q.iter().zip(out.iter_mut()) {
            *o = (c.to_i32() as f32 - zp) * self.scale;
        }
        Ok(())
    }
}

/// One affine quantizer per channel of a row-major `[channels, channel_len]` tensor
/// (axis 0, the output-channel axis of a weight matrix).
#[derive(Debug, Clone, PartialEq)]
pub struct PerChannel<T: AffineCode> {
    channel_len: usize,
    params: Vec<Affine<T>>,
}

impl<T: AffineCode> PerChannel<T> {
    /// Fit each of `channels` contiguous rows of `x` separately.
    ///
    /// # Errors
    /// [`QuantError::InvalidParam`] if `channels` is 0 or does not divide `x.len()`,
    /// [`QuantError::NonFinite`] with the index into `x`.
    pub fn fit(x: &[f32], channels: usize) -> Result<Self, QuantError> {
        if channels == 0 || !x.len().is_multiple_of(channels) {
            return Err(QuantError::InvalidParam {
                field: "channels",
                value: channels as f64,
                reason: "must be > 0 and divide the element count",
            });
        }
        first_non_finite(x)?;
        let channel_len = x.len() / channels;
        let params = if channel_len == 0 {
            vec![Affine::fit(&[])?; channels]
        } else {
            x.chunks_exact(channel_len)
                .map(Affine::fit)
                .collect::<Result<_, _>>()?
        };
        Ok(PerChannel {
            channel_len,
            params,
        })
    }

    /// The per-channel quantizers.
    pub fn channels(&self) -> &[Affine<T>] {
        &self.params
    }

    /// Quantize `x` (`channels * channel_len` values) into `out`.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`], [`QuantError::NonFinite`] (index into `x`).
    pub fn quantize(&self, x: &[f32], out: &mut [T]) -> Result<(), QuantError> {
        let n = self.params.len() * self.channel_len;
        check_len("per-channel quantize (input)", n, x.len())?;
        check_len("per-channel quantize (output)", n, out.len())?;
        first_non_finite(x)?;
        if self.channel_len > 0 {
            for ((a, xs), os) in self
                .params
                .iter()
                .zip(x.chunks_exact(self.channel_len))
                .zip(out.chunks_exact_mut(self.channel_len))
            {
                a.quantize(xs, os)?;
            }
        }
        Ok(())
    }

    /// Dequantize `q` into `out`.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`].
    pub fn dequantize(&self, q: &[T], out: &mut [f32]) -> Result<(), QuantError> {
        let n = self.params.len() * self.channel_len;
        check_len("per-channel dequantize (input)", n, q.len())?;
        check_len("per-channel dequantize (output)", n, out.len())?;
        if self.channel_len > 0 {
            for ((a, qs), os) in self
                .params
                .iter()
                .zip(q.chunks_exact(self.channel_len))
                .zip(out.chunks_exact_mut(self.channel_len))
            {
                a.dequantize(qs, os)?;
            }
        }
        Ok(())
    }
}

/// f32 -> f16 bits for weights, rejecting what f16 cannot hold instead of storing
/// infinities: NaN/Inf input and finite values beyond ±65504 (after rounding).
///
/// # Errors
/// [`QuantError::LengthMismatch`], [`QuantError::NonFinite`], [`QuantError::OutOfRange`].
pub fn to_f16_checked(x: &[f32], out: &mut [u16]) -> Result<(), QuantError> {
    first_non_finite(x)?;
    crate::float::f32_to_f16_bits(x, out)?;
    if out
        .iter()
        .fold(false, |acc, h| acc | (h & 0x7fff >= 0x7c00))
    {
        let index = out.iter().position(|h| h & 0x7fff >= 0x7c00).unwrap_or(0);
        return Err(QuantError::OutOfRange {
            index,
            value: x[index],
            target: "f16",
        });
    }
    Ok(())
}

#[cfg(test)]
#[path = "affine_tests.rs"]
mod tests;
