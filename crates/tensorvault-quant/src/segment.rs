//! The self-describing quantized segment: one tensor (one frame) or a run of equal-length
//! frames whose scale sets are reused while the data's range stays within a drift
//! tolerance. Byte layout: [`crate::layout`] and `docs/formats/quant.md`.
//!
//! ```text
//! header (24 B) | frame bitmap (ceil(F/8) B) | scale sets (S x G x f16) | codes (F x ceil(n*k/8) B)
//! ```
//!
//! [`Segment::parse`] checks every header field against the bytes present before it
//! slices anything, and never allocates; [`Segment::decode_frame`] decodes one frame
//! without touching the others' codes.
//!
//! ```
//! use tensorvault_quant::groupwise::QuantParams;
//! use tensorvault_quant::segment::{Segment, SegmentEncoder};
//! let p = QuantParams::for_bits(5)?;
//! let mut enc = SegmentEncoder::new(p, 1024)?;
//! for t in 0..8 {
//!     let frame: Vec<f32> = (0..1024).map(|i| ((i + t) as f32 * 0.1).sin()).collect();
//!     enc.push_frame(&frame)?;
//! }
//! let bytes = enc.finish()?;
//! let seg = Segment::parse(&bytes)?;
//! assert_eq!((seg.frame_count(), seg.scale_set_count()), (8, 1));
//! let mut frame = vec![0f32; 1024];
//! seg.decode_frame(7, &mut frame)?;
//! # Ok::<(), tensorvault_quant::QuantError>(())
//! ```

use crate::error::{check_len, corrupt, segment_prefix};
use crate::groupwise::{self, ClampStats, Levels, QuantParams};
use crate::layout::*;
use crate::QuantError;

/// What happened to one pushed frame.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FrameReport {
    /// The frame started a new scale set (its own scales were fitted and stored).
    pub new_scale_set: bool,
    /// Values clamped because they left the reused scales' range.
    pub clamp: ClampStats,
}

/// Builds a segment frame by frame.
#[derive(Debug, Clone)]
pub struct SegmentEncoder {
    p: QuantParams,
    n: usize,
    tol: f32,
    frames: usize,
    bitmap: Vec<u8>,
    scales: Vec<u16>,
    codes: Vec<u8>,
    /// Max |x| per group of the frame that fitted the current scale set.
    ref_max: Vec<f32>,
    max_buf: Vec<f32>,
    fit_buf: Vec<u16>,
}

impl SegmentEncoder {
    /// An encoder for frames of `values_per_frame` values with the default drift
    /// tolerance ([`DEFAULT_DRIFT_TOLERANCE`]).
    ///
    /// # Errors
    /// [`QuantError::InvalidParam`] when `values_per_frame` is 0 or above `u32::MAX`.
    pub fn new(p: QuantParams, values_per_frame: usize) -> Result<Self, QuantError> {
        if values_per_frame == 0 || u32::try_from(values_per_frame).is_err() {
            return Err(QuantError::InvalidParam {
                field: "values_per_frame",
                value: values_per_frame as f64,
                reason: "must be in 1..=u32::MAX",
            });
        }
        let groups = p.groups(values_per_frame);
        Ok(SegmentEncoder {
            p,
            n: values_per_frame,
            tol: DEFAULT_DRIFT_TOLERANCE,
            frames: 0,
            bitmap: Vec::new(),
            scales: Vec::new(),
            codes: Vec::new(),
            ref_max: vec![0.0; groups],
            max_buf: vec![0.0; groups],
            fit_buf: vec![0; groups],
        })
    }

    /// Set the drift tolerance: a frame reuses the current scale set when every group's
    /// max |x| is within `tol` (relative) of the max the set was fitted to. 0 refits
    /// unless the range is unchanged.
    ///
    /// # Errors
    /// [`QuantError::InvalidParam`] unless `tol` is finite and >= 0.
    pub fn with_drift_tolerance(mut self, tol: f32) -> Result<Self, QuantError> {
        if !(tol.is_finite() && tol >= 0.0) {
            return Err(QuantError::InvalidParam {
                field: "drift_tolerance",
                value: f64::from(tol),
                reason: "must be finite and >= 0",
            });
        }
        self.tol = tol;
        Ok(self)
    }

    /// Frames pushed so far.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Quantize and append one frame.
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`] if `frame` does not have `values_per_frame` values,
    /// [`QuantError::NonFinite`] (index within the frame), [`QuantError::ScaleOverflow`],
    /// [`QuantError::InvalidParam`] past `u32::MAX` frames. On error the encoder is
    /// unchanged.
    pub fn push_frame(&mut self, frame: &[f32]) -> Result<FrameReport, QuantError> {
        check_len("segment frame", self.n, frame.len())?;
        if self.frames >= u32::MAX as usize {
            return Err(QuantError::InvalidParam {
                field: "frame_count",
                value: self.frames as f64,
                reason: "a segment holds at most u32::MAX frames",
            });
        }
        groupwise::group_max_abs(&self.p, frame, &mut self.max_buf)?;
        let tol = self.tol;
        let reuse = self.frames > 0
            && self
                .ref_max
                .iter()
                .zip(&self.max_buf)
                .all(|(&r, &m)| (m - r).abs() <= tol * r);
        if !reuse {
            groupwise::fit_from_max(&self.p, frame, &self.max_buf, &mut self.fit_buf)?;
            self.scales.extend_from_slice(&self.fit_buf);
            self.ref_max.copy_from_slice(&self.max_buf);
        }
        if self.frames.is_multiple_of(8) {
            self.bitmap.push(0);
        }
        if let Some(last) = self.bitmap.last_mut() {
            *last |= u8::from(!reuse) << (self.frames % 8);
        }
        let start = self.codes.len();
        self.codes.resize(start + self.p.packed_len(self.n), 0);
        let set = &self.scales[self.scales.len() - self.ref_max.len()..];
        let clamp = groupwise::quantize_trusted(&self.p, frame, set, &mut self.codes[start..]);
        self.frames += 1;
        Ok(FrameReport {
            new_scale_set: !reuse,
            clamp,
        })
    }

    /// The encoded segment.
    ///
    /// # Errors
    /// [`QuantError::InvalidParam`] if no frame was pushed.
    pub fn finish(self) -> Result<Vec<u8>, QuantError> {
        if self.frames == 0 {
            return Err(QuantError::InvalidParam {
                field: "frame_count",
                value: 0.0,
                reason: "a segment needs at least one frame",
            });
        }
        let sets = self.scales.len() / self.ref_max.len();
        let mut out = Vec::with_capacity(
            HEADER_LEN + self.bitmap.len() + self.scales.len() * SCALE_BYTES + self.codes.len(),
        );
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.push(self.p.bits());
        out.push(match self.p.levels() {
            Levels::Symmetric => 0,
            Levels::Full => FLAG_FULL_RANGE,
        });
        out.push(self.p.group_log2());
        // Both fit in u32: checked in `new` and `push_frame`.
        out.extend_from_slice(&(self.n as u32).to_le_bytes());
        out.extend_from_slice(&(self.frames as u32).to_le_bytes());
        out.extend_from_slice(&(sets as u32).to_le_bytes());
        debug_assert_eq!(out.len(), BITMAP_OFFSET);
        out.extend_from_slice(&self.bitmap);
        for s in &self.scales {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out.extend_from_slice(&self.codes);
        Ok(out)
    }
}

/// Encode one tensor as a single-frame segment.
///
/// # Errors
/// As [`SegmentEncoder::new`] and [`SegmentEncoder::push_frame`] (an empty tensor is
/// [`QuantError::InvalidParam`]).
pub fn encode_tensor(p: &QuantParams, x: &[f32]) -> Result<(Vec<u8>, ClampStats), QuantError> {
    let mut e = SegmentEncoder::new(*p, x.len())?;
    let r = e.push_frame(x)?;
    Ok((e.finish()?, r.clamp))
}

/// Encode consecutive frames of `values_per_frame` values (`frames.len()` must be a
/// non-zero multiple) with temporal scale reuse at drift tolerance `tol`. Returns the
/// segment and one report per frame.
///
/// # Errors
/// [`QuantError::LengthMismatch`] if `frames.len()` is not a multiple of
/// `values_per_frame`; [`QuantError::NonFinite`] with the index into `frames`; otherwise
/// as [`SegmentEncoder`].
pub fn encode_frames(
    p: &QuantParams,
    frames: &[f32],
    values_per_frame: usize,
    tol: f32,
) -> Result<(Vec<u8>, Vec<FrameReport>), QuantError> {
    let mut e = SegmentEncoder::new(*p, values_per_frame)?.with_drift_tolerance(tol)?;
    if !frames.len().is_multiple_of(values_per_frame) {
        return Err(QuantError::LengthMismatch {
            what: "segment frames (not a multiple of values_per_frame)",
            input: frames.len(),
            output: frames.len() / values_per_frame * values_per_frame,
        });
    }
    let mut reports = Vec::with_capacity(frames.len() / values_per_frame);
    for (i, f) in frames.chunks_exact(values_per_frame).enumerate() {
        let r = e.push_frame(f).map_err(|err| match err {
            QuantError::NonFinite { index, value } => QuantError::NonFinite {
                index: i * values_per_frame + index,
                value,
            },
            other => other,
        })?;
        reports.push(r);
    }
    Ok((e.finish()?, reports))
}

/// A parsed, validated segment borrowing its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    p: QuantParams,
    n: usize,
    frames: usize,
    sets: usize,
    groups: usize,
    frame_bytes: usize,
    bitmap: &'a [u8],
    scales: &'a [u8],
    codes: &'a [u8],
}

fn u32_at(b: &[u8], off: usize) -> u64 {
    u64::from(crate::le::u32_at(b, off))
}

/// `offset + len`, checked against overflow and the bytes present.
fn region(
    what: &'static str,
    offset: u64,
    len: Option<u64>,
    present: usize,
) -> Result<u64, QuantError> {
    let end = len.and_then(|l| offset.checked_add(l)).ok_or(corrupt(
        what,
        0,
        offset,
        "region size overflows u64",
    ))?;
    if end > present as u64 {
        return Err(QuantError::Truncated {
            what,
            offset,
            end,
            present,
        });
    }
    Ok(end)
}

impl<'a> Segment<'a> {
    /// Validate `bytes` as one complete segment.
    ///
    /// # Errors
    /// [`QuantError::Truncated`], [`QuantError::BadMagic`],
    /// [`QuantError::UnsupportedVersion`], [`QuantError::CorruptField`] (bits, flags,
    /// group size, counts, frame bitmap), [`QuantError::CorruptScale`],
    /// [`QuantError::TrailingBytes`].
    pub fn parse(bytes: &'a [u8]) -> Result<Self, QuantError> {
        let present = bytes.len();
        let (h, bits) = segment_prefix(bytes, "header", HEADER_LEN, VERSION)?;
        let flags = h[FLAGS_OFFSET];
        if flags & !KNOWN_FLAGS != 0 {
            return Err(corrupt(
                "flags",
                FLAGS_OFFSET,
                flags.into(),
                "unknown flag bits set",
            ));
        }
        let glog = h[GROUP_LOG2_OFFSET];
        if !(MIN_GROUP_LOG2..=MAX_GROUP_LOG2).contains(&glog) {
            return Err(corrupt(
                "group_log2",
                GROUP_LOG2_OFFSET,
                glog.into(),
                "must be in 4..=10",
            ));
        }
        let levels = if flags & FLAG_FULL_RANGE != 0 {
            Levels::Full
        } else {
            Levels::Symmetric
        };
        // Both are in range (checked just above), so this cannot fail.
        let p = QuantParams::new(bits, 1 << glog)?.with_levels(levels);
        let n = u32_at(h, VALUES_PER_FRAME_OFFSET);
        if n == 0 {
            return Err(corrupt(
                "values_per_frame",
                VALUES_PER_FRAME_OFFSET,
                n,
                "must be >= 1",
            ));
        }
        let frames = u32_at(h, FRAME_COUNT_OFFSET);
        if frames == 0 {
            return Err(corrupt(
                "frame_count",
                FRAME_COUNT_OFFSET,
                frames,
                "must be >= 1",
            ));
        }
        let sets = u32_at(h, SCALE_SET_COUNT_OFFSET);
        if sets == 0 || sets > frames {
            return Err(corrupt(
                "scale_set_count",
                SCALE_SET_COUNT_OFFSET,
                sets,
                "must be in 1..=frame_count",
            ));
        }
        // Every size below is derived from u32 fields, so the u64 products cannot
        // overflow except frames x frame_bytes, which `region` checks.
        let groups = n.div_ceil(1 << glog);
        let frame_bytes = (n * u64::from(bits)).div_ceil(8);
        let bitmap_end = region(
            "frame bitmap",
            BITMAP_OFFSET as u64,
            Some(frames.div_ceil(8)),
            present,
        )?;
        let scales_end = region(
            "scales",
            bitmap_end,
            Some(sets * groups * SCALE_BYTES as u64),
            present,
        )?;
        let codes_end = region(
            "codes",
            scales_end,
            frames.checked_mul(frame_bytes),
            present,
        )?;
        if codes_end != present as u64 {
            return Err(QuantError::TrailingBytes {
                expected: codes_end,
                present,
            });
        }
        // All ends are <= present, so they fit in usize.
        let (bitmap_end, scales_end) = (bitmap_end as usize, scales_end as usize);
        let bitmap = &bytes[BITMAP_OFFSET..bitmap_end];
        if bitmap[0] & 1 == 0 {
            return Err(corrupt(
                "frame bitmap",
                BITMAP_OFFSET,
                bitmap[0].into(),
                "frame 0 must start a scale set",
            ));
        }
        let used = (frames % 8) as u32;
        let last = bitmap[bitmap.len() - 1];
        if used != 0 && last >> used != 0 {
            return Err(corrupt(
                "frame bitmap",
                bitmap_end - 1,
                last.into(),
                "padding bits after the last frame must be 0",
            ));
        }
        let ones: u64 = bitmap.iter().map(|b| u64::from(b.count_ones())).sum();
        if ones != sets {
            return Err(corrupt(
                "frame bitmap",
                BITMAP_OFFSET,
                ones,
                "number of set bits differs from scale_set_count",
            ));
        }
        let scales = &bytes[bitmap_end..scales_end];
        groupwise::check_scales(levels, scale_iter(scales), bitmap_end)?;
        Ok(Segment {
            p,
            n: n as usize,
            frames: frames as usize,
            sets: sets as usize,
            groups: groups as usize,
            frame_bytes: frame_bytes as usize,
            bitmap,
            scales,
            codes: &bytes[scales_end..],
        })
    }

    /// Bit width, group size and levels.
    pub fn params(&self) -> QuantParams {
        self.p
    }

    /// Values per frame.
    pub fn values_per_frame(&self) -> usize {
        self.n
    }

    /// Frames in the segment.
    pub fn frame_count(&self) -> usize {
        self.frames
    }

    /// Distinct scale sets stored.
    pub fn scale_set_count(&self) -> usize {
        self.sets
    }

    /// The scale set frame `index` uses: set bits of the bitmap up to and including it,
    /// minus one.
    ///
    /// # Errors
    /// [`QuantError::FrameOutOfRange`].
    pub fn scale_set_of(&self, index: usize) -> Result<usize, QuantError> {
        self.check_frame(index)?;
        let full: u32 = self.bitmap[..index / 8]
            .iter()
            .map(|b| b.count_ones())
            .sum();
        let part = (self.bitmap[index / 8] & (u8::MAX >> (7 - index % 8))).count_ones();
        // Bit 0 is set (checked in parse), so the count is >= 1.
        Ok((full + part) as usize - 1)
    }

    fn check_frame(&self, index: usize) -> Result<(), QuantError> {
        if index < self.frames {
            Ok(())
        } else {
            Err(QuantError::FrameOutOfRange {
                index,
                frames: self.frames,
            })
        }
    }

    fn decode_with_set(&self, index: usize, set: usize, out: &mut [f32]) {
        let s = set * self.groups * SCALE_BYTES;
        let scales = &self.scales[s..s + self.groups * SCALE_BYTES];
        let codes = &self.codes[index * self.frame_bytes..(index + 1) * self.frame_bytes];
        groupwise::dequantize_trusted(&self.p, scale_iter(scales), codes, out);
    }

    /// Decode frame `index` into `out` (`values_per_frame` values) without reading any
    /// other frame's codes.
    ///
    /// # Errors
    /// [`QuantError::FrameOutOfRange`], [`QuantError::LengthMismatch`].
    pub fn decode_frame(&self, index: usize, out: &mut [f32]) -> Result<(), QuantError> {
        let set = self.scale_set_of(index)?;
        check_len("segment frame decode", self.n, out.len())?;
        self.decode_with_set(index, set, out);
        Ok(())
    }

    /// Decode every frame into `out` (`frame_count * values_per_frame` values).
    ///
    /// # Errors
    /// [`QuantError::LengthMismatch`].
    pub fn decode_all(&self, out: &mut [f32]) -> Result<(), QuantError> {
        check_len(
            "segment decode",
            self.frames.saturating_mul(self.n),
            out.len(),
        )?;
        let mut set = 0usize;
        for (i, o) in out.chunks_exact_mut(self.n).enumerate() {
            if i > 0 && (self.bitmap[i / 8] >> (i % 8)) & 1 == 1 {
                set += 1;
            }
            self.decode_with_set(i, set, o);
        }
        Ok(())
    }
}

fn scale_iter(bytes: &[u8]) -> impl Iterator<Item = u16> + '_ {
    bytes
        .chunks_exact(SCALE_BYTES)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
}

#[cfg(test)]
#[path = "segment_tests.rs"]
mod tests;
