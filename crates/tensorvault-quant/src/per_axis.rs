//! Per-axis affine quantization: one [`Affine`] quantizer per slice along any axis of a
//! row-major tensor (TFLite's `QuantizationParameters.quantized_dimension`).
//!
//! A tensor of shape `[d0, .., dk, ..]` quantized along axis `k` is seen as
//! `[outer, channels, inner]` with `channels = dk`, `outer = d0 * .. * d(k-1)` and
//! `inner = d(k+1) * ..`; element `i` belongs to channel `(i / inner) % channels`.
//! For weights (OIHW conv, `[out, in]` fully connected) the axis is 0 and each output
//! channel is one contiguous run.
//!
//! ```
//! use tensorvault_quant::per_axis::PerAxis;
//! // Two output channels whose ranges differ by 1000x: each gets its own scale.
//! let w = [0.001f32, -0.002, 0.0005, 1.0, -2.0, 0.5];
//! let pa = PerAxis::<i8>::fit_symmetric(&w, 2, 3)?;
//! let mut q = [0i8; 6];
//! pa.quantize(&w, &mut q)?;
//! let mut back = [0f32; 6];
//! pa.dequantize(&q, &mut back)?;
//! assert!((back[1] - w[1]).abs() < 1e-4);
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use crate::affine::{first_non_finite, Affine, AffineCode};
use crate::error::check_len;
use crate::QuantError;

/// One affine quantizer per channel of a `[outer, channels, inner]` view of a tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct PerAxis<T: AffineCode> {
    inner: usize,
    params: Vec<Affine<T>>,
}

impl<T: AffineCode> PerAxis<T> {
    /// Quantizers from stored parameters (`params.len()` channels of `inner` elements).
    ///
    /// # Errors
    /// [`QuantError::InvalidParam`] if there are no channels or `inner` is 0.
    pub fn new(params: Vec<Affine<T>>, inner: usize) -> Result<Self, QuantError> {
        if params.is_empty() || inner == 0 {
            return Err(QuantError::InvalidParam {
                field: "channels",
                value: params.len() as f64,
                reason: "per-axis quantization needs >= 1 channel of >= 1 element",
            });
        }
        Ok(PerAxis { inner, params })
    }

    /// Fit each channel symmetrically ([`Affine::fit_symmetric`]: zero point 0,
    /// `scale = max|x| / QMAX` over the channel's elements).
    ///
    /// # Errors
    /// [`QuantError::InvalidParam`] if `channels * inner` is 0 or does not divide
    /// `x.len()` (or the code type is unsigned), [`QuantError::NonFinite`] (index into `x`).
    pub fn fit_symmetric(x: &[f32], channels: usize, inner: usize) -> Result<Self, QuantError> {
        let block = channels.checked_mul(inner).unwrap_or(0);
        if block == 0 || !x.len().is_multiple_of(block) {
            return Err(QuantError::InvalidParam {
                field: "channels",
                value: channels as f64,
                reason: "channels * inner must be > 0 and divide the element count",
            });
        }
        first_non_finite(x)?;
        let mut max_abs = vec![0f32; channels];
        for (i, run) in x.chunks_exact(inner).enumerate() {
            let m = &mut max_abs[i % channels];
            *m = run.iter().fold(*m, |m, v| m.max(v.abs()));
        }
        let params = max_abs
            .iter()
            .map(|&m| Affine::fit_symmetric(&[m]))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(params, inner)
    }

    /// The per-channel quantizers, in channel order.
    pub fn channels(&self) -> &[Affine<T>] {
        &self.params
    }

    /// Elements per channel run (the product of the dimensions after the axis).
    pub fn inner(&self) -> usize {
        self.inner
    }

    fn check(&self, what: &'static str, n: usize, out: usize) -> Result<(), QuantError> {
        check_len(what, n, out)?;
        let block = self.params.len() * self.inner;
        if !n.is_multiple_of(block) {
            return Err(QuantError::LengthMismatch {
                what,
                input: n,
                output: n - n % block,
            });
        }
        Ok(())
    }

    /// Quantize `x` into `out` (same length, a multiple of `channels * inner`).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`], [`QuantError::NonFinite`].
    pub fn quantize(&self, x: &[f32], out: &mut [T]) -> Result<(), QuantError> {
        self.check("per-axis quantize", x.len(), out.len())?;
        first_non_finite(x)?;
        let c = self.params.len();
        for (i, (xs, os)) in x
            .chunks_exact(self.inner)
            .zip(out.chunks_exact_mut(self.inner))
            .enumerate()
        {
            self.params[i % c].quantize(xs, os)?;
        }
        Ok(())
    }

    /// Dequantize `q` into `out` (same length, a multiple of `channels * inner`).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`].
    pub fn dequantize(&self, q: &[T], out: &mut [f32]) -> Result<(), QuantError> {
        self.check("per-axis dequantize", q.len(), out.len())?;
        let c = self.params.len();
        for (i, (qs, os)) in q
            .chunks_exact(self.inner)
            .zip(out.chunks_exact_mut(self.inner))
            .enumerate()
        {
            self.params[i % c].dequantize(qs, os)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_one_of_a_3d_tensor_gets_one_scale_per_slice() {
        // shape [2, 3, 2], axis 1: channel c holds elements with (i / 2) % 3 == c.
        let x: Vec<f32> = (0..12)
            .map(|i| [1.0f32, 10.0, 100.0][(i / 2) % 3] * if i % 2 == 0 { 1.0 } else { -0.5 })
            .collect();
        let pa = PerAxis::<i8>::fit_symmetric(&x, 3, 2).unwrap();
        let scales: Vec<f32> = pa.channels().iter().map(|a| a.scale()).collect();
        assert_eq!(scales, vec![1.0 / 127.0, 10.0 / 127.0, 100.0 / 127.0]);
        assert!(pa.channels().iter().all(|a| a.zero_point() == 0));
        let mut q = vec![0i8; 12];
        pa.quantize(&x, &mut q).unwrap();
        assert_eq!(q[0], 127);
        assert_eq!(q[5], -64); // -5.0 / (10/127) = -63.5 -> -64 (ties to even)
        let mut back = vec![0f32; 12];
        pa.dequantize(&q, &mut back).unwrap();
        for (i, (a, b)) in x.iter().zip(&back).enumerate() {
            assert!(
                (a - b).abs() <= scales[(i / 2) % 3] / 2.0 + 1e-6,
                "{i}: {a} {b}"
            );
        }
    }

    #[test]
    fn per_channel_beats_per_tensor_on_channels_of_different_range() {
        let x: Vec<f32> = (0..64)
            .map(|i| ((i % 7) as f32 - 3.0) * if i < 32 { 1e-3 } else { 1.0 })
            .collect();
        let pa = PerAxis::<i8>::fit_symmetric(&x, 2, 32).unwrap();
        let pt = Affine::<i8>::fit(&x).unwrap();
        let (mut q1, mut q2) = (vec![0i8; 64], vec![0i8; 64]);
        pa.quantize(&x, &mut q1).unwrap();
        pt.quantize(&x, &mut q2).unwrap();
        let (mut b1, mut b2) = (vec![0f32; 64], vec![0f32; 64]);
        pa.dequantize(&q1, &mut b1).unwrap();
        pt.dequantize(&q2, &mut b2).unwrap();
        let err = |b: &[f32]| {
            x[..32]
                .iter()
                .zip(b)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max)
        };
        assert!(err(&b1) * 50.0 < err(&b2), "{} vs {}", err(&b1), err(&b2));
    }

    #[test]
    fn bad_shapes_and_values_are_typed_errors() {
        assert!(PerAxis::<i8>::fit_symmetric(&[1.0; 6], 4, 1).is_err());
        assert!(PerAxis::<i8>::fit_symmetric(&[1.0; 6], 0, 1).is_err());
        assert!(matches!(
            PerAxis::<i8>::fit_symmetric(&[1.0, f32::NAN], 2, 1),
            Err(QuantError::NonFinite { index: 1, .. })
        ));
        assert!(PerAxis::<u8>::fit_symmetric(&[1.0; 2], 2, 1).is_err());
        assert!(PerAxis::<i8>::new(vec![], 1).is_err());
        let pa = PerAxis::<i8>::fit_symmetric(&[1.0; 4], 2, 2).unwrap();
        assert!(pa.dequantize(&[0; 3], &mut [0.0; 3]).is_err());
        assert!(pa.quantize(&[0.0; 4], &mut [0; 3]).is_err());
    }
}
