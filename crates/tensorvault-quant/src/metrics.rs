//! Reconstruction error metrics for any codec: max abs error, RMSE, relative RMSE and SNR.
//!
//! ```
//! use tensorvault_quant::metrics::ErrorMetrics;
//! let m = ErrorMetrics::compare(&[1.0, -2.0, 3.0], &[1.0, -2.5, 3.0])?;
//! assert_eq!(m.max_abs_error, 0.5);
//! assert!((m.rmse - (0.25f64 / 3.0).sqrt()).abs() < 1e-12);
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use crate::error::check_len;
use crate::QuantError;

/// Error of a reconstruction `x'` of `x`, accumulated in f64.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ErrorMetrics {
    /// Values compared.
    pub count: usize,
    /// `max |x - x'|`.
    pub max_abs_error: f64,
    /// `sqrt(mean((x - x')^2))`.
    pub rmse: f64,
    /// RMSE divided by the RMS of `x` (0 when both are 0, infinite when only `x` is 0).
    pub rel_rmse: f64,
    /// `10 log10(sum x^2 / sum (x - x')^2)` in dB (infinite for an exact reconstruction).
    pub snr_db: f64,
}

impl ErrorMetrics {
    /// Compare `original` with `reconstructed`.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] if the lengths differ, [`QuantError::NonFinite`]
    /// naming the first NaN/Inf in either slice.
    pub fn compare(original: &[f32], reconstructed: &[f32]) -> Result<Self, QuantError> {
        check_len("error metrics", original.len(), reconstructed.len())?;
        let (mut sig, mut noise, mut max) = (0f64, 0f64, 0f64);
        for (i, (&a, &b)) in original.iter().zip(reconstructed).enumerate() {
            if !(a.is_finite() && b.is_finite()) {
                let value = if a.is_finite() { b } else { a };
                return Err(QuantError::NonFinite { index: i, value });
            }
            let e = f64::from(a) - f64::from(b);
            sig += f64::from(a) * f64::from(a);
            noise += e * e;
            max = max.max(e.abs());
        }
        let count = original.len();
        let rmse = if count == 0 {
            0.0
        } else {
            (noise / count as f64).sqrt()
        };
        let rel_rmse = if noise == 0.0 {
            0.0
        } else {
            (noise / sig).sqrt()
        };
        let snr_db = if noise == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (sig / noise).log10()
        };
        Ok(ErrorMetrics {
            count,
            max_abs_error: max,
            rmse,
            rel_rmse,
            snr_db,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_degenerate_inputs() {
        let m = ErrorMetrics::compare(&[1.0, 2.0], &[1.0, 2.0]).unwrap();
        assert_eq!((m.rmse, m.rel_rmse, m.max_abs_error), (0.0, 0.0, 0.0));
        assert!(m.snr_db.is_infinite());
        let z = ErrorMetrics::compare(&[], &[]).unwrap();
        assert_eq!(z.count, 0);
        let m = ErrorMetrics::compare(&[0.0, 0.0], &[1.0, 0.0]).unwrap();
        assert!(m.rel_rmse.is_infinite());
        // 10x smaller error amplitude is 20 dB.
        let m = ErrorMetrics::compare(&[1.0; 4], &[0.9; 4]).unwrap();
        assert!((m.snr_db - 20.0).abs() < 1e-4, "{}", m.snr_db);
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(matches!(
            ErrorMetrics::compare(&[1.0], &[]),
            Err(QuantError::LengthMismatch { .. })
        ));
        assert!(matches!(
            ErrorMetrics::compare(&[1.0, 2.0], &[1.0, f32::NAN]),
            Err(QuantError::NonFinite { index: 1, .. })
        ));
    }
}
