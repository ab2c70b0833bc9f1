//! The 32-byte header: parse (header-only, for `inspect`) and encode.

use tensorvault_core::checksum::crc32;

use super::error::MobiError;
use super::layout::*;

/// The decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Format version.
    pub version: u16,
    /// Stored header CRC32.
    pub header_crc: u32,
    /// Flags (see `FLAG_*` in [`super::layout`]).
    pub flags: u32,
    /// Total file size, footer included.
    pub total_size: u32,
    /// Offset of the metadata section (32 in v1).
    pub metadata_offset: u32,
    /// Offset of the constant-tensor section.
    pub tensor_offset: u32,
    /// Offset of the operator-graph section.
    pub graph_offset: u32,
}

pub(crate) fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(crate) fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// CRC32 of the 32 header bytes with the checksum field zeroed.
pub fn header_crc(header: &[u8; HEADER_SIZE]) -> u32 {
    let mut h = *header;
    h[HEADER_CRC_OFFSET..HEADER_CRC_OFFSET + 4].fill(0);
    crc32(&h)
}

impl Header {
    /// Parse and check the header alone: magic, version, reserved field and flag bits,
    /// header checksum, and the section offsets against each other and the declared
    /// total size. Collects every problem it finds; the first is returned by
    /// [`Header::parse`].
    pub(crate) fn parse_collect(bytes: &[u8], problems: &mut Vec<MobiError>) -> Option<Header> {
        let Some(h) = bytes.get(..HEADER_SIZE) else {
            problems.push(MobiError::Truncated {
                what: "header",
                offset: 0,
                needed: HEADER_SIZE as u64,
                available: bytes.len() as u64,
            });
            return None;
        };
        let mut found = [0u8; 4];
        found.copy_from_slice(&h[..4]);
        if found != MAGIC {
            // Nothing else in a file that is not MOBI is worth reporting.
            problems.push(MobiError::InvalidMagic { found });
            return None;
        }
        let header = Header {
            version: le_u16(h, VERSION_OFFSET),
            header_crc: le_u32(h, HEADER_CRC_OFFSET),
            flags: le_u32(h, FLAGS_OFFSET),
            total_size: le_u32(h, TOTAL_SIZE_OFFSET),
            metadata_offset: le_u32(h, METADATA_OFFSET_OFFSET),
            tensor_offset: le_u32(h, TENSOR_OFFSET_OFFSET),
            graph_offset: le_u32(h, GRAPH_OFFSET_OFFSET),
        };
        if header.version == 0 || header.version > VERSION {
            // A newer layout may mean anything: stop here.
            problems.push(MobiError::UnsupportedVersion {
                version: header.version,
                offset: VERSION_OFFSET as u64,
                supported: VERSION,
            });
            return None;
        }
        let mut arr = [0u8; HEADER_SIZE];
        arr.copy_from_slice(h);
        let computed = header_crc(&arr);
        if computed != header.header_crc {
            problems.push(MobiError::ChecksumMismatch {
                what: "header",
                offset: HEADER_CRC_OFFSET as u64,
                stored: header.header_crc,
                computed,
            });
        }
        let reserved = le_u16(h, RESERVED_OFFSET);
        if reserved != 0 {
            problems.push(MobiError::ReservedBits {
                field: "header reserved u16",
                value: u64::from(reserved),
                offset: RESERVED_OFFSET as u64,
            });
        }
        if header.flags & !FLAGS_KNOWN != 0 {
            problems.push(MobiError::ReservedBits {
                field: "flags",
                value: u64::from(header.flags & !FLAGS_KNOWN),
                offset: FLAGS_OFFSET as u64,
            });
        }
        header.check_offsets(problems);
        Some(header)
    }

    /// Smallest metadata, tensor and graph sections and file of this header's version.
    fn minimums(&self) -> (u64, u64, u64, usize) {
        if self.version >= VERSION_2 {
            (
                V2_METADATA_MIN_SIZE as u64,
                V2_TENSOR_SECTION_MIN_SIZE as u64,
                V2_GRAPH_SECTION_MIN_SIZE as u64,
                V2_MIN_FILE_SIZE,
            )
        } else {
            (METADATA_FIXED_SIZE as u64, 4, 4, MIN_FILE_SIZE)
        }
    }

    fn check_offsets(&self, problems: &mut Vec<MobiError>) {
        let (meta_min, tensors_min, graph_min, file_min) = self.minimums();
        let bad =
            |field, value: u32, offset: usize, reason: String| MobiError::InvalidHeaderField {
                field,
                value: u64::from(value),
                offset: offset as u64,
                reason,
            };
        if (self.total_size as usize) < file_min {
            problems.push(bad(
                "total_size",
                self.total_size,
                TOTAL_SIZE_OFFSET,
                format!("smaller than the smallest file ({file_min} bytes)"),
            ));
        }
        if self.metadata_offset as usize != HEADER_SIZE {
            problems.push(bad(
                "metadata_offset",
                self.metadata_offset,
                METADATA_OFFSET_OFFSET,
                format!("must be {HEADER_SIZE}"),
            ));
        }
        let end = u64::from(self.total_size).saturating_sub(FOOTER_SIZE as u64);
        if u64::from(self.tensor_offset) < u64::from(self.metadata_offset) + meta_min
            || u64::from(self.tensor_offset) > end
        {
            problems.push(bad(
                "tensor_offset",
                self.tensor_offset,
                TENSOR_OFFSET_OFFSET,
                format!(
                    "must lie in {}..={end} (after the metadata, before the footer)",
                    u64::from(self.metadata_offset) + meta_min
                ),
            ));
        }
        if u64::from(self.graph_offset) < u64::from(self.tensor_offset) + tensors_min
            || u64::from(self.graph_offset) + graph_min > end
        {
            problems.push(bad(
                "graph_offset",
                self.graph_offset,
                GRAPH_OFFSET_OFFSET,
                format!(
                    "must lie in {}..={} (after the tensor section, before the footer)",
                    u64::from(self.tensor_offset) + tensors_min,
                    end.saturating_sub(graph_min)
                ),
            ));
        }
    }

    /// Parse and check the first 32 bytes (header-only parsing, for `inspect`). Does not
    /// read or checksum the rest of the file.
    ///
    /// # Errors
    /// The first problem found: [`MobiError::Truncated`], [`MobiError::InvalidMagic`],
    /// [`MobiError::UnsupportedVersion`], [`MobiError::ChecksumMismatch`],
    /// [`MobiError::ReservedBits`] or [`MobiError::InvalidHeaderField`].
    pub fn parse(bytes: &[u8]) -> Result<Header, MobiError> {
        let mut problems = Vec::new();
        let h = Header::parse_collect(bytes, &mut problems);
        match (problems.into_iter().next(), h) {
            (Some(e), _) => Err(e),
            (None, Some(h)) => Ok(h),
            // parse_collect always reports why it returns None; keep a typed fallback.
            (None, None) => Err(MobiError::Truncated {
                what: "header",
                offset: 0,
                needed: HEADER_SIZE as u64,
                available: bytes.len() as u64,
            }),
        }
    }

    /// The 32 header bytes, with the header checksum computed.
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut h = [0u8; HEADER_SIZE];
        h[..4].copy_from_slice(&MAGIC);
        h[VERSION_OFFSET..VERSION_OFFSET + 2].copy_from_slice(&self.version.to_le_bytes());
        h[FLAGS_OFFSET..FLAGS_OFFSET + 4].copy_from_slice(&self.flags.to_le_bytes());
        h[TOTAL_SIZE_OFFSET..TOTAL_SIZE_OFFSET + 4].copy_from_slice(&self.total_size.to_le_bytes());
        h[METADATA_OFFSET_OFFSET..METADATA_OFFSET_OFFSET + 4]
            .copy_from_slice(&self.metadata_offset.to_le_bytes());
        h[TENSOR_OFFSET_OFFSET..TENSOR_OFFSET_OFFSET + 4]
            .copy_from_slice(&self.tensor_offset.to_le_bytes());
        h[GRAPH_OFFSET_OFFSET..GRAPH_OFFSET_OFFSET + 4]
            .copy_from_slice(&self.graph_offset.to_le_bytes());
        let crc = header_crc(&h);
        h[HEADER_CRC_OFFSET..HEADER_CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
        h
    }
}
