//! The batch index file (`NAME.cgei`): a 32-byte header and one u64 record offset per
//! record, all big-endian.

use zerocopy::byteorder::{BigEndian, U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::error::CgebError;
use super::layout::{self as l, INDEX_FORMAT};

/// The 32-byte header of a `.cgei` index file.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
pub struct EmbeddingIndexHeader {
    /// Magic bytes: "CGEI".
    pub magic: [u8; 4],
    /// Index version (1).
    pub version: U16<BigEndian>,
    /// Flags, zero in v1.
    pub flags: U16<BigEndian>,
    /// Number of records.
    pub entry_count: U64<BigEndian>,
    /// xxh3-64 of the whole `.cgeb` data file.
    pub data_file_hash: U64<BigEndian>,
    /// Every record offset is a multiple of this (a power of two, 64..=1 MiB).
    pub record_alignment: U32<BigEndian>,
    /// Reserved, zero in v1.
    pub reserved: U32<BigEndian>,
}

const _: () = assert!(std::mem::size_of::<EmbeddingIndexHeader>() == l::INDEX_HEADER_SIZE);

/// A parsed and checked batch index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchIndex {
    /// xxh3-64 of the data file, as stored.
    pub data_file_hash: u64,
    /// Record alignment.
    pub record_alignment: u32,
    /// Record offsets in the data file, strictly increasing, aligned, in range.
    pub offsets: Vec<u64>,
    /// 2 (written by default): the header carries a CRC-32C of itself and the offsets;
    /// 1: no checksum (an index written before version 2; still read).
    pub version: u16,
}

/// CRC-32C of a serialized index: header bytes `0..28` then the offsets.
fn index_crc(bytes: &[u8]) -> u32 {
    let head = &bytes[..l::INDEX_CRC_OFFSET.min(bytes.len())];
    let tail = bytes.get(l::INDEX_HEADER_SIZE..).unwrap_or_default();
    tensorvault_core::checksum::crc32c_append(tensorvault_core::checksum::crc32c(head), tail)
}

impl BatchIndex {
    /// Serialize an index (offsets as given; the caller guarantees the rules).
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let v2 = self.version >= l::INDEX_VERSION;
        let h = EmbeddingIndexHeader {
            magic: l::INDEX_MAGIC,
            version: U16::new(if v2 {
                l::INDEX_VERSION
            } else {
                l::INDEX_VERSION_V1
            }),
            flags: U16::new(0),
            entry_count: U64::new(self.offsets.len() as u64),
            data_file_hash: U64::new(self.data_file_hash),
            record_alignment: U32::new(self.record_alignment),
            reserved: U32::new(0),
        };
        let mut out = Vec::with_capacity(l::INDEX_HEADER_SIZE + 8 * self.offsets.len());
        out.extend_from_slice(h.as_bytes());
        for o in &self.offsets {
            out.extend_from_slice(&o.to_be_bytes());
        }
        if v2 {
            let crc = index_crc(&out);
            out[l::INDEX_CRC_OFFSET..l::INDEX_CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        }
        out
    }

    /// Parse index bytes and check them against a data file of `data_len` bytes:
    /// length = 32 + 8 x count, the first offset 0, every offset aligned, strictly
    /// increasing and leaving room for a record header before the end of the data file,
    /// and an empty data file when there are no records. (The data-file hash is
    /// checked by the reader, which has the data.)
    ///
    /// # Errors
    /// [`CgebError::BufferTooShort`], [`CgebError::InvalidMagic`],
    /// [`CgebError::UnsupportedVersion`], [`CgebError::UnknownFlags`],
    /// [`CgebError::InvalidField`] (alignment, reserved),
    /// [`CgebError::IndexLengthMismatch`], [`CgebError::BadIndexEntry`].
    pub fn parse(bytes: &[u8], data_len: u64) -> Result<Self, CgebError> {
        let Ok((h, rest)) = EmbeddingIndexHeader::ref_from_prefix(bytes) else {
            return Err(CgebError::BufferTooShort {
                format: INDEX_FORMAT,
                what: "index header",
                offset: 0,
                needed: l::INDEX_HEADER_SIZE as u64,
                available: bytes.len() as u64,
            });
        };
        if h.magic != l::INDEX_MAGIC {
            return Err(CgebError::InvalidMagic {
                format: INDEX_FORMAT,
                offset: 0,
                expected: l::INDEX_MAGIC,
                found: h.magic,
            });
        }
        let version = h.version.get();
        if version == 0 || version > l::INDEX_VERSION {
            return Err(CgebError::UnsupportedVersion {
                format: INDEX_FORMAT,
                version,
                offset: l::INDEX_VERSION_OFFSET as u64,
                supported: l::INDEX_VERSION,
            });
        }
        if h.flags.get() != 0 {
            return Err(CgebError::UnknownFlags {
                format: INDEX_FORMAT,
                flags: h.flags.get(),
                unknown: h.flags.get(),
                offset: l::INDEX_FLAGS_OFFSET as u64,
            });
        }
        let align = h.record_alignment.get();
        if !l::valid_alignment(align) {
            return Err(CgebError::InvalidField {
                format: INDEX_FORMAT,
                field: "record_alignment",
                offset: l::INDEX_ALIGNMENT_OFFSET as u64,
                reason: format!("{align} is not a power of two in 64..=1048576"),
            });
        }
        if version == l::INDEX_VERSION_V1 && h.reserved.get() != 0 {
            return Err(CgebError::InvalidField {
                format: INDEX_FORMAT,
                field: "reserved",
                offset: l::INDEX_RESERVED_OFFSET as u64,
                reason: "must be zero in version 1".into(),
            });
        }
        let count = h.entry_count.get();
        if version >= l::INDEX_VERSION {
            // Before anything else is trusted: the checksum covers the count and every
            // offset, so a deleted, reordered or truncated entry is caught here.
            let computed = index_crc(bytes);
            if computed != h.reserved.get() {
                return Err(CgebError::IndexChecksumMismatch {
                    offset: l::INDEX_CRC_OFFSET as u64,
                    stored: h.reserved.get(),
                    computed,
                });
            }
        }
        let expected = count
            .checked_mul(l::INDEX_ENTRY_SIZE as u64)
            .and_then(|n| n.checked_add(l::INDEX_HEADER_SIZE as u64));
        if expected != Some(bytes.len() as u64) {
            return Err(CgebError::IndexLengthMismatch {
                count,
                offset: l::INDEX_COUNT_OFFSET as u64,
                expected: expected.unwrap_or(u64::MAX),
                found: bytes.len() as u64,
            });
        }
        // The length check bounds `count` by the bytes present, so this allocation is
        // no larger than the index file itself.
        let Ok(entries) = <[U64<BigEndian>]>::ref_from_bytes(rest) else {
            return Err(CgebError::IndexLengthMismatch {
                count,
                offset: l::INDEX_COUNT_OFFSET as u64,
                expected: expected.unwrap_or(u64::MAX),
                found: bytes.len() as u64,
            });
        };
        let mut offsets = Vec::with_capacity(entries.len());
        let mut prev: Option<u64> = None;
        for (i, e) in entries.iter().enumerate() {
            let value = e.get();
            let bad = |reason: String| CgebError::BadIndexEntry {
                entry: i as u64,
                offset: (l::INDEX_HEADER_SIZE + i * l::INDEX_ENTRY_SIZE) as u64,
                value,
                reason,
            };
            if value % u64::from(align) != 0 {
                return Err(bad(format!(
                    "not a multiple of the record alignment {align}"
                )));
            }
            if i == 0 && value != 0 {
                return Err(bad(
                    "the first record must start at offset 0 (bytes before it would belong to no record)"
                        .into(),
                ));
            }
            if let Some(p) = prev {
                if value <= p {
                    return Err(bad(format!(
                        "not above the previous entry's offset {p} (entries must be sorted)"
                    )));
                }
            }
            let fits =
                matches!(value.checked_add(l::HEADER_SIZE as u64), Some(end) if end <= data_len);
            if !fits {
                return Err(bad(format!(
                    "a record header there would end past the data file ({data_len} bytes)"
                )));
            }
            prev = Some(value);
            offsets.push(value);
        }
        if offsets.is_empty() && data_len != 0 {
            return Err(CgebError::InvalidField {
                format: INDEX_FORMAT,
                field: "entry_count",
                offset: l::INDEX_COUNT_OFFSET as u64,
                reason: format!(
                    "0 records, but the data file has {data_len} bytes (it must end at the last record's end)"
                ),
            });
        }
        Ok(BatchIndex {
            data_file_hash: h.data_file_hash.get(),
            record_alignment: align,
            offsets,
            version,
        })
    }

    /// Number of records.
    #[must_use]
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether the batch is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Byte range of record `i` in a data file of `data_len` bytes: from its offset to
    /// the next record's offset (or the end of the file).
    #[must_use]
    pub fn range(&self, i: usize, data_len: u64) -> Option<(u64, u64)> {
        let start = *self.offsets.get(i)?;
        let end = self.offsets.get(i + 1).copied().unwrap_or(data_len);
        Some((start, end))
    }
}
