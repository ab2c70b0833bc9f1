//! The row-gain envelope (TQTC version 6): a version 2, 3, 4, 5 or 7 segment (kept byte for
//! byte but for its magic, version and bits) preceded by one gain code per row part, multiplied into the inner segment's
//! decoding. Byte layout: `docs/formats/quant.md` §13.
//!
//! Why: nearest-neighbour ranking by inner products is hurt most by the part of a row's
//! error that lies along the row itself (for a query close to the row, the score error is
//! mostly `cos(q, x) * <x, e> / |x|`). [`wrap`] picks each row part's gain so the decoding
//! is an unbiased inner-product estimate, `<x, g x̂> = |x|^2` (RaBitQ's correction), which
//! removes that component exactly; on SmolLM2's token table it lifts recall@10 at 3.4
//! bits per value from .81 to .85 (bench/RESULTS.md, "Session 13: emb-recall").
//!
//! ```
//! use tensorvault_quant::ecsq::{encode_to_fit, EcsqParams};
//! use tensorvault_quant::segment_v6::{decode, envelope_len, wrap};
//! let x: Vec<f32> = (0..4096).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 1e-3).collect();
//! let (width, first) = (576u16, 64u16); // rows of 576; the run starts 64 values into a row
//! let budget = 1728 - envelope_len(x.len(), width, first)?;
//! let p = EcsqParams { bits: 5, block_log2: 10, seed: 7, rotate: true, lanes_log2: 0 };
//! let inner = encode_to_fit(&p, &x, budget)?.expect("fits");
//! let bytes = wrap(&inner, &x, width, first)?;
//! assert!(bytes.len() <= 1728);
//! let mut y = Vec::new();
//! decode(&bytes, x.len(), &mut y)?;
//! assert_eq!(y.len(), x.len());
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use crate::error::{corrupt, segment_prefix};
use crate::layout::{
    BITS_OFFSET, MAGIC, V6_FIRST_OFFSET, V6_GAIN_BYTES, V6_GAIN_DIV, V6_GAIN_ZERO, V6_HEADER_LEN,
    V6_INNER_SKIP, V6_INNER_VERSIONS, V6_INNER_VERSION_OFFSET, V6_RESERVED_OFFSET,
    V6_VALUES_OFFSET, V6_VERSION, V6_WIDTH_OFFSET, V7_MAX_BITS, V7_MIN_BITS, V7_VERSION,
    VERSION_OFFSET,
};
use crate::segment_v5::decode_any;
use crate::QuantError;

/// Number of row parts (gains) of a run of `n` values of rows of `width` starting
/// `first` values into a row: `ceil((first + n) / width)`.
///
/// # Errors
/// [`QuantError::CorruptField`] for `width == 0`, `first >= width`, or `n` outside
/// `1..=u32::MAX`.
pub fn parts(n: usize, width: u16, first: u16) -> Result<usize, QuantError> {
    if n == 0 || u32::try_from(n).is_err() {
        return Err(corrupt(
            "values",
            V6_VALUES_OFFSET,
            n as u64,
            "must be in 1..=2^32-1",
        ));
    }
    if width == 0 {
        return Err(corrupt("width", V6_WIDTH_OFFSET, 0, "must be >= 1"));
    }
    if first >= width {
        return Err(corrupt(
            "first",
            V6_FIRST_OFFSET,
            first.into(),
            "must be below the row width",
        ));
    }
    // u64: first + n < 2^33, no overflow; the count is at most n + 1.
    let parts = (u64::from(first) + n as u64).div_ceil(u64::from(width));
    Ok(parts as usize)
}

/// Bytes the envelope adds to its inner segment: the header and one gain code per row
/// part, less the inner segment's magic, version and bits, which it does not store.
///
/// # Errors
/// As [`parts`].
pub fn envelope_len(n: usize, width: u16, first: u16) -> Result<usize, QuantError> {
    Ok(V6_HEADER_LEN + parts(n, width, first)? * V6_GAIN_BYTES - V6_INNER_SKIP)
}

/// The gain of code `c`: `1 + (c - 128) / 2048` (exact in f32).
#[must_use]
pub fn gain_of(c: u8) -> f32 {
    1.0 + (f32::from(c) - f32::from(V6_GAIN_ZERO)) / V6_GAIN_DIV
}

/// The gain code of one row part (encoder policy): the unbiased-estimator gain
/// `sum x^2 / sum x * x_hat` (f64), as the nearest code, clamped to the codes' range
/// (0.9375..=1.0620); the code of 1 where the dot product is not positive (nothing to
/// correct, e.g. an all-zero part).
#[must_use]
pub fn gain_code(x: &[f32], x_hat: &[f32]) -> u8 {
    gain_code_against(x, x, x_hat)
}

/// The gain code of one row part whose coded values `target` are the row `reference`
/// less an offset the decoder adds back (a centred embedding row: `target = x - m`):
/// `sum reference * target / sum reference * x_hat` (f64), so that `<x, m + g x_hat> =
/// |x|^2`; rounded, clamped and defaulted as [`gain_code`], which is this with
/// `reference = target = x`.
#[must_use]
pub fn gain_code_against(reference: &[f32], target: &[f32], x_hat: &[f32]) -> u8 {
    let (mut xx, mut xy) = (0f64, 0f64);
    for ((&r, &t), &b) in reference.iter().zip(target).zip(x_hat) {
        xx += f64::from(r) * f64::from(t);
        xy += f64::from(r) * f64::from(b);
    }
    let g = xx / xy;
    if !(xy > 0.0 && g.is_finite()) {
        return V6_GAIN_ZERO;
    }
    let c = ((g - 1.0) * f64::from(V6_GAIN_DIV)).round() + f64::from(V6_GAIN_ZERO);
    c.clamp(0.0, 255.0) as u8
}

/// Wrap `inner` (a version 2, 3, 4, 5 or 7 segment of `x`'s quantization) in a v6 envelope
/// whose gains make each row part's decoding an unbiased inner-product estimate of `x`
/// ([`gain_code`]; gain 1 for a part whose decoding the gain would take beyond the f32
/// range, which [`SegmentV6::decode`] refuses). `width` is the row width of the tensor `x` comes from and `first` the
/// position of `x[0]` inside its row. The result is `envelope_len` bytes longer than
/// `inner`.
///
/// # Errors
/// As [`parts`]; the inner segment's parse and decode errors;
/// [`QuantError::LengthMismatch`] when it does not decode to `x.len()` values;
/// [`QuantError::UnsupportedVersion`] for an inner version other than 2..=5 and 7.
pub fn wrap(inner: &[u8], x: &[f32], width: u16, first: u16) -> Result<Vec<u8>, QuantError> {
    wrap_against(inner, x, x, width, first)
}

/// [`wrap`] for a segment that codes `x`, the run of rows `reference` less an offset the
/// reader adds back after decoding (a centred embedding block: `x = reference - m`, the
/// store adds `m` after the envelope's decode): each row part's gain is
/// [`gain_code_against`]`(reference, x, x_hat)`, so the decoding plus the offset is an
/// unbiased inner-product estimate of the reference row. The bytes are a version 6
/// envelope like any other ([`decode`] is unchanged); with `reference == x` this is
/// [`wrap`].
///
/// # Errors
/// As [`wrap`]; [`QuantError::LengthMismatch`] when `reference` and `x` differ in length.
pub fn wrap_against(
    inner: &[u8],
    reference: &[f32],
    x: &[f32],
    width: u16,
    first: u16,
) -> Result<Vec<u8>, QuantError> {
    crate::error::check_len("v6 reference values", reference.len(), x.len())?;
    let count = parts(x.len(), width, first)?;
    let version = match inner.get(VERSION_OFFSET) {
        Some(v) if V6_INNER_VERSIONS.contains(v) && inner.len() > BITS_OFFSET => *v,
        other => {
            return Err(QuantError::UnsupportedVersion {
                version: other.copied().unwrap_or(0),
                offset: VERSION_OFFSET,
            })
        }
    };
    let mut dec = Vec::new();
    decode_any(inner, x.len(), &mut dec)?;
    crate::error::check_len("v6 inner values", dec.len(), x.len())?;
    let mut out = Vec::with_capacity(V6_HEADER_LEN + count + inner.len() - V6_INNER_SKIP);
    out.extend_from_slice(&MAGIC);
    out.push(V6_VERSION);
    out.push(inner[BITS_OFFSET]);
    out.push(version);
    out.push(0);
    out.extend_from_slice(&(x.len() as u32).to_le_bytes());
    out.extend_from_slice(&width.to_le_bytes());
    out.extend_from_slice(&first.to_le_bytes());
    out.extend(row_parts(x.len(), width, first).map(|r| {
        let c = gain_code_against(&reference[r.clone()], &x[r.clone()], &dec[r.clone()]);
        // A gain that takes a decoded value past f32's range would not decode: gain 1.
        let g = gain_of(c);
        if dec[r].iter().all(|v| (v * g).is_finite()) {
            c
        } else {
            V6_GAIN_ZERO
        }
    }));
    out.extend_from_slice(&inner[V6_INNER_SKIP..]);
    Ok(out)
}

/// The index ranges of the row parts of a run (`parts` validated the arguments).
fn row_parts(n: usize, width: u16, first: u16) -> impl Iterator<Item = std::ops::Range<usize>> {
    let w = usize::from(width);
    let head = (w - usize::from(first)).min(n);
    std::iter::once(0..head).chain((head..n).step_by(w).map(move |s| s..(s + w).min(n)))
}

/// A v6 envelope whose header is validated and whose gain codes are present (every
/// code is a valid gain; the inner segment is checked by its own parser when decoded).
#[derive(Clone, Debug)]
pub struct SegmentV6<'a> {
    bits: u8,
    inner_version: u8,
    n: usize,
    width: u16,
    first: u16,
    gains: &'a [u8],
    inner_rest: &'a [u8],
}

impl<'a> SegmentV6<'a> {
    /// Validate the header of `bytes` as a v6 envelope and check its gain codes are
    /// present.
    ///
    /// # Errors
    /// [`QuantError::Truncated`] (`v6 header`, `v6 gains`), [`QuantError::BadMagic`],
    /// [`QuantError::UnsupportedVersion`], [`QuantError::CorruptField`] (`bits`,
    /// `inner_version`, `reserved`, `values`, `width`, `first`).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, QuantError> {
        let present = bytes.len();
        let (h, bits) = match segment_prefix(bytes, "v6 header", V6_HEADER_LEN, V6_VERSION) {
            Ok(found) => found,
            // A version 7 inner segment's codes are up to 12 bits wide (the prefix checks
            // passed but for the width: the header is present).
            Err(QuantError::CorruptField { field: "bits", .. })
                if bytes[V6_INNER_VERSION_OFFSET] == V7_VERSION =>
            {
                let bits = bytes[BITS_OFFSET];
                if !(V7_MIN_BITS..=V7_MAX_BITS).contains(&bits) {
                    return Err(corrupt(
                        "bits",
                        BITS_OFFSET,
                        bits.into(),
                        "must be in 2..=12 around a version 7 segment",
                    ));
                }
                (&bytes[..V6_HEADER_LEN], bits)
            }
            Err(e) => return Err(e),
        };
        let inner_version = h[V6_INNER_VERSION_OFFSET];
        if !V6_INNER_VERSIONS.contains(&inner_version) {
            return Err(corrupt(
                "inner_version",
                V6_INNER_VERSION_OFFSET,
                inner_version.into(),
                "must be 2, 3, 4, 5 or 7",
            ));
        }
        if h[V6_RESERVED_OFFSET] != 0 {
            return Err(corrupt(
                "reserved",
                V6_RESERVED_OFFSET,
                h[V6_RESERVED_OFFSET].into(),
                "must be zero",
            ));
        }
        let le16 = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]);
        let n = u32::from_le_bytes([
            h[V6_VALUES_OFFSET],
            h[V6_VALUES_OFFSET + 1],
            h[V6_VALUES_OFFSET + 2],
            h[V6_VALUES_OFFSET + 3],
        ]) as usize;
        let (width, first) = (le16(V6_WIDTH_OFFSET), le16(V6_FIRST_OFFSET));
        let count = parts(n, width, first)?;
        // count <= n + 1 <= 2^32: no overflow in u64.
        let gains_end = V6_HEADER_LEN as u64 + count as u64 * V6_GAIN_BYTES as u64;
        if gains_end > present as u64 {
            return Err(QuantError::Truncated {
                what: "v6 gains",
                offset: V6_HEADER_LEN as u64,
                end: gains_end,
                present,
            });
        }
        let gains_end = gains_end as usize;
        Ok(Self {
            bits,
            inner_version,
            n,
            width,
            first,
            gains: &bytes[V6_HEADER_LEN..gains_end],
            inner_rest: &bytes[gains_end..],
        })
    }

    /// Number of values.
    #[must_use]
    pub fn values(&self) -> usize {
        self.n
    }

    /// The gains, one per row part.
    pub fn gains(&self) -> impl Iterator<Item = f32> + '_ {
        self.gains.iter().map(|&c| gain_of(c))
    }

    /// Rebuild the wrapped segment's bytes (magic, inner version and bits, then the
    /// stored rest).
    #[must_use]
    pub fn inner(&self) -> Vec<u8> {
        let mut inner = Vec::with_capacity(V6_INNER_SKIP + self.inner_rest.len());
        inner.extend_from_slice(&MAGIC);
        inner.push(self.inner_version);
        inner.push(self.bits);
        inner.extend_from_slice(self.inner_rest);
        inner
    }

    /// Decode into `dst` (resized to [`SegmentV6::values`], which must be at most
    /// `max_values`): the inner segment's decoding, each value times its row part's gain
    /// (one f32 multiplication, rounded to nearest even).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] when the envelope holds more than `max_values`
    /// values; the inner segment's parse and decode errors (offsets are the rebuilt
    /// segment's: add `envelope_len` to place them in the envelope);
    /// [`QuantError::CorruptField`] `values` when the inner segment holds another count
    /// than the header's, `gain` (at the code's offset) when a gain takes a decoded value
    /// beyond the f32 range.
    pub fn decode(&self, max_values: usize, dst: &mut Vec<f32>) -> Result<(), QuantError> {
        if self.n > max_values {
            return Err(QuantError::LengthMismatch {
                what: "v6 values (must be at most the values the caller expects)",
                input: self.n,
                output: max_values,
            });
        }
        let count_err = || {
            corrupt(
                "values",
                V6_VALUES_OFFSET,
                self.n as u64,
                "differs from the inner segment's value count",
            )
        };
        // `self.n <= max_values`: an inner segment over the bound holds more than `n`
        // values, which is this envelope's `values` field being wrong, not the caller's.
        match decode_any(&self.inner(), self.n, dst) {
            Err(QuantError::LengthMismatch { .. }) => return Err(count_err()),
            other => other?,
        }
        if dst.len() != self.n {
            return Err(count_err());
        }
        for ((j, r), g) in row_parts(self.n, self.width, self.first)
            .enumerate()
            .zip(self.gains())
        {
            for v in &mut dst[r] {
                *v *= g;
                if !v.is_finite() {
                    // The inner parsers keep every decoded value finite; a gain must too.
                    let at = V6_HEADER_LEN + j * V6_GAIN_BYTES;
                    return Err(corrupt(
                        "gain",
                        at,
                        self.gains[j].into(),
                        "takes a decoded value beyond the f32 range",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Parse and decode a v6 envelope into `dst` ([`SegmentV6::parse`], [`SegmentV6::decode`]).
///
/// # Errors
/// As those two.
pub fn decode(bytes: &[u8], max_values: usize, dst: &mut Vec<f32>) -> Result<(), QuantError> {
    SegmentV6::parse(bytes)?.decode(max_values, dst)
}

#[cfg(test)]
#[path = "segment_v6_tests.rs"]
mod tests;
