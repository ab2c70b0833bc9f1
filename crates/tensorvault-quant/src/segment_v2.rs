//! The asymmetric segment (TQTC version 2, `docs/formats/quant.md` §5): one run of `n`
//! values, optionally the first `raw_rows` rows of a `[rows, width]` layout kept as f16
//! (an attention-sink token), the rest quantized in asymmetric groups whose scale and
//! min are coded as u8 against per-segment units. Groups run either along the values
//! (rows of weights, value vectors, embeddings) or down the columns of the layout (KV
//! keys: one channel over `g` tokens).
//!
//! ```
//! use tensorvault_quant::segment_v2::{encode, Axis, SegmentV2, V2Params};
//! // 128 tokens x 64 channels, keys grouped per channel over 64 tokens, token 0 raw.
//! let x: Vec<f32> = (0..128 * 64).map(|i| (i % 64) as f32 - 20.0 + (i / 64 % 8) as f32 * 0.25).collect();
//! let p = V2Params { bits: 3, group_log2: 6, axis: Axis::Columns, width: 64, raw_rows: 1, clip_search: false };
//! let bytes = encode(&p, &x)?;
//! assert_eq!(bytes.len(), p.encoded_len(x.len())?);
//! let mut y = vec![0f32; x.len()];
//! SegmentV2::parse(&bytes)?.decode(&mut y)?;
//! assert_eq!(y[..64], x[..64]); // the raw row is exact (these values are f16-exact)
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use crate::asym::{min_max, quantize_group, round_code, search_clip, GroupCoder, Range};
use crate::bitpack::{pack_unchecked, packed_len, unpack_unchecked};
use crate::error::{check_len, corrupt, segment_prefix};
use crate::layout::{
    BITS_OFFSET, MAGIC, MAGIC_OFFSET, MAX_BITS, MIN_BITS, V2_AXIS_COLUMNS, V2_AXIS_FLAT,
    V2_AXIS_OFFSET, V2_GROUP_BYTES, V2_GROUP_LOG2_OFFSET, V2_HEADER_LEN, V2_MAX_GROUP_LOG2,
    V2_MIN_BASE_OFFSET, V2_MIN_GROUP_LOG2, V2_MIN_UNIT_OFFSET, V2_RAW_BYTES, V2_RAW_ROWS_OFFSET,
    V2_SCALE_UNIT_OFFSET, V2_VALUES_OFFSET, V2_VERSION, V2_WIDTH_OFFSET, VERSION_OFFSET,
};
use crate::le::{f32_at, u16_at, u32_at};
use crate::QuantError;

/// How groups run over the values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Runs of `g` consecutive values (row-major).
    Flat,
    /// One column of the `[rows, width]` layout over `g` consecutive rows.
    Columns,
}

impl Axis {
    fn byte(self) -> u8 {
        match self {
            Axis::Flat => V2_AXIS_FLAT,
            Axis::Columns => V2_AXIS_COLUMNS,
        }
    }
}

/// Encoder settings of a v2 segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct V2Params {
    /// Bits per code, 2..=8.
    pub bits: u8,
    /// log2 of the group size, 2..=10.
    pub group_log2: u8,
    /// Grouping axis.
    pub axis: Axis,
    /// Values per row (>= 1); the columns axis and raw rows need `n % width == 0`.
    pub width: u16,
    /// Leading rows stored as f16 instead of quantized.
    pub raw_rows: u16,
    /// Search each group's clip range for the least squared error (encoder only; the
    /// format is the same either way).
    pub clip_search: bool,
}

/// The shape of a segment's regions, derived from its header fields.
#[derive(Clone, Copy, Debug)]
struct Regions {
    raw_vals: usize,
    quant_vals: usize,
    groups: usize,
    raw_end: usize,
    params_end: usize,
    end: usize,
}

impl V2Params {
    fn group(&self) -> usize {
        1usize << self.group_log2
    }

    /// Check the settings against `n` values and lay out the regions. The errors are the
    /// ones a parser reports for the same header (offsets are header offsets).
    fn regions(&self, n: usize) -> Result<Regions, QuantError> {
        if !(MIN_BITS..=MAX_BITS).contains(&self.bits) {
            return Err(QuantError::InvalidBits { bits: self.bits });
        }
        if !(V2_MIN_GROUP_LOG2..=V2_MAX_GROUP_LOG2).contains(&self.group_log2) {
            return Err(corrupt(
                "group_log2",
                V2_GROUP_LOG2_OFFSET,
                self.group_log2.into(),
                "must be in 2..=10",
            ));
        }
        if n == 0 || u32::try_from(n).is_err() {
            return Err(corrupt(
                "values",
                V2_VALUES_OFFSET,
                n as u64,
                "must be in 1..=2^32-1",
            ));
        }
        let width = usize::from(self.width);
        if width == 0 {
            return Err(corrupt("width", V2_WIDTH_OFFSET, 0, "must be >= 1"));
        }
        let raw_vals = usize::from(self.raw_rows) * width;
        if raw_vals > n {
            return Err(corrupt(
                "raw_rows",
                V2_RAW_ROWS_OFFSET,
                self.raw_rows.into(),
                "raw rows hold more values than the segment",
            ));
        }
        let needs_rows = self.axis == Axis::Columns || self.raw_rows > 0;
        if needs_rows && !n.is_multiple_of(width) {
            return Err(corrupt(
                "width",
                V2_WIDTH_OFFSET,
                self.width.into(),
                "the columns axis and raw rows need whole rows",
            ));
        }
        let quant_vals = n - raw_vals;
        let g = self.group();
        let groups = match self.axis {
            Axis::Flat => quant_vals.div_ceil(g),
            Axis::Columns => (quant_vals / width).div_ceil(g) * width,
        };
        let raw_end = V2_HEADER_LEN + raw_vals * V2_RAW_BYTES;
        let params_end = raw_end + groups * V2_GROUP_BYTES;
        let end = params_end + packed_len(quant_vals, self.bits);
        Ok(Regions {
            raw_vals,
            quant_vals,
            groups,
            raw_end,
            params_end,
            end,
        })
    }

    /// Number of groups for `n` values.
    ///
    /// # Errors
    /// As [`encode`] for invalid settings.
    pub fn group_count(&self, n: usize) -> Result<usize, QuantError> {
        Ok(self.regions(n)?.groups)
    }

    /// Exact byte length of the segment [`encode`] writes for `n` values.
    ///
    /// # Errors
    /// As [`encode`] for invalid settings.
    pub fn encoded_len(&self, n: usize) -> Result<usize, QuantError> {
        Ok(self.regions(n)?.end)
    }
}

/// Fit every group's range over the quantized values `q`.
fn group_ranges(p: &V2Params, q: &[f32]) -> Vec<Range> {
    let g = p.group();
    match p.axis {
        Axis::Flat => q
            .chunks(g)
            .map(|c| {
                let full = min_max(c.iter().copied());
                if p.clip_search {
                    search_clip(c, full, p.bits)
                } else {
                    full
                }
            })
            .collect(),
        Axis::Columns => {
            let width = usize::from(p.width);
            let mut out = Vec::with_capacity((q.len() / width).div_ceil(g) * width);
            let mut col = Vec::new();
            for rows in q.chunks(g * width) {
                let mut lo = vec![f32::INFINITY; width];
                let mut hi = vec![f32::NEG_INFINITY; width];
                for row in rows.chunks_exact(width) {
                    for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(row) {
                        *l = l.min(v);
                        *h = h.max(v);
                    }
                }
                for c in 0..width {
                    let full = Range {
                        lo: lo[c],
                        hi: hi[c],
                    };
                    if p.clip_search {
                        col.clear();
                        col.extend(rows.chunks_exact(width).map(|r| r[c]));
                        out.push(search_clip(&col, full, p.bits));
                    } else {
                        out.push(full);
                    }
                }
            }
            out
        }
    }
}

/// Encode `x` as one v2 segment.
///
/// # Errors
/// [`QuantError::NonFinite`] for NaN or infinite values; [`QuantError::OutOfRange`] for
/// a raw-row value beyond f16's range; [`QuantError::ScaleOverflow`] for ranges that
/// overflow f32; [`QuantError::InvalidBits`] / [`QuantError::CorruptField`] for settings
/// that do not fit `x` (group size, width, raw rows).
pub fn encode(p: &V2Params, x: &[f32]) -> Result<Vec<u8>, QuantError> {
    let reg = p.regions(x.len())?;
    crate::error::check_finite(x)?;
    let (raw, q) = x.split_at(reg.raw_vals);
    let coder = GroupCoder::fit(&group_ranges(p, q), p.bits)?;
    let units = Units {
        scale_unit: coder.scale_unit,
        min_base: coder.min_base,
        min_unit: coder.min_unit,
    };
    if !units.reach_is_finite(p.bits) {
        // Every segment this writes must parse: refuse ranges near f32's limits.
        let max_abs = q.iter().fold(0f32, |m, v| m.max(v.abs()));
        return Err(QuantError::ScaleOverflow { group: 0, max_abs });
    }
    let mut out = vec![0u8; reg.end];
    out[MAGIC_OFFSET..MAGIC_OFFSET + MAGIC.len()].copy_from_slice(&MAGIC);
    out[VERSION_OFFSET] = V2_VERSION;
    out[BITS_OFFSET] = p.bits;
    out[V2_AXIS_OFFSET] = p.axis.byte();
    out[V2_GROUP_LOG2_OFFSET] = p.group_log2;
    out[V2_VALUES_OFFSET..V2_VALUES_OFFSET + 4].copy_from_slice(&(x.len() as u32).to_le_bytes());
    out[V2_WIDTH_OFFSET..V2_WIDTH_OFFSET + 2].copy_from_slice(&p.width.to_le_bytes());
    out[V2_RAW_ROWS_OFFSET..V2_RAW_ROWS_OFFSET + 2].copy_from_slice(&p.raw_rows.to_le_bytes());
    for (off, v) in [
        (V2_SCALE_UNIT_OFFSET, coder.scale_unit),
        (V2_MIN_BASE_OFFSET, coder.min_base),
        (V2_MIN_UNIT_OFFSET, coder.min_unit),
    ] {
        out[off..off + 4].copy_from_slice(&v.to_bits().to_le_bytes());
    }
    for (i, (d, &v)) in out[V2_HEADER_LEN..reg.raw_end]
        .chunks_exact_mut(V2_RAW_BYTES)
        .zip(raw)
        .enumerate()
    {
        let h = half::f16::from_f32(v);
        if h.is_infinite() {
            return Err(QuantError::OutOfRange {
                index: i,
                value: v,
                target: "f16 (raw row)",
            });
        }
        d.copy_from_slice(&h.to_bits().to_le_bytes());
    }
    for (d, c) in out[reg.raw_end..reg.params_end]
        .chunks_exact_mut(V2_GROUP_BYTES)
        .zip(&coder.codes)
    {
        d.copy_from_slice(c);
    }
    let mut codes = vec![0u8; reg.quant_vals];
    let params = Params::from_coder(&coder);
    match p.axis {
        Axis::Flat => {
            for ((c, vals), gi) in codes
                .chunks_mut(p.group())
                .zip(q.chunks(p.group()))
                .zip(0..)
            {
                let (m, s) = params.get(gi);
                quantize_group(vals, m, s, p.bits, c);
            }
        }
        Axis::Columns => {
            let width = usize::from(p.width);
            let top = f32::from((1u16 << p.bits) - 1);
            let mut mins = vec![0f32; width];
            let mut invs = vec![0f32; width];
            for (rg, (cs, vs)) in codes
                .chunks_mut(p.group() * width)
                .zip(q.chunks(p.group() * width))
                .enumerate()
            {
                for col in 0..width {
                    let (m, s) = params.get(rg * width + col);
                    mins[col] = m;
                    invs[col] = if s > 0.0 { 1.0 / s } else { 0.0 };
                }
                for (c, v) in cs.chunks_exact_mut(width).zip(vs.chunks_exact(width)) {
                    for i in 0..width {
                        c[i] = round_code((v[i] - mins[i]) * invs[i], top);
                    }
                }
            }
        }
    }
    pack_unchecked(&codes, p.bits, &mut out[reg.params_end..reg.end]);
    Ok(out)
}

/// Decoded per-segment units.
#[derive(Clone, Copy, Debug)]
struct Units {
    scale_unit: f32,
    min_base: f32,
    min_unit: f32,
}

impl Units {
    /// Whether the largest magnitude any code can decode to,
    /// `|min_base| + 255 * min_unit + 255 * scale_unit * (2^bits - 1)` in f32, is finite:
    /// the parser requires it, so the encoder refuses data whose units would break it.
    fn reach_is_finite(&self, bits: u8) -> bool {
        let top = f32::from((1u16 << bits) - 1);
        let max_code = f32::from(u8::MAX);
        (self.min_base.abs() + self.min_unit * max_code + self.scale_unit * max_code * top)
            .is_finite()
    }
}

/// Group parameters as f32, decoded from their codes.
struct Params {
    mins: Vec<f32>,
    scales: Vec<f32>,
}

impl Params {
    fn from_coder(c: &GroupCoder) -> Self {
        let u = Units {
            scale_unit: c.scale_unit,
            min_base: c.min_base,
            min_unit: c.min_unit,
        };
        Self::decode(u, c.codes.iter().copied())
    }

    fn decode(u: Units, codes: impl Iterator<Item = [u8; 2]>) -> Self {
        let (scales, mins) = codes
            .map(|[sc, mc]| {
                (
                    GroupCoder::scale_of(u.scale_unit, sc),
                    GroupCoder::min_of(u.min_base, u.min_unit, mc),
                )
            })
            .unzip();
        Self { mins, scales }
    }

    fn get(&self, g: usize) -> (f32, f32) {
        (self.mins[g], self.scales[g])
    }
}

/// A validated v2 segment borrowed from its bytes.
#[derive(Clone, Copy, Debug)]
pub struct SegmentV2<'a> {
    bytes: &'a [u8],
    p: V2Params,
    n: usize,
    units: Units,
    reg: Regions,
}

impl<'a> SegmentV2<'a> {
    /// Validate `bytes` as one complete v2 segment.
    ///
    /// # Errors
    /// [`QuantError::Truncated`], [`QuantError::BadMagic`],
    /// [`QuantError::UnsupportedVersion`], [`QuantError::CorruptField`] (bits, axis,
    /// group size, values, width, raw rows, units), [`QuantError::TrailingBytes`].
    pub fn parse(bytes: &'a [u8]) -> Result<Self, QuantError> {
        Self::parse_to(bytes, true)
    }

    /// Validate `head` as a v2 segment without its packed codes: the header, raw rows
    /// and group parameters, exactly (what a version 5 envelope keeps). Decode it with
    /// [`Self::decode_codes`].
    ///
    /// # Errors
    /// As [`Self::parse`], the region after the group parameters left out.
    pub(crate) fn parse_head(head: &'a [u8]) -> Result<Self, QuantError> {
        Self::parse_to(head, false)
    }

    /// [`Self::parse`] (`with_codes`) or [`Self::parse_head`].
    fn parse_to(bytes: &'a [u8], with_codes: bool) -> Result<Self, QuantError> {
        let present = bytes.len();
        let (h, bits) = segment_prefix(bytes, "v2 header", V2_HEADER_LEN, V2_VERSION)?;
        let axis = match h[V2_AXIS_OFFSET] {
            V2_AXIS_FLAT => Axis::Flat,
            V2_AXIS_COLUMNS => Axis::Columns,
            other => {
                return Err(corrupt(
                    "axis",
                    V2_AXIS_OFFSET,
                    other.into(),
                    "must be 0 (flat) or 1 (columns)",
                ))
            }
        };
        let n = u32_at(h, V2_VALUES_OFFSET) as usize;
        let p = V2Params {
            bits,
            group_log2: h[V2_GROUP_LOG2_OFFSET],
            axis,
            width: u16_at(h, V2_WIDTH_OFFSET),
            raw_rows: u16_at(h, V2_RAW_ROWS_OFFSET),
            clip_search: false,
        };
        let reg = p.regions(n)?;
        let units = Units {
            scale_unit: f32_at(h, V2_SCALE_UNIT_OFFSET),
            min_base: f32_at(h, V2_MIN_BASE_OFFSET),
            min_unit: f32_at(h, V2_MIN_UNIT_OFFSET),
        };
        for (field, off, v) in [
            ("scale_unit", V2_SCALE_UNIT_OFFSET, units.scale_unit),
            ("min_unit", V2_MIN_UNIT_OFFSET, units.min_unit),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(corrupt(
                    field,
                    off,
                    v.to_bits().into(),
                    "must be finite and >= 0",
                ));
            }
        }
        // The largest value any code can decode to must be finite as well.
        if !units.reach_is_finite(bits) {
            return Err(corrupt(
                "units",
                V2_SCALE_UNIT_OFFSET,
                units.min_base.to_bits().into(),
                "scale_unit, min_base and min_unit decode beyond the f32 range",
            ));
        }
        let end = if with_codes { reg.end } else { reg.params_end };
        if present < end {
            let what = if present < reg.raw_end {
                "raw rows"
            } else if present < reg.params_end {
                "group parameters"
            } else {
                "codes"
            };
            return Err(QuantError::Truncated {
                what,
                offset: V2_HEADER_LEN as u64,
                end: end as u64,
                present,
            });
        }
        if present > end {
            return Err(QuantError::TrailingBytes {
                expected: end as u64,
                present,
            });
        }
        Ok(Self {
            bytes,
            p,
            n,
            units,
            reg,
        })
    }

    /// Number of values.
    #[must_use]
    pub fn values(&self) -> usize {
        self.n
    }

    /// The segment's settings (`clip_search` is always false: it is not stored).
    #[must_use]
    pub fn params(&self) -> V2Params {
        self.p
    }

    /// The largest group scale (0 when every group is constant).
    #[must_use]
    pub fn max_scale(&self) -> f32 {
        let codes = &self.bytes[self.reg.raw_end..self.reg.params_end];
        let sc = codes
            .chunks_exact(V2_GROUP_BYTES)
            .map(|c| c[0])
            .max()
            .unwrap_or(0);
        GroupCoder::scale_of(self.units.scale_unit, sc)
    }

    /// Decode every value into `out` (exactly [`SegmentV2::values`] long).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] if `out` has the wrong length.
    pub fn decode(&self, out: &mut [f32]) -> Result<(), QuantError> {
        check_len("v2 segment decode", self.n, out.len())?;
        let Some(packed) = self.bytes.get(self.reg.params_end..self.reg.end) else {
            // Only a head (`parse_head`) lacks its codes.
            return Err(QuantError::Truncated {
                what: "codes",
                offset: self.reg.params_end as u64,
                end: self.reg.end as u64,
                present: self.bytes.len(),
            });
        };
        let mut codes = vec![0u8; self.reg.quant_vals];
        unpack_unchecked(packed, self.p.bits, &mut codes);
        self.decode_codes(&codes, out)
    }

    /// Number of quantized values (the codes): the values after the raw rows.
    pub(crate) fn quantized(&self) -> usize {
        self.reg.quant_vals
    }

    /// Decode every value into `out` (exactly [`SegmentV2::values`] long) from the
    /// quantized values' codes, one per byte ([`Self::quantized`] of them, each below
    /// `2^bits`): what [`Self::decode`] does after unpacking them.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] if `codes` or `out` has the wrong length.
    pub(crate) fn decode_codes(&self, codes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
        check_len("v2 segment decode", self.n, out.len())?;
        check_len("v2 segment codes", self.reg.quant_vals, codes.len())?;
        let b = self.bytes;
        let (raw_out, q_out) = out.split_at_mut(self.reg.raw_vals);
        for (o, c) in raw_out
            .iter_mut()
            .zip(b[V2_HEADER_LEN..self.reg.raw_end].chunks_exact(V2_RAW_BYTES))
        {
            *o = half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
        }
        if self.reg.quant_vals == 0 {
            return Ok(());
        }
        let params = Params::decode(
            self.units,
            b[self.reg.raw_end..self.reg.params_end]
                .chunks_exact(V2_GROUP_BYTES)
                .map(|c| [c[0], c[1]]),
        );
        let g = self.p.group();
        match self.p.axis {
            Axis::Flat => {
                for (gi, (o, c)) in q_out.chunks_mut(g).zip(codes.chunks(g)).enumerate() {
                    let (m, s) = params.get(gi);
                    for (o, &u) in o.iter_mut().zip(c) {
                        *o = m + s * f32::from(u);
                    }
                }
            }
            Axis::Columns => {
                let width = usize::from(self.p.width);
                for (rg, (os, cs)) in q_out
                    .chunks_mut(g * width)
                    .zip(codes.chunks(g * width))
                    .enumerate()
                {
                    let mins = &params.mins[rg * width..(rg + 1) * width];
                    let scales = &params.scales[rg * width..(rg + 1) * width];
                    for (o, c) in os.chunks_exact_mut(width).zip(cs.chunks_exact(width)) {
                        for i in 0..width {
                            o[i] = mins[i] + scales[i] * f32::from(c[i]);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "segment_v2_tests.rs"]
mod tests;
