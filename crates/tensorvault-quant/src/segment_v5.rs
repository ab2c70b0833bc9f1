//! The entropy-coded segment (TQTC version 5): an envelope over a version 2, 3 or 4 segment
//! whose packed codes are replaced by a rANS-coded stream ([`crate::entropy`]); every
//! other byte of the inner segment (header fields, raw rows, group parameters or block
//! scales) is kept verbatim. Byte layout: `docs/formats/quant.md` §12.
//!
//! [`wrap`] returns the envelope only when it is shorter than the inner segment, so a
//! writer stores whichever is smaller ([`encode_smallest`]). Decoding rebuilds the inner
//! segment and hands it to its own parser, which checks it as it checks any segment.
//!
//! ```
//! use tensorvault_quant::segment_v2::{encode, Axis, V2Params};
//! use tensorvault_quant::segment_v5::{decode_any, encode_smallest};
//! let x: Vec<f32> = (0..4096).map(|i| ((i * 37 % 101) as f32 * 0.07).sin()).collect();
//! let p = V2Params { bits: 3, group_log2: 6, axis: Axis::Flat, width: 1, raw_rows: 0, clip_search: false };
//! let v2 = encode(&p, &x)?;
//! let stored = encode_smallest(v2.clone())?;
//! assert!(stored.len() <= v2.len());
//! let (mut a, mut b) = (Vec::new(), Vec::new());
//! decode_any(&stored, x.len(), &mut a)?;
//! decode_any(&v2, x.len(), &mut b)?;
//! assert_eq!(a, b); // lossless: the same values as the inner segment
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use crate::bitpack::{pack_unchecked, packed_len, unpack_unchecked};
use crate::entropy::{best_table, decode_codes, encode_with, histogram, FreqTable};
use crate::error::{corrupt, segment_prefix};
use crate::layout::{
    MAGIC, V2_VERSION, V3_VERSION, V4_VERSION, V5_CODES_OFFSET, V5_DEFAULT_LANES_LOG2,
    V5_HEADER_LEN, V5_INNER_SKIP, V5_INNER_VERSIONS, V5_INNER_VERSION_OFFSET, V5_LANES_LOG2_OFFSET,
    V5_MAX_LANES_LOG2, V5_MAX_PROB_BITS, V5_PROB_BITS_OFFSET, V5_SIDE_LEN_OFFSET, V5_VERSION,
    VERSION_OFFSET,
};
use crate::segment_rot::SegmentV3;
use crate::segment_v2::SegmentV2;
use crate::segment_v4::SegmentV4;
use crate::QuantError;

/// A v5 envelope whose header, side bytes and frequency table are validated (the stream
/// is checked as it is decoded).
#[derive(Clone, Debug)]
pub struct SegmentV5<'a> {
    bytes: &'a [u8],
    bits: u8,
    inner_version: u8,
    lanes_log2: u8,
    prob_bits: u8,
    codes: usize,
    side_end: usize,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

impl<'a> SegmentV5<'a> {
    /// Validate the header of `bytes` as a v5 envelope, check the side bytes are present
    /// and the frequency table is well formed.
    ///
    /// # Errors
    /// [`QuantError::Truncated`] (`v5 header`, `inner side data`, `frequency table`),
    /// [`QuantError::BadMagic`], [`QuantError::UnsupportedVersion`],
    /// [`QuantError::CorruptField`] (`bits`, `inner_version`, `lanes_log2`, `prob_bits`,
    /// `frequency`, `frequency sum`).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, QuantError> {
        let present = bytes.len();
        let (h, bits) = segment_prefix(bytes, "v5 header", V5_HEADER_LEN, V5_VERSION)?;
        let inner_version = h[V5_INNER_VERSION_OFFSET];
        if !V5_INNER_VERSIONS.contains(&inner_version) {
            return Err(corrupt(
                "inner_version",
                V5_INNER_VERSION_OFFSET,
                inner_version.into(),
                "must be 2, 3 or 4",
            ));
        }
        let lanes_log2 = h[V5_LANES_LOG2_OFFSET];
        if lanes_log2 > V5_MAX_LANES_LOG2 {
            return Err(corrupt(
                "lanes_log2",
                V5_LANES_LOG2_OFFSET,
                lanes_log2.into(),
                "must be in 0..=6 (1 to 64 lanes)",
            ));
        }
        let prob_bits = h[V5_PROB_BITS_OFFSET];
        if prob_bits > V5_MAX_PROB_BITS {
            return Err(corrupt(
                "prob_bits",
                V5_PROB_BITS_OFFSET,
                prob_bits.into(),
                "must be in 0..=12",
            ));
        }
        let codes = u32_at(h, V5_CODES_OFFSET) as usize;
        let side_len = u64::from(u32_at(h, V5_SIDE_LEN_OFFSET));
        let side_end = V5_HEADER_LEN as u64 + side_len;
        if side_end > present as u64 {
            return Err(QuantError::Truncated {
                what: "inner side data",
                offset: V5_HEADER_LEN as u64,
                end: side_end,
                present,
            });
        }
        let side_end = side_end as usize;
        FreqTable::parse(&bytes[side_end..], side_end, present, bits, prob_bits)?;
        Ok(Self {
            bytes,
            bits,
            inner_version,
            lanes_log2,
            prob_bits,
            codes,
            side_end,
        })
    }

    /// Number of coded symbols (the inner segment's quantized values).
    #[must_use]
    pub fn codes(&self) -> usize {
        self.codes
    }

    /// Version of the wrapped segment (2, 3 or 4).
    #[must_use]
    pub fn inner_version(&self) -> u8 {
        self.inner_version
    }

    /// Bits per code.
    #[must_use]
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// Decode the codes into `out` (exactly [`SegmentV5::codes`] long).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] for a wrong `out` length; the stream's errors
    /// ([`decode_codes`]).
    pub fn decode_codes(&self, out: &mut [u8]) -> Result<(), QuantError> {
        crate::error::check_len("v5 codes", self.codes, out.len())?;
        decode_codes(
            &self.bytes[self.side_end..],
            self.side_end,
            self.bits,
            self.prob_bits,
            self.lanes_log2,
            out,
        )
    }

    /// Rebuild the inner segment's bytes. `max_values` bounds what is allocated: the
    /// envelope must code at most that many symbols.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] when the envelope codes more than `max_values`
    /// symbols; the stream's errors.
    pub fn inner(&self, max_values: usize) -> Result<Vec<u8>, QuantError> {
        if self.codes > max_values {
            return Err(QuantError::LengthMismatch {
                what: "v5 codes (must be at most the values the caller expects)",
                input: self.codes,
                output: max_values,
            });
        }
        let mut codes = vec![0u8; self.codes];
        self.decode_codes(&mut codes)?;
        let side = &self.bytes[V5_HEADER_LEN..self.side_end];
        let packed = packed_len(self.codes, self.bits);
        let mut inner = Vec::with_capacity(V5_INNER_SKIP + side.len() + packed);
        inner.extend_from_slice(&MAGIC);
        inner.push(self.inner_version);
        inner.push(self.bits);
        inner.extend_from_slice(side);
        let start = inner.len();
        inner.resize(start + packed, 0);
        // Every decoded symbol is < 2^bits: the table has 2^bits entries.
        pack_unchecked(&codes, self.bits, &mut inner[start..]);
        // The rebuilt segment must parse, and code exactly the values its header leaves
        // after the raw rows (equal packed lengths could hide a different count).
        let (_, m) = code_region(&inner)?;
        if m != self.codes {
            return Err(corrupt(
                "codes",
                V5_CODES_OFFSET,
                self.codes as u64,
                "differs from the inner segment's quantized value count",
            ));
        }
        Ok(inner)
    }
}

impl SegmentV5<'_> {
    /// Decode every value of the wrapped segment into `dst` (resized to its value count,
    /// which must be at most `max_values`): the values the rebuilt inner segment
    /// ([`Self::inner`]) decodes to, bit for bit. A v2 or v3 inner segment is decoded
    /// straight from the rANS-decoded codes (its header and side data checked as its
    /// parser checks them, without the packed codes); a v4 one through its rebuilt bytes.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] when the envelope codes, or the inner segment holds,
    /// more than `max_values` values; the inner header's and side data's errors (as the
    /// inner parser reports them, at inner segment offsets); [`QuantError::CorruptField`]
    /// `codes` when `m` differs from the inner segment's quantized value count; the
    /// stream's errors.
    pub fn decode(&self, max_values: usize, dst: &mut Vec<f32>) -> Result<(), QuantError> {
        if self.codes > max_values {
            return Err(QuantError::LengthMismatch {
                what: "v5 codes (must be at most the values the caller expects)",
                input: self.codes,
                output: max_values,
            });
        }
        let side = &self.bytes[V5_HEADER_LEN..self.side_end];
        let mut head = Vec::with_capacity(V5_INNER_SKIP + side.len());
        head.extend_from_slice(&MAGIC);
        head.push(self.inner_version);
        head.push(self.bits);
        head.extend_from_slice(side);
        match self.inner_version {
            V2_VERSION => {
                let seg = SegmentV2::parse_head(&head)?;
                let codes = self.checked_codes(seg.quantized(), seg.values(), max_values)?;
                size_for(dst, seg.values());
                seg.decode_codes(&codes, dst)
            }
            V3_VERSION => {
                let seg = SegmentV3::parse_head(&head)?;
                let codes = self.checked_codes(seg.quantized(), seg.values(), max_values)?;
                size_for(dst, seg.values());
                seg.decode_codes(&codes, dst)
            }
            _ => decode_inner(&self.inner(max_values)?, max_values, dst),
        }
    }

    /// The decoded codes, once the inner head says it quantizes exactly `m` of its `n`
    /// values and `n` is at most `max_values`.
    fn checked_codes(
        &self,
        quantized: usize,
        n: usize,
        max_values: usize,
    ) -> Result<Vec<u8>, QuantError> {
        if quantized != self.codes {
            return Err(corrupt(
                "codes",
                V5_CODES_OFFSET,
                self.codes as u64,
                "differs from the inner segment's quantized value count",
            ));
        }
        if n > max_values {
            return Err(too_many(n, max_values));
        }
        let mut codes = vec![0u8; self.codes];
        self.decode_codes(&mut codes)?;
        Ok(codes)
    }
}

fn too_many(n: usize, max_values: usize) -> QuantError {
    QuantError::LengthMismatch {
        what: "segment values (must be at most the values the caller expects)",
        input: n,
        output: max_values,
    }
}

fn size_for(dst: &mut Vec<f32>, n: usize) {
    dst.clear();
    dst.resize(n, 0.0);
}

/// Decode a v2, v3, v4, v5 or v7 segment into `dst` (resized to its value count, which
/// must be at most `max_values`).
///
/// # Errors
/// The segment's parse and decode errors; [`QuantError::LengthMismatch`] when it holds
/// more than `max_values` values; [`QuantError::UnsupportedVersion`] for other versions.
pub fn decode_any(bytes: &[u8], max_values: usize, dst: &mut Vec<f32>) -> Result<(), QuantError> {
    match bytes.get(VERSION_OFFSET) {
        Some(&V5_VERSION) => SegmentV5::parse(bytes)?.decode(max_values, dst),
        Some(&crate::layout::V7_VERSION) => crate::segment_v7::decode(bytes, max_values, dst),
        _ => decode_inner(bytes, max_values, dst),
    }
}

fn decode_inner(bytes: &[u8], max_values: usize, dst: &mut Vec<f32>) -> Result<(), QuantError> {
    let too_many = |n: usize| too_many(n, max_values);
    match bytes.get(VERSION_OFFSET) {
        Some(&V3_VERSION) => {
            let seg = SegmentV3::parse(bytes)?;
            if seg.values() > max_values {
                return Err(too_many(seg.values()));
            }
            dst.clear();
            dst.resize(seg.values(), 0.0);
            seg.decode(dst)
        }
        Some(&V4_VERSION) => {
            let seg = SegmentV4::parse(bytes)?;
            if seg.values() > max_values {
                return Err(too_many(seg.values()));
            }
            dst.clear();
            dst.resize(seg.values(), 0.0);
            seg.decode(dst)
        }
        _ => {
            let seg = SegmentV2::parse(bytes)?;
            if seg.values() > max_values {
                return Err(too_many(seg.values()));
            }
            dst.clear();
            dst.resize(seg.values(), 0.0);
            seg.decode(dst)
        }
    }
}

/// Where the packed codes of a valid inner segment start, and how many codes they hold.
fn code_region(inner: &[u8]) -> Result<(usize, usize), QuantError> {
    let (n, raw) = match inner.get(VERSION_OFFSET) {
        Some(&V3_VERSION) => {
            let s = SegmentV3::parse(inner)?;
            let p = s.params();
            (s.values(), usize::from(p.raw_rows) * usize::from(p.width))
        }
        Some(&V2_VERSION) => {
            let s = SegmentV2::parse(inner)?;
            let p = s.params();
            (s.values(), usize::from(p.raw_rows) * usize::from(p.width))
        }
        // Version 4: every value is coded; the value codes end the segment.
        Some(&V4_VERSION) => (SegmentV4::parse(inner)?.values(), 0),
        other => {
            return Err(QuantError::UnsupportedVersion {
                version: other.copied().unwrap_or(0),
                offset: VERSION_OFFSET,
            })
        }
    };
    // The inner parser checked raw rows <= n and that the codes end the segment.
    let m = n - raw;
    let bits = inner[crate::layout::BITS_OFFSET];
    Ok((inner.len() - packed_len(m, bits), m))
}

/// What [`wrap`] and [`wrap_len_bounds`] start from: where `inner`'s codes begin, their
/// width, the codes unpacked, their histogram and the table [`wrap`] codes them with.
struct Coded {
    codes_at: usize,
    bits: u8,
    codes: Vec<u8>,
    counts: Vec<u64>,
    table: FreqTable,
}

/// [`Coded`] for `inner` with `2^lanes_log2` lanes; `None` when no table fits (no codes).
fn codes_and_table(inner: &[u8], lanes_log2: u8) -> Result<Option<Coded>, QuantError> {
    if lanes_log2 > V5_MAX_LANES_LOG2 {
        return Err(QuantError::InvalidParam {
            field: "lanes_log2",
            value: lanes_log2.into(),
            reason: "at most 6 (64 lanes)",
        });
    }
    let (codes_at, m) = code_region(inner)?;
    let bits = inner[crate::layout::BITS_OFFSET];
    let mut codes = vec![0u8; m];
    unpack_unchecked(&inner[codes_at..], bits, &mut codes);
    let counts = histogram(&codes, bits)?;
    Ok(best_table(&counts).map(|table| Coded {
        codes_at,
        bits,
        codes,
        counts,
        table,
    }))
}

/// The v5 envelope of a valid v2, v3 or v4 segment with `2^lanes_log2` rANS lanes, or
/// `None` when it would not be shorter than `inner` (or there are no codes).
///
/// # Errors
/// The inner segment's parse errors; [`QuantError::UnsupportedVersion`] for a version
/// other than 2, 3 or 4; [`QuantError::InvalidParam`] for `lanes_log2 > 6`.
pub fn wrap(inner: &[u8], lanes_log2: u8) -> Result<Option<Vec<u8>>, QuantError> {
    let Some(Coded {
        codes_at,
        bits,
        codes,
        table,
        ..
    }) = codes_and_table(inner, lanes_log2)?
    else {
        return Ok(None);
    };
    let m = codes.len();
    let (Ok(m32), Ok(side_len)) = (u32::try_from(m), u32::try_from(codes_at - V5_INNER_SKIP))
    else {
        return Ok(None); // n is a u32 in every inner version: unreachable
    };
    let coded = encode_with(&codes, &table, lanes_log2);
    let side = &inner[V5_INNER_SKIP..codes_at];
    let len = V5_HEADER_LEN + side.len() + coded.bytes.len();
    if len >= inner.len() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&MAGIC);
    out.push(V5_VERSION);
    out.push(bits);
    out.push(inner[VERSION_OFFSET]);
    out.push(lanes_log2);
    out.push(coded.prob_bits);
    out.extend_from_slice(&m32.to_le_bytes());
    out.extend_from_slice(&side_len.to_le_bytes());
    out.extend_from_slice(side);
    out.extend_from_slice(&coded.bytes);
    Ok(Some(out))
}

/// Bounds `(lo, hi)` on the length of [`wrap`]'s envelope of `inner` with
/// `2^lanes_log2` lanes ([`crate::entropy::coded_len_bounds`]), computed from the codes'
/// histogram and the table [`wrap`] would pick, without coding them; `None` where [`wrap`]
/// finds no table (no codes). [`wrap`] returns the envelope only when it is shorter than
/// `inner`: a caller comparing with a budget below `inner.len()` can use the bounds as
/// they are.
///
/// # Errors
/// As [`wrap`].
pub fn wrap_len_bounds(inner: &[u8], lanes_log2: u8) -> Result<Option<(usize, usize)>, QuantError> {
    let Some(Coded {
        codes_at,
        counts,
        table,
        ..
    }) = codes_and_table(inner, lanes_log2)?
    else {
        return Ok(None);
    };
    let (lo, hi) = crate::entropy::coded_len_bounds(&counts, &table, lanes_log2);
    let side = codes_at - V5_INNER_SKIP;
    Ok(Some((V5_HEADER_LEN + side + lo, V5_HEADER_LEN + side + hi)))
}

/// `inner` wrapped in a v5 envelope with the default 4 lanes when that is shorter,
/// otherwise `inner` itself.
///
/// # Errors
/// As [`wrap`].
pub fn encode_smallest(inner: Vec<u8>) -> Result<Vec<u8>, QuantError> {
    encode_smallest_with(inner, V5_DEFAULT_LANES_LOG2)
}

/// `inner` wrapped in a v5 envelope with `2^lanes_log2` lanes when that is shorter,
/// otherwise `inner` itself ([`crate::layout::V5_WIDE_LANES_LOG2`] is the store's
/// `wide_lanes` writer: 64 lanes, decoded with vector units).
///
/// # Errors
/// As [`wrap`].
pub fn encode_smallest_with(inner: Vec<u8>, lanes_log2: u8) -> Result<Vec<u8>, QuantError> {
    Ok(wrap(&inner, lanes_log2)?.unwrap_or(inner))
}

#[cfg(test)]
#[path = "segment_v5_tests.rs"]
mod tests;
