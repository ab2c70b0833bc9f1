//! The CVC int4 codec (a tensorvault extension): 4-bit codes per value with a per-chunk
//! column normalisation and one affine `(min, step)` pair per row.
//!
//! Embedding dimensions differ in offset and spread, and a row's values differ from the
//! next row's in range; one 4-bit grid per row alone loses the small dimensions (recall@10
//! .72 on SmolLM2's token table), one grid per column alone loses the rows (.78). Both
//! together reach .86 raw and .999 with 4x rescoring at 4.1 bits per value (see
//! `bench/RESULTS.md`, "CVC int4"). Layout of `rows x dim` values (`docs/formats/cvc.md`):
//!
//! ```text
//! per chunk:  offset[dim] f32, scale[dim] f32     (column mean and standard deviation)
//! per row:    min f32 LE, step f32 LE, then ceil(dim / 2) bytes of codes,
//!             value 2k in the low nibble of byte k, value 2k+1 in the high nibble
//!             (the high nibble of the last byte is 0 when dim is odd)
//! encode      z = (x - offset[j]) / scale[j];  min, max over the row's z;
//!             step = (max - min) / 15 (0 when max == min);
//!             code = round_half_even((z - min) / step) clamped to 0..=15 (0 when step == 0)
//! decode      x = (code * step + min) * scale[j] + offset[j]   (f32, never fused)
//! ```
//!
//! The decoder runs the formula 8 lanes at a time with AVX2 where the CPU has it
//! (`row_int4_avx2`); the scalar loop looks `code * step + min` up in a 16-entry table per
//! row. Both give the formula's bits exactly (tested).

use crate::QuantError;

/// Bytes of the per-row parameters (`min` and `step`, f32 each).
pub const ROW_PARAM_BYTES: usize = 8;

/// The largest code.
const MAX_CODE: f32 = 15.0;

/// Payload bytes of one row of `dim` values, `None` on overflow.
#[must_use]
pub fn row_bytes(dim: usize) -> Option<usize> {
    dim.div_ceil(2).checked_add(ROW_PARAM_BYTES)
}

/// The per-chunk column normalisation: `z = (x - offset[j]) / scale[j]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnNorm {
    offset: Vec<f32>,
    scale: Vec<f32>,
}

impl ColumnNorm {
    /// Column means and standard deviations of `values` (`rows x dim`, row-major), summed
    /// in f64. A column with zero (or subnormal) spread gets scale 1.
    ///
    /// # Errors
    /// [`QuantError::NonFinite`] naming the first NaN or infinite value;
    /// [`QuantError::LengthMismatch`] if `values` is not whole rows of `dim` (or `dim` is 0).
    pub fn fit(values: &[f32], dim: usize) -> Result<Self, QuantError> {
        if dim == 0 || !values.len().is_multiple_of(dim) {
            return Err(QuantError::LengthMismatch {
                what: "int4 column fit (values must be whole rows)",
                input: values.len(),
                output: dim,
            });
        }
        if let Some(index) = values.iter().position(|v| !v.is_finite()) {
            return Err(QuantError::NonFinite {
                index,
                value: values[index],
            });
        }
        let rows = values.len() / dim;
        let mut sum = vec![0f64; dim];
        for row in values.chunks_exact(dim) {
            for (s, &v) in sum.iter_mut().zip(row) {
                *s += f64::from(v);
            }
        }
        let n = rows.max(1) as f64;
        let mean: Vec<f64> = sum.iter().map(|s| s / n).collect();
        let mut var = vec![0f64; dim];
        for row in values.chunks_exact(dim) {
            for ((s, &v), m) in var.iter_mut().zip(row).zip(&mean) {
                let d = f64::from(v) - m;
                *s += d * d;
            }
        }
        #[allow(
            clippy::cast_possible_truncation,
            reason = "means and deviations of f32 values fit f32"
        )]
        let (offset, scale) = mean
            .iter()
            .zip(&var)
            .map(|(&m, &v)| {
                let sd = (v / n).sqrt() as f32;
                (m as f32, if sd.is_normal() { sd } else { 1.0 })
            })
            .unzip();
        Ok(ColumnNorm { offset, scale })
    }

    /// Parameters as stored in a file.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] if the two lengths differ or are 0;
    /// [`QuantError::InvalidParam`] for a non-finite offset or a scale that is not a
    /// finite normal positive number.
    pub fn from_parts(offset: Vec<f32>, scale: Vec<f32>) -> Result<Self, QuantError> {
        if offset.len() != scale.len() || offset.is_empty() {
            return Err(QuantError::LengthMismatch {
                what: "int4 column offsets and scales",
                input: offset.len(),
                output: scale.len(),
            });
        }
        if let Some(&o) = offset.iter().find(|o| !o.is_finite()) {
            return Err(QuantError::InvalidParam {
                field: "col_offset",
                value: f64::from(o),
                reason: "must be finite",
            });
        }
        if let Some(&s) = scale.iter().find(|s| !(s.is_normal() && **s > 0.0)) {
            return Err(QuantError::InvalidParam {
                field: "col_scale",
                value: f64::from(s),
                reason: "must be a finite normal number > 0",
            });
        }
        Ok(ColumnNorm { offset, scale })
    }

    /// The column offsets (means).
    #[must_use]
    pub fn offset(&self) -> &[f32] {
        &self.offset
    }

    /// The column scales (standard deviations).
    #[must_use]
    pub fn scale(&self) -> &[f32] {
        &self.scale
    }

    /// Values per row.
    #[must_use]
    pub fn dim(&self) -> usize {
        self.offset.len()
    }

    fn rows_of(
        &self,
        what: &'static str,
        values: usize,
        bytes: usize,
    ) -> Result<usize, QuantError> {
        let dim = self.dim();
        let rb = row_bytes(dim).unwrap_or(usize::MAX);
        let rows = values / dim;
        if !values.is_multiple_of(dim) || rows.checked_mul(rb) != Some(bytes) {
            return Err(QuantError::LengthMismatch {
                what,
                input: values,
                output: bytes,
            });
        }
        Ok(rows)
    }

    /// Encode `values` (whole rows) into `out` (exactly `rows * row_bytes(dim)` bytes).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] for wrong lengths; [`QuantError::NonFinite`] for a
    /// NaN or infinite value, or one whose normalised value overflows f32.
    pub fn encode_rows(&self, values: &[f32], out: &mut [u8]) -> Result<(), QuantError> {
        let dim = self.dim();
        self.rows_of("int4 encode", values.len(), out.len())?;
        let rb = ROW_PARAM_BYTES + dim.div_ceil(2);
        let mut z = vec![0f32; dim];
        for (r, (row, dst)) in values
            .chunks_exact(dim)
            .zip(out.chunks_exact_mut(rb))
            .enumerate()
        {
            let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
            for (j, ((zj, &x), (&o, &s))) in z
                .iter_mut()
                .zip(row)
                .zip(self.offset.iter().zip(&self.scale))
                .enumerate()
            {
                *zj = (x - o) / s;
                if !zj.is_finite() {
                    return Err(QuantError::NonFinite {
                        index: r * dim + j,
                        value: x,
                    });
                }
                lo = lo.min(*zj);
                hi = hi.max(*zj);
            }
            let mut step = (hi - lo) / MAX_CODE;
            if !(step.is_normal()) {
                step = 0.0;
            }
            dst[..4].copy_from_slice(&lo.to_le_bytes());
            dst[4..8].copy_from_slice(&step.to_le_bytes());
            let inv = if step > 0.0 { 1.0 / step } else { 0.0 };
            let code = |v: f32| -> u8 {
                #[allow(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "clamped to 0..=15 first"
                )]
                let c = ((v - lo) * inv).round_ties_even().clamp(0.0, MAX_CODE) as u8;
                c
            };
            for (b, pair) in dst[ROW_PARAM_BYTES..].iter_mut().zip(z.chunks(2)) {
                let low = code(pair[0]);
                let high = pair.get(1).map_or(0, |&v| code(v));
                *b = low | (high << 4);
            }
        }
        Ok(())
    }

    /// Decode `payload` (whole rows) into `out`.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] for wrong lengths; [`QuantError::InvalidParam`] for
    /// a row whose `min` is not finite or whose `step` is negative or not finite, or a
    /// non-zero padding nibble (odd `dim`).
    pub fn decode_rows(&self, payload: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
        let dim = self.dim();
        self.rows_of("int4 decode", out.len(), payload.len())?;
        let rb = ROW_PARAM_BYTES + dim.div_ceil(2);
        for (src, dst) in payload.chunks_exact(rb).zip(out.chunks_exact_mut(dim)) {
            let min = f32::from_le_bytes([src[0], src[1], src[2], src[3]]);
            let step = f32::from_le_bytes([src[4], src[5], src[6], src[7]]);
            if !min.is_finite() {
                return Err(QuantError::InvalidParam {
                    field: "row min",
                    value: f64::from(min),
                    reason: "must be finite",
                });
            }
            if !(step.is_finite() && step >= 0.0) {
                return Err(QuantError::InvalidParam {
                    field: "row step",
                    value: f64::from(step),
                    reason: "must be finite and >= 0",
                });
            }
            let packed = &src[ROW_PARAM_BYTES..];
            if dim % 2 == 1 && packed[packed.len() - 1] >> 4 != 0 {
                return Err(QuantError::InvalidParam {
                    field: "padding nibble",
                    value: f64::from(packed[packed.len() - 1] >> 4),
                    reason: "the high nibble after the last value of an odd row must be 0",
                });
            }
            // t[c] = c * step + min: the decoder's first two f32 operations, done once per
            // code instead of once per value (same operands, same rounding).
            let mut table = [0f32; 16];
            for (c, t) in table.iter_mut().enumerate() {
                *t = f32::from(c as u8) * step + min;
            }
            decode_row(step, min, &table, packed, &self.scale, &self.offset, dst);
        }
        Ok(())
    }
}

/// One row: `out[j] = table[code j] * scale[j] + offset[j]` with `table[c] = c * step +
/// min` (AVX2 where the CPU has it, bit-identical to the scalar loop).
fn decode_row(
    step: f32,
    min: f32,
    table: &[f32; 16],
    packed: &[u8],
    scale: &[f32],
    offset: &[f32],
    out: &mut [f32],
) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if out.len() >= 16 && crate::row_int4_avx2::available() {
        // SAFETY: AVX2 was detected; `scale` and `offset` hold `dim == out.len()` values
        // and `packed` ceil(dim / 2) bytes (the row layout `rows_of` checked).
        done = unsafe { crate::row_int4_avx2::decode_row(step, min, packed, scale, offset, out) };
    }
    decode_row_scalar(table, packed, scale, offset, out, done);
}

/// [`decode_row`] from value `from` (even) on, without SIMD.
fn decode_row_scalar(
    table: &[f32; 16],
    packed: &[u8],
    scale: &[f32],
    offset: &[f32],
    out: &mut [f32],
    from: usize,
) {
    let pairs = out[from..]
        .chunks_mut(2)
        .zip(scale[from..].chunks(2).zip(offset[from..].chunks(2)));
    for ((x, (s, o)), &b) in pairs.zip(&packed[from / 2..]) {
        x[0] = table[usize::from(b & 15)] * s[0] + o[0];
        if let Some(h) = x.get_mut(1) {
            *h = table[usize::from(b >> 4)] * s[1] + o[1];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize, dim: usize) -> Vec<f32> {
        (0..n * dim)
            .map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0 + (i % dim) as f32)
            .collect()
    }

    #[test]
    fn round_trip_error_is_within_half_a_step() {
        for dim in [1, 2, 7, 64, 257, 384] {
            let x = rows(37, dim);
            let c = ColumnNorm::fit(&x, dim).unwrap();
            let mut buf = vec![0u8; 37 * row_bytes(dim).unwrap()];
            c.encode_rows(&x, &mut buf).unwrap();
            let mut y = vec![0f32; x.len()];
            c.decode_rows(&buf, &mut y).unwrap();
            for (r, (xr, yr)) in x.chunks(dim).zip(y.chunks(dim)).enumerate() {
                let p = &buf[r * row_bytes(dim).unwrap()..];
                let step = f32::from_le_bytes(p[4..8].try_into().unwrap());
                for (j, (a, b)) in xr.iter().zip(yr).enumerate() {
                    let tol = (step * 0.5 + 1e-5) * c.scale()[j] + 1e-4;
                    assert!(
                        (a - b).abs() <= tol,
                        "dim {dim} row {r} col {j}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn constant_rows_and_columns_decode_exactly() {
        let x = vec![3.25f32; 5 * 6];
        let c = ColumnNorm::fit(&x, 6).unwrap();
        assert!(c.scale().iter().all(|&s| s == 1.0));
        let mut buf = vec![0u8; 5 * row_bytes(6).unwrap()];
        c.encode_rows(&x, &mut buf).unwrap();
        let mut y = vec![0f32; x.len()];
        c.decode_rows(&buf, &mut y).unwrap();
        assert_eq!(x, y);
    }

    #[test]
    fn non_finite_input_is_named() {
        let mut x = rows(3, 4);
        x[6] = f32::NAN;
        assert!(matches!(
            ColumnNorm::fit(&x, 4),
            Err(QuantError::NonFinite { index: 6, .. })
        ));
    }

    #[test]
    fn crafted_rows_are_refused() {
        let x = rows(2, 3);
        let c = ColumnNorm::fit(&x, 3).unwrap();
        let rb = row_bytes(3).unwrap();
        let mut buf = vec![0u8; 2 * rb];
        c.encode_rows(&x, &mut buf).unwrap();
        let mut y = vec![0f32; 6];
        let mut bad = buf.clone();
        bad[4..8].copy_from_slice(&(-1.0f32).to_le_bytes());
        assert!(matches!(
            c.decode_rows(&bad, &mut y),
            Err(QuantError::InvalidParam {
                field: "row step",
                ..
            })
        ));
        let mut bad = buf.clone();
        bad[0..4].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(matches!(
            c.decode_rows(&bad, &mut y),
            Err(QuantError::InvalidParam {
                field: "row min",
                ..
            })
        ));
        let mut bad = buf.clone();
        bad[rb - 1] |= 0x10;
        assert!(matches!(
            c.decode_rows(&bad, &mut y),
            Err(QuantError::InvalidParam {
                field: "padding nibble",
                ..
            })
        ));
        assert!(matches!(
            c.decode_rows(&buf[..rb], &mut y),
            Err(QuantError::LengthMismatch { .. })
        ));
        assert!(ColumnNorm::from_parts(vec![0.0], vec![0.0]).is_err());
        assert!(ColumnNorm::from_parts(vec![f32::INFINITY], vec![1.0]).is_err());
        assert!(ColumnNorm::from_parts(vec![0.0, 1.0], vec![1.0]).is_err());
    }

    /// The formula of the module doc, value by value (the reference both decode paths
    /// must match bit for bit).
    fn reference(c: &ColumnNorm, payload: &[u8], out: &mut [f32]) {
        let dim = c.dim();
        let rb = row_bytes(dim).unwrap();
        for (src, dst) in payload.chunks_exact(rb).zip(out.chunks_exact_mut(dim)) {
            let min = f32::from_le_bytes(src[0..4].try_into().unwrap());
            let step = f32::from_le_bytes(src[4..8].try_into().unwrap());
            for (j, x) in dst.iter_mut().enumerate() {
                let b = src[ROW_PARAM_BYTES + j / 2];
                let code = f32::from(if j % 2 == 0 { b & 15 } else { b >> 4 });
                *x = (code * step + min) * c.scale()[j] + c.offset()[j];
            }
        }
    }

    proptest::proptest! {
        /// Random codes, row parameters and column norms (any dim, so the SIMD runs of 16
        /// and the scalar tail both run): the decoder gives the reference's bits.
        #[test]
        fn decode_matches_the_formula_bit_for_bit(
            dim in 1usize..80,
            rows in 1usize..5,
            seed in proptest::prelude::any::<u64>(),
        ) {
            let rnd = |i: u64| crate::rotation::splitmix64(seed as u32, i ^ (seed >> 32) << 20);
            let f = |i: u64, lo: f32, span: f32| lo + span * ((rnd(i) >> 40) as f32 / (1u64 << 24) as f32);
            let offset: Vec<f32> = (0..dim as u64).map(|j| f(j, -3.0, 6.0)).collect();
            let scale: Vec<f32> = (0..dim as u64).map(|j| f(1000 + j, 0.01, 4.0)).collect();
            let c = ColumnNorm::from_parts(offset, scale).unwrap();
            let rb = row_bytes(dim).unwrap();
            let mut payload = vec![0u8; rows * rb];
            for (r, row) in payload.chunks_exact_mut(rb).enumerate() {
                let r = r as u64 * 4096;
                row[0..4].copy_from_slice(&f(2000 + r, -5.0, 5.0).to_le_bytes());
                row[4..8].copy_from_slice(&f(3000 + r, 0.0, 0.7).to_le_bytes());
                for (k, b) in row[ROW_PARAM_BYTES..].iter_mut().enumerate() {
                    *b = rnd(5000 + r + k as u64) as u8;
                }
                if dim % 2 == 1 {
                    row[rb - 1] &= 15;
                }
            }
            let mut got = vec![0f32; rows * dim];
            let mut want = vec![1f32; rows * dim];
            c.decode_rows(&payload, &mut got).unwrap();
            reference(&c, &payload, &mut want);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            proptest::prop_assert_eq!(bits(&got), bits(&want));
            // The scalar loop alone (what a CPU without AVX2 runs) gives the same bits.
            let mut scalar = vec![2f32; rows * dim];
            for ((src, dst), want) in payload.chunks_exact(rb).zip(scalar.chunks_exact_mut(dim)).zip(want.chunks_exact(dim)) {
                let min = f32::from_le_bytes(src[0..4].try_into().unwrap());
                let step = f32::from_le_bytes(src[4..8].try_into().unwrap());
                let table: [f32; 16] = std::array::from_fn(|c| f32::from(c as u8) * step + min);
                decode_row_scalar(&table, &src[ROW_PARAM_BYTES..], c.scale(), c.offset(), dst, 0);
                proptest::prop_assert_eq!(bits(dst), bits(want));
            }
        }
    }
}
