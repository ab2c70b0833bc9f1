//! CGEB's own error enum, wrapped by [`crate::FormatError::Cgeb`].
//!
//! Every variant names the field or structure and the byte offset (from the start of
//! the buffer handed to the decoder, or the file offset when reading a batch file).

/// A CGEB record or batch index that cannot be encoded, decoded or trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CgebError {
    /// The first four bytes are not the magic.
    #[error("{format}: invalid magic at offset {offset}: expected {expected:?}, found {found:?}")]
    InvalidMagic {
        /// `"cgeb"` or `"cgei"`.
        format: &'static str,
        /// Offset of the magic.
        offset: u64,
        /// The required magic.
        expected: [u8; 4],
        /// What was there.
        found: [u8; 4],
    },
    /// A version this reader does not know (0, or above its own).
    #[error("{format}: unsupported version {version} at offset {offset} (this reader supports 1..={supported})")]
    UnsupportedVersion {
        /// `"cgeb"` or `"cgei"`.
        format: &'static str,
        /// The version found.
        version: u16,
        /// Offset of the version field.
        offset: u64,
        /// The highest version supported.
        supported: u16,
    },
    /// Flag bits this version does not define are set.
    #[error("{format}: unknown flag bits {unknown:#06x} in flags {flags:#06x} at offset {offset}")]
    UnknownFlags {
        /// `"cgeb"` or `"cgei"`.
        format: &'static str,
        /// The whole flags field.
        flags: u16,
        /// The bits that are not defined.
        unknown: u16,
        /// Offset of the flags field.
        offset: u64,
    },
    /// The aux compression code (flag bits 1-2) is not one v1 defines.
    #[error("cgeb: unsupported aux compression code {code} in flags at offset {offset}")]
    UnsupportedCompression {
        /// The code found.
        code: u8,
        /// Offset of the flags field.
        offset: u64,
    },
    /// The buffer ends before a structure the header implies.
    #[error("{format}: buffer too short for {what} at offset {offset}: need {needed} bytes, have {available}")]
    BufferTooShort {
        /// `"cgeb"` or `"cgei"`.
        format: &'static str,
        /// The structure that does not fit.
        what: &'static str,
        /// Where the structure starts.
        offset: u64,
        /// Bytes needed from the start of the record (or file).
        needed: u64,
        /// Bytes available.
        available: u64,
    },
    /// An encode target buffer is too small.
    #[error("cgeb: buffer too small: need {needed}, have {available}")]
    BufferTooSmall {
        /// Bytes the record needs.
        needed: u64,
        /// Bytes the caller's buffer holds.
        available: u64,
    },
    /// The vector dimension is 0 or above [`super::layout::MAX_DIMENSION`].
    #[error("cgeb: invalid dimension {dimension} at offset {offset}: {reason}")]
    InvalidDimension {
        /// The dimension.
        dimension: u64,
        /// Offset of the dimension field (0 when encoding).
        offset: u64,
        /// Why.
        reason: &'static str,
    },
    /// A header or index field has a value v1 does not allow.
    #[error("{format}: invalid {field} at offset {offset}: {reason}")]
    InvalidField {
        /// `"cgeb"` or `"cgei"`.
        format: &'static str,
        /// The field.
        field: &'static str,
        /// Offset of the field.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The aux data range lies outside the record or overlaps its fixed part.
    #[error("cgeb: aux data (offset {aux_offset}, length {aux_length}) at header offset {offset}: {reason}")]
    AuxOutOfBounds {
        /// The stored aux offset (relative to the record).
        aux_offset: u64,
        /// The stored aux length.
        aux_length: u64,
        /// File/buffer offset of the aux offset field.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// Compressed aux data does not decompress to its declared length.
    #[error("cgeb: aux data at offset {offset}: {reason}")]
    AuxCorrupt {
        /// Offset of the aux data.
        offset: u64,
        /// What went wrong.
        reason: String,
    },
    /// The stored content hash does not match the bytes.
    #[error("cgeb: content hash mismatch for the record at offset {offset}: stored {stored:#018x}, computed {computed:#018x}")]
    HashMismatch {
        /// Offset of the record.
        offset: u64,
        /// Hash in the header.
        stored: u64,
        /// Hash of the bytes after the header.
        computed: u64,
    },
    /// A version-2 index does not match its own checksum (an entry deleted, changed or
    /// cut off, or a damaged header).
    #[error("cgei: index checksum mismatch (field at offset {offset}): stored {stored:#010x}, computed {computed:#010x}")]
    IndexChecksumMismatch {
        /// Offset of the checksum field.
        offset: u64,
        /// Checksum in the index.
        stored: u32,
        /// Checksum of the header and offsets.
        computed: u32,
    },
    /// The index's data-file hash does not match the data file.
    #[error("cgei: data file hash mismatch (field at offset {offset}): index says {stored:#018x}, data file hashes to {computed:#018x}")]
    DataFileHashMismatch {
        /// Offset of the hash field in the index.
        offset: u64,
        /// Hash in the index.
        stored: u64,
        /// Hash of the data file.
        computed: u64,
    },
    /// An index entry is not usable (unsorted, out of range, misaligned).
    #[error("cgei: entry {entry} at offset {offset}: record offset {value}: {reason}")]
    BadIndexEntry {
        /// Entry number.
        entry: u64,
        /// File offset of the entry in the index.
        offset: u64,
        /// The record offset stored there.
        value: u64,
        /// What is wrong.
        reason: String,
    },
    /// The index length disagrees with its entry count.
    #[error("cgei: entry_count {count} at offset {offset} implies {expected} bytes, the index has {found}")]
    IndexLengthMismatch {
        /// The entry count.
        count: u64,
        /// Offset of the count field.
        offset: u64,
        /// Length implied by the count.
        expected: u64,
        /// Actual length.
        found: u64,
    },
    /// Bytes between a record's end and the next record's offset are not zero (spec §2):
    /// nothing checks them, so they could hold anything, e.g. whole records an index
    /// rewritten with entries removed no longer lists.
    #[error("cgeb: record {record} ends at offset {record_end}, but the bytes from there to the next record's offset {next} are not zero (first non-zero byte at offset {offset})")]
    GapNotZero {
        /// The record (index entry) before the gap.
        record: u64,
        /// File offset where the record ends.
        record_end: u64,
        /// File offset of the next record.
        next: u64,
        /// File offset of the first non-zero byte in the gap.
        offset: u64,
    },
    /// The data file goes on after its last record's end (spec §2: it ends there).
    #[error("cgeb: the data file has {file_len} bytes, but its last record (record {record}) ends at offset {offset}")]
    TrailingData {
        /// The last record.
        record: u64,
        /// File offset where it ends.
        offset: u64,
        /// Length of the data file.
        file_len: u64,
    },
    /// A record index past the end of a batch.
    #[error("cgeb: record {index} out of range (batch has {count})")]
    IndexOutOfRange {
        /// The requested record.
        index: u64,
        /// Records in the batch.
        count: u64,
    },
}
