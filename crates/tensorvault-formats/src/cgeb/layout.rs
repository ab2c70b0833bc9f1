//! Every byte-level constant of the CGEB format, offsets derived from each other.
//! See `docs/formats/cgeb.md` for the prose version. All multi-byte fields are
//! big-endian in v1 (the float payload may be little-endian, see [`FLAG_LE_PAYLOAD`]).

/// Format name used in errors about records (`.cgeb` data).
pub const FORMAT: &str = "cgeb";
/// Format name used in errors about batch index files (`.cgei`).
pub const INDEX_FORMAT: &str = "cgei";

/// The four magic bytes at offset 0 of every record: "CGEB".
pub const MAGIC: [u8; 4] = *b"CGEB";
/// The version this code writes and the highest it reads: 2, whose content hash also
/// covers the header (v1's covers the bytes after it only).
pub const VERSION: u16 = 2;
/// The first version (content hash over the bytes after the header); still read.
pub const VERSION_V1: u16 = 1;

/// Offset of the magic.
pub const MAGIC_OFFSET: usize = 0;
/// Offset of the u16 version.
pub const VERSION_OFFSET: usize = MAGIC_OFFSET + 4;
/// Offset of the u16 flags.
pub const FLAGS_OFFSET: usize = VERSION_OFFSET + 2;
/// Offset of the u32 vector dimension.
pub const DIMENSION_OFFSET: usize = FLAGS_OFFSET + 2;
/// Offset of the u8 expert count.
pub const NUM_EXPERTS_OFFSET: usize = DIMENSION_OFFSET + 4;
/// Offset of the u8 top-k.
pub const TOP_K_OFFSET: usize = NUM_EXPERTS_OFFSET + 1;
/// Offset of the two reserved bytes (zero in v1).
pub const RESERVED_OFFSET: usize = TOP_K_OFFSET + 1;
/// Offset of the u64 content hash.
pub const CONTENT_HASH_OFFSET: usize = RESERVED_OFFSET + 2;
/// Offset of the u64 pipeline latency (microseconds).
pub const LATENCY_OFFSET: usize = CONTENT_HASH_OFFSET + 8;
/// Offset of the u64 aux data offset (from the record start; 0 if none).
pub const AUX_OFFSET_OFFSET: usize = LATENCY_OFFSET + 8;
/// Offset of the u64 aux data length (0 if none).
pub const AUX_LENGTH_OFFSET: usize = AUX_OFFSET_OFFSET + 8;
/// Offset of the 16 padding bytes (zero in v1).
pub const PADDING_OFFSET: usize = AUX_LENGTH_OFFSET + 8;
/// Size of the header; the vector starts here.
pub const HEADER_SIZE: usize = PADDING_OFFSET + 16;
/// Offset of the vector in a record.
pub const VECTOR_OFFSET: usize = HEADER_SIZE;

const _: () = assert!(HEADER_SIZE == 64);

/// Flag bit 0: the float payload (vector and expert weights) is little-endian.
pub const FLAG_LE_PAYLOAD: u16 = 1 << 0;
/// Flag bits 1-2: aux compression code (0 none, 1 LZ4, 2 Zstd; 3 is invalid in v1).
pub const FLAG_AUX_COMPRESSION_MASK: u16 = 0b110;
/// Shift of the aux compression code inside the flags.
pub const FLAG_AUX_COMPRESSION_SHIFT: u16 = 1;
/// Every flag bit v1 defines; a v1 reader rejects any other set bit.
pub const FLAGS_KNOWN: u16 = FLAG_LE_PAYLOAD | FLAG_AUX_COMPRESSION_MASK;

/// Largest vector dimension accepted (a documented limit: a 4 MiB vector).
pub const MAX_DIMENSION: u32 = 1 << 20;
/// Default limit on the decompressed size of aux data (a codec knob).
pub const DEFAULT_MAX_AUX_DECOMPRESSED: u64 = 64 << 20;
/// Size of the big-endian u64 uncompressed length that prefixes compressed aux data.
pub const AUX_LEN_PREFIX: usize = 8;

/// The four magic bytes of a batch index file: "CGEI".
pub const INDEX_MAGIC: [u8; 4] = *b"CGEI";
/// Index version written and highest read.
pub const INDEX_VERSION: u16 = 2;
/// The index version without a checksum (offset 28 reserved, zero); still read.
pub const INDEX_VERSION_V1: u16 = 1;
/// Index: offset of the u16 version.
pub const INDEX_VERSION_OFFSET: usize = 4;
/// Index: offset of the u16 flags (zero in v1).
pub const INDEX_FLAGS_OFFSET: usize = INDEX_VERSION_OFFSET + 2;
/// Index: offset of the u64 entry count.
pub const INDEX_COUNT_OFFSET: usize = INDEX_FLAGS_OFFSET + 2;
/// Index: offset of the u64 xxh3-64 of the whole data file.
pub const INDEX_DATA_HASH_OFFSET: usize = INDEX_COUNT_OFFSET + 8;
/// Index: offset of the u32 record alignment.
pub const INDEX_ALIGNMENT_OFFSET: usize = INDEX_DATA_HASH_OFFSET + 8;
/// Index: offset of the u32 reserved field (zero in v1).
pub const INDEX_RESERVED_OFFSET: usize = INDEX_ALIGNMENT_OFFSET + 4;
/// Index: size of the header; the u64 record offsets start here.
pub const INDEX_HEADER_SIZE: usize = INDEX_RESERVED_OFFSET + 4;
/// Version 2: u32 CRC-32C of header bytes `0..28` followed by the offsets (the field that
/// version 1 reserves).
pub const INDEX_CRC_OFFSET: usize = INDEX_RESERVED_OFFSET;
/// Index: size of one entry (a u64 file offset).
pub const INDEX_ENTRY_SIZE: usize = 8;

const _: () = assert!(INDEX_HEADER_SIZE == 32);

/// Default record alignment in batch data files (a page, for GPU Direct Storage).
pub const GDS_ALIGNMENT: u32 = 4096;
/// Smallest record alignment (one cache line; keeps every vector 64-byte aligned).
pub const MIN_ALIGNMENT: u32 = 64;
/// Largest record alignment accepted.
pub const MAX_ALIGNMENT: u32 = 1 << 20;
/// Alignment of buffers and file ranges in the O_DIRECT read path.
pub const DIRECT_IO_ALIGNMENT: usize = 4096;

/// Bytes of a record before any aux data: header, vector, expert weights, selected
/// experts (cannot overflow: every input is at most 32 bits wide).
#[must_use]
pub const fn fixed_len(dimension: u32, num_experts: u8, top_k: u8) -> u64 {
    selected_offset(dimension, num_experts) + top_k as u64
}

/// Offset of the expert weights in a record.
#[must_use]
pub const fn weights_offset(dimension: u32) -> u64 {
    VECTOR_OFFSET as u64 + dimension as u64 * 4
}

/// Offset of the selected experts in a record.
#[must_use]
pub const fn selected_offset(dimension: u32, num_experts: u8) -> u64 {
    weights_offset(dimension) + num_experts as u64 * 4
}

/// Whether `a` is a record alignment a batch file may use.
#[must_use]
pub const fn valid_alignment(a: u32) -> bool {
    a.is_power_of_two() && a >= MIN_ALIGNMENT && a <= MAX_ALIGNMENT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_offsets() {
        assert_eq!(CONTENT_HASH_OFFSET, 16);
        assert_eq!(LATENCY_OFFSET, 24);
        assert_eq!(AUX_OFFSET_OFFSET, 32);
        assert_eq!(AUX_LENGTH_OFFSET, 40);
        assert_eq!(PADDING_OFFSET, 48);
        assert_eq!(weights_offset(1536), 6208);
        assert_eq!(selected_offset(1536, 8), 6240);
        assert_eq!(fixed_len(1536, 8, 2), 6242);
        assert!(valid_alignment(64) && valid_alignment(4096) && !valid_alignment(32));
    }
}
