//! Every constant of the quantized segment format (`docs/formats/quant.md`) in one place.
//!
//! Each header offset is derived from the previous field's offset and size, so a field
//! cannot be moved without moving everything after it. All multi-byte fields are
//! little-endian.

/// Segment magic: `TQTC` (ADR-018's name for the codec's segment) then a PNG-style tail
/// (`\r\n`, `^Z`, `\n`) that catches text-mode line-ending damage and `type` on DOS.
pub const MAGIC: [u8; 8] = [b'T', b'Q', b'T', b'C', 0x0D, 0x0A, 0x1A, 0x0A];
/// The only segment version this crate reads and writes.
pub const VERSION: u8 = 1;

/// Offset of [`MAGIC`].
pub const MAGIC_OFFSET: usize = 0;
/// Offset of the `u8` version.
pub const VERSION_OFFSET: usize = MAGIC_OFFSET + MAGIC.len();
/// Offset of the `u8` bit width (2..=8).
pub const BITS_OFFSET: usize = VERSION_OFFSET + size_of::<u8>();
/// Offset of the `u8` flags (see [`FLAG_FULL_RANGE`]).
pub const FLAGS_OFFSET: usize = BITS_OFFSET + size_of::<u8>();
/// Offset of the `u8` base-2 logarithm of the group size (4..=10).
pub const GROUP_LOG2_OFFSET: usize = FLAGS_OFFSET + size_of::<u8>();
/// Offset of the `u32` number of values in one frame (>= 1).
pub const VALUES_PER_FRAME_OFFSET: usize = GROUP_LOG2_OFFSET + size_of::<u8>();
/// Offset of the `u32` number of frames (>= 1).
pub const FRAME_COUNT_OFFSET: usize = VALUES_PER_FRAME_OFFSET + size_of::<u32>();
/// Offset of the `u32` number of scale sets (1..=frame count).
pub const SCALE_SET_COUNT_OFFSET: usize = FRAME_COUNT_OFFSET + size_of::<u32>();
/// Size of the fixed header; the frame bitmap starts here.
pub const HEADER_LEN: usize = SCALE_SET_COUNT_OFFSET + size_of::<u32>();
/// Offset of the frame bitmap (bit `i` set: frame `i` starts a new scale set).
pub const BITMAP_OFFSET: usize = HEADER_LEN;

/// Bytes per stored scale (IEEE binary16, little-endian).
pub const SCALE_BYTES: usize = size_of::<u16>();

/// Flag bit 0: codes use every level `-2^(b-1) ..= 2^(b-1)-1` with a signed scale
/// (the gguf Q4_0 convention). Clear: symmetric levels `±(2^(b-1)-1)`, scale >= 0.
pub const FLAG_FULL_RANGE: u8 = 1 << 0;
/// Every flag bit this version defines; any other set bit is rejected.
pub const KNOWN_FLAGS: u8 = FLAG_FULL_RANGE;

/// Smallest supported bit width.
pub const MIN_BITS: u8 = 2;
/// Largest supported bit width.
pub const MAX_BITS: u8 = 8;
/// Smallest group size exponent (16 values).
pub const MIN_GROUP_LOG2: u8 = 4;
/// Largest group size exponent (1024 values).
pub const MAX_GROUP_LOG2: u8 = 10;
/// Smallest group size.
pub const MIN_GROUP_SIZE: usize = 1 << MIN_GROUP_LOG2;
/// Largest group size (also the size of the encoder's on-stack code buffer).
pub const MAX_GROUP_SIZE: usize = 1 << MAX_GROUP_LOG2;

/// Default temporal drift tolerance: a frame keeps the current scale set while every
/// group's max |x| is within 10% of the max the set was fitted to.
pub const DEFAULT_DRIFT_TOLERANCE: f32 = 0.10;

/// Default group size for a bit width: the smallest power of two whose f16 scale
/// overhead (16 / group bits per value) keeps a single 4096-value frame, header included,
/// above ADR-018's compression floors (8-bit 3.9x, 7-bit 4.4x, 5-bit 6.2x, 3-bit 10.3x).
/// See `docs/formats/quant.md` for the table and the error cost of each choice.
pub const fn default_group_size(bits: u8) -> usize {
    match bits {
        0..=3 => 512,
        4 | 5 => 256,
        _ => 128,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_24_bytes_and_fields_are_contiguous() {
        assert_eq!(VERSION_OFFSET, 8);
        assert_eq!(BITS_OFFSET, 9);
        assert_eq!(FLAGS_OFFSET, 10);
        assert_eq!(GROUP_LOG2_OFFSET, 11);
        assert_eq!(VALUES_PER_FRAME_OFFSET, 12);
        assert_eq!(FRAME_COUNT_OFFSET, 16);
        assert_eq!(SCALE_SET_COUNT_OFFSET, 20);
        assert_eq!(HEADER_LEN, 24);
    }
}
