//! The error type of `tensorvault-quant`.

/// Errors raised by the codecs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantError {
    /// An input value is NaN or infinite where the codec needs finite values.
    #[error("value at index {index} is not finite ({value})")]
    NonFinite {
        /// Index of the first offending value in the input slice.
        index: usize,
        /// The value.
        value: f32,
    },
    /// Input and output slices disagree in length.
    #[error("{what}: input has {input} elements but output has room for {output}")]
    LengthMismatch {
        /// Which operation.
        what: &'static str,
        /// Input element count.
        input: usize,
        /// Output element count.
        output: usize,
    },
    /// Codec parameters (e.g. a stored `min` or `scale`) are unusable.
    #[error("invalid parameter {field} = {value}: {reason}")]
    InvalidParam {
        /// The parameter name.
        field: &'static str,
        /// Its value.
        value: f64,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A bit width outside 2..=8.
    #[error("bit width {bits} is not supported (use 2..=8)")]
    InvalidBits {
        /// The rejected width.
        bits: u8,
    },
    /// A group size that is 0, not a power of two, or outside the codec's range
    /// (v1: 16..=1024, v2: 4..=1024).
    #[error("group size {group_size} is not a power of two in the codec's range (v1: 16..=1024, v2: 4..=1024)")]
    InvalidGroupSize {
        /// The rejected group size.
        group_size: usize,
    },
    /// A code handed to the bit packer does not fit in the bit width.
    #[error("code {code} at index {index} does not fit in {bits} bits")]
    CodeOutOfRange {
        /// Index of the first offending code.
        index: usize,
        /// The code.
        code: u8,
        /// The bit width.
        bits: u8,
    },
    /// A group's largest magnitude needs a scale beyond the f16 range (65504).
    #[error("group {group} has max |x| = {max_abs}, whose scale does not fit in f16")]
    ScaleOverflow {
        /// Index of the group within its frame.
        group: usize,
        /// The group's largest magnitude.
        max_abs: f32,
    },
    /// A segment ends before a region its header promises.
    #[error("truncated segment: {what} needs bytes {offset}..{end} but the segment has {present}")]
    Truncated {
        /// The region (e.g. "header", "scales").
        what: &'static str,
        /// Where the region starts.
        offset: u64,
        /// Where it ends.
        end: u64,
        /// Bytes present.
        present: usize,
    },
    /// A segment has bytes after its last region.
    #[error("segment has {present} bytes but its header accounts for {expected}")]
    TrailingBytes {
        /// Bytes the header accounts for.
        expected: u64,
        /// Bytes present.
        present: usize,
    },
    /// The segment does not start with the magic bytes.
    #[error("not a quantized segment (bad magic at offset 0)")]
    BadMagic,
    /// A segment version this crate does not know.
    #[error("unsupported segment version {version} at offset {offset}")]
    UnsupportedVersion {
        /// The version byte.
        version: u8,
        /// Its offset.
        offset: usize,
    },
    /// A header field (or the frame bitmap) holds an impossible value.
    #[error("corrupt segment field {field} at offset {offset}: value {value}, {reason}")]
    CorruptField {
        /// The field.
        field: &'static str,
        /// Its byte offset.
        offset: usize,
        /// The value found.
        value: u64,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A stored scale is NaN, infinite, or negative in a symmetric segment.
    #[error("corrupt scale #{index} at offset {offset} (bits {bits:#06x}): {reason}")]
    CorruptScale {
        /// Index of the scale among all stored scales.
        index: usize,
        /// Its byte offset.
        offset: usize,
        /// Its f16 bit pattern.
        bits: u16,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A finite value the target type cannot represent (e.g. |x| > 65504 for f16).
    #[error("value at index {index} ({value}) is outside the {target} range")]
    OutOfRange {
        /// Index of the first offending value.
        index: usize,
        /// The value.
        value: f32,
        /// The target type.
        target: &'static str,
    },
    /// A frame index beyond the segment's frame count.
    #[error("frame {index} is out of range (the segment has {frames} frames)")]
    FrameOutOfRange {
        /// The requested frame.
        index: usize,
        /// Frames in the segment.
        frames: usize,
    },
}

/// The first non-finite value of `x` as [`QuantError::NonFinite`]. The common case (all
/// finite) is one branch-free pass over the exponent bits, which vectorizes; the position
/// is looked for only when there is one.
pub(crate) fn check_finite(x: &[f32]) -> Result<(), QuantError> {
    const EXP: u32 = 0x7F80_0000;
    let any_special = x
        .iter()
        .fold(false, |bad, v| bad | (v.to_bits() & EXP == EXP));
    if any_special {
        if let Some(index) = x.iter().position(|v| !v.is_finite()) {
            return Err(QuantError::NonFinite {
                index,
                value: x[index],
            });
        }
    }
    Ok(())
}

pub(crate) fn check_len(what: &'static str, input: usize, output: usize) -> Result<(), QuantError> {
    if input == output {
        Ok(())
    } else {
        Err(QuantError::LengthMismatch {
            what,
            input,
            output,
        })
    }
}

/// A header field whose value the format does not allow.
pub(crate) fn corrupt(
    field: &'static str,
    offset: usize,
    value: u64,
    reason: &'static str,
) -> QuantError {
    QuantError::CorruptField {
        field,
        offset,
        value,
        reason,
    }
}

/// The checks every segment version starts with: `bytes` holds a `len`-byte header
/// (`what` names it in the error), the magic, version `version` and a bit width in
/// `MIN_BITS..=MAX_BITS`. Returns the header and the bit width.
pub(crate) fn segment_prefix<'a>(
    bytes: &'a [u8],
    what: &'static str,
    len: usize,
    version: u8,
) -> Result<(&'a [u8], u8), QuantError> {
    use crate::layout::{MAX_BITS, MIN_BITS};
    segment_prefix_bits(
        bytes,
        what,
        len,
        version,
        (MIN_BITS, MAX_BITS),
        "must be in 2..=8",
    )
}

/// [`segment_prefix`] with the bit widths `bits.0..=bits.1` (`reason` states them), for the
/// versions whose codes are wider than 8 bits (7 and 8: up to 12).
pub(crate) fn segment_prefix_bits<'a>(
    bytes: &'a [u8],
    what: &'static str,
    len: usize,
    version: u8,
    (min_bits, max_bits): (u8, u8),
    reason: &'static str,
) -> Result<(&'a [u8], u8), QuantError> {
    use crate::layout::{BITS_OFFSET, MAGIC, MAGIC_OFFSET, VERSION_OFFSET};
    let Some(h) = bytes.get(..len) else {
        return Err(QuantError::Truncated {
            what,
            offset: 0,
            end: len as u64,
            present: bytes.len(),
        });
    };
    if h[MAGIC_OFFSET..MAGIC_OFFSET + MAGIC.len()] != MAGIC {
        return Err(QuantError::BadMagic);
    }
    if h[VERSION_OFFSET] != version {
        return Err(QuantError::UnsupportedVersion {
            version: h[VERSION_OFFSET],
            offset: VERSION_OFFSET,
        });
    }
    let bits = h[BITS_OFFSET];
    if !(min_bits..=max_bits).contains(&bits) {
        return Err(corrupt("bits", BITS_OFFSET, bits.into(), reason));
    }
    Ok((h, bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_finite_names_the_first_non_finite_value() {
        let mut x = vec![1.5f32; 100];
        x[99] = f32::MAX;
        x[0] = -f32::MAX;
        assert!(check_finite(&x).is_ok());
        for (at, bad) in [(0, f32::NAN), (37, f32::INFINITY), (99, f32::NEG_INFINITY)] {
            let mut y = x.clone();
            y[at] = bad;
            y[(at + 50) % 100] = f32::NAN; // a second one, reported only if it comes first
            let first = at.min((at + 50) % 100);
            assert!(
                matches!(check_finite(&y), Err(QuantError::NonFinite { index, .. }) if index == first),
                "{at}"
            );
        }
    }
}
