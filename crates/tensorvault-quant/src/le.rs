//! Little-endian field reads at offsets the caller has already bounded (a parsed header
//! of known length): every segment parser reads its fields through these.

/// The u16 at `b[off..off + 2]`.
pub(crate) fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

/// The u32 at `b[off..off + 4]`.
pub(crate) fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// The f32 whose bits are the u32 at `b[off..off + 4]`.
pub(crate) fn f32_at(b: &[u8], off: usize) -> f32 {
    f32::from_bits(u32_at(b, off))
}
