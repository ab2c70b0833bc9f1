//! Every byte-level constant of the CVC format, offsets derived from each other.
//! See `docs/formats/cvc.md` for the prose version.

/// Format name used in errors.
pub const FORMAT: &str = "cvc";

/// The four magic bytes at offset 0.
pub const MAGIC: &[u8; 4] = b"CVCF";
/// Offset of the magic.
pub const MAGIC_OFFSET: u64 = 0;
/// Length of the magic.
pub const MAGIC_LEN: u64 = MAGIC.len() as u64;

/// v1.0: offset of the u16 major version.
pub const V1_MAJOR_OFFSET: u64 = MAGIC_OFFSET + MAGIC_LEN;
/// v1.0: offset of the u16 minor version.
pub const V1_MINOR_OFFSET: u64 = V1_MAJOR_OFFSET + 2;
/// v1.0: offset of the u32 JSON header length.
pub const V1_HEADER_LEN_OFFSET: u64 = V1_MINOR_OFFSET + 2;
/// v1.0: offset of the JSON header.
pub const V1_JSON_OFFSET: u64 = V1_HEADER_LEN_OFFSET + 4;
/// The major version written by `decompressed` 2.1.1 (and by us).
pub const V1_MAJOR: u16 = 1;
/// The minor version written.
pub const V1_MINOR: u16 = 0;
/// The reference's columnar format (not supported here).
pub const COLUMNAR_MAJOR: u16 = 2;

/// v0 (legacy, the seed's layout): offset of the u32 JSON header length.
pub const V0_HEADER_LEN_OFFSET: u64 = MAGIC_OFFSET + MAGIC_LEN;
/// v0: offset of the JSON header.
pub const V0_JSON_OFFSET: u64 = V0_HEADER_LEN_OFFSET + 4;

/// Size of the u32 payload length that starts every chunk frame.
pub const FRAME_LEN_SIZE: u64 = 4;
/// Size of the u32 CRC-32 that follows it in v1.0.
pub const FRAME_CRC_SIZE: u64 = 4;

/// Page size used by `mmap_optimized` files: the header region and every chunk frame
/// start on a multiple of it.
pub const PAGE: u64 = 4096;

/// Largest JSON header accepted: 64 MiB, about 500,000 chunk entries of ~130 bytes (50
/// billion vectors at 100,000 per chunk). The header is parsed into a JSON tree, which
/// costs up to ~80x its size for adversarial input (many tiny objects), so the limit also
/// bounds a crafted header's memory to a few GB.
pub const MAX_HEADER_LEN: u64 = 64 << 20;
/// Most JSON values (counted as 1 + containers + commas, outside strings) a header may
/// hold before it is parsed: the tree costs ~100 bytes per value, so this keeps a crafted
/// header (millions of tiny objects, or of empty chunks) to a few hundred MB. A billion
/// vectors in 100,000-row chunks need ~60,000.
pub const MAX_HEADER_NODES: u64 = 1 << 21;

/// The byte that opens a JSON object.
pub const JSON_OPEN: u8 = b'{';

/// The two framings of a CVC file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framing {
    /// Legacy (decompressed 0.1.0 and the seed): no version, no per-chunk CRC.
    V0,
    /// v1.0 (decompressed 2.x): u16 major, u16 minor, per-chunk CRC-32.
    V1,
}

impl Framing {
    /// Offset of the u32 JSON header length.
    #[must_use]
    pub const fn header_len_offset(self) -> u64 {
        match self {
            Framing::V0 => V0_HEADER_LEN_OFFSET,
            Framing::V1 => V1_HEADER_LEN_OFFSET,
        }
    }

    /// Offset where the JSON header starts.
    #[must_use]
    pub const fn json_offset(self) -> u64 {
        match self {
            Framing::V0 => V0_JSON_OFFSET,
            Framing::V1 => V1_JSON_OFFSET,
        }
    }

    /// Bytes of framing before each chunk payload.
    #[must_use]
    pub const fn frame_prefix(self) -> u64 {
        match self {
            Framing::V0 => FRAME_LEN_SIZE,
            Framing::V1 => FRAME_LEN_SIZE + FRAME_CRC_SIZE,
        }
    }

    /// A short name (`"v0"`, `"v1.0"`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Framing::V0 => "v0",
            Framing::V1 => "v1.0",
        }
    }
}

/// Round `x` up to a multiple of [`PAGE`], or `None` on overflow.
#[must_use]
pub fn page_align(x: u64) -> Option<u64> {
    x.checked_next_multiple_of(PAGE)
}
