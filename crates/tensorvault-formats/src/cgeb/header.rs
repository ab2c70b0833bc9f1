//! The 64-byte record header and its validation.

use zerocopy::byteorder::{BigEndian, U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::aux::CompressionType;
use super::error::CgebError;
use super::layout::{self as l, FORMAT};

/// The fixed 64-byte header of every CGEB record, every multi-byte field big-endian.
///
/// The seed declares it `align(64)`; here it is a byte-order view with alignment 1, so it
/// can be read in place from any buffer (a `Vec<u8>`, a memory map at any offset). The
/// 64-byte alignment is a property of where records are placed (batch files), not of the
/// type.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
pub struct EmbeddingHeader {
    /// Magic bytes: "CGEB".
    pub magic: [u8; 4],
    /// Format version (1).
    pub version: U16<BigEndian>,
    /// Flags: bit 0 `LE_PAYLOAD`, bits 1-2 aux compression, others zero.
    pub flags: U16<BigEndian>,
    /// Vector dimension.
    pub dimension: U32<BigEndian>,
    /// Number of experts (length of the expert weights).
    pub num_experts: u8,
    /// Number of selected experts.
    pub top_k: u8,
    /// Reserved, zero in v1.
    pub reserved: [u8; 2],
    /// xxh3-64 of every stored byte after the header.
    pub content_hash: U64<BigEndian>,
    /// Pipeline latency in microseconds.
    pub pipeline_latency_us: U64<BigEndian>,
    /// Offset of the aux data from the record start (0 if none).
    pub aux_data_offset: U64<BigEndian>,
    /// Length of the aux data as stored (0 if none).
    pub aux_data_length: U64<BigEndian>,
    /// Padding, zero in v1.
    pub padding: [u8; 16],
}

const _: () = assert!(std::mem::size_of::<EmbeddingHeader>() == 64);
const _: () = assert!(std::mem::size_of::<EmbeddingHeader>() == l::HEADER_SIZE);

impl EmbeddingHeader {
    /// Whether the float payload is stored little-endian (flag bit 0).
    #[must_use]
    pub fn le_payload(&self) -> bool {
        self.flags.get() & l::FLAG_LE_PAYLOAD != 0
    }

    /// The aux compression code from flag bits 1-2 (not validated).
    #[must_use]
    pub fn compression_code(&self) -> u8 {
        ((self.flags.get() & l::FLAG_AUX_COMPRESSION_MASK) >> l::FLAG_AUX_COMPRESSION_SHIFT) as u8
    }

    /// Bytes of the record before any aux data (header, vector, weights, selected).
    #[must_use]
    pub fn fixed_len(&self) -> u64 {
        l::fixed_len(self.dimension.get(), self.num_experts, self.top_k)
    }
}

/// What a validated header says about the record's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordLayout {
    pub dimension: usize,
    pub num_experts: usize,
    pub top_k: usize,
    pub le_payload: bool,
    pub compression: CompressionType,
    /// End of the selected experts (= start of any gap or aux data).
    pub fixed_len: usize,
    /// Aux range (offset, length) relative to the record, if any.
    pub aux: Option<(usize, usize)>,
    /// End of the record: the end of the aux data, or `fixed_len`.
    pub record_len: usize,
}

/// Check the header fields alone (no payload bytes needed). `base` is the file or buffer
/// offset of the record, added to every offset reported.
pub(crate) fn check_header(bytes: &[u8], base: u64) -> Result<&EmbeddingHeader, CgebError> {
    let Ok((h, _)) = EmbeddingHeader::ref_from_prefix(bytes) else {
        return Err(CgebError::BufferTooShort {
            format: FORMAT,
            what: "header",
            offset: base,
            needed: l::HEADER_SIZE as u64,
            available: bytes.len() as u64,
        });
    };
    let at = |o: usize| base + o as u64;
    if h.magic != l::MAGIC {
        return Err(CgebError::InvalidMagic {
            format: FORMAT,
            offset: at(l::MAGIC_OFFSET),
            expected: l::MAGIC,
            found: h.magic,
        });
    }
    let version = h.version.get();
    if version == 0 || version > l::VERSION {
        return Err(CgebError::UnsupportedVersion {
            format: FORMAT,
            version,
            offset: at(l::VERSION_OFFSET),
            supported: l::VERSION,
        });
    }
    let flags = h.flags.get();
    if flags & !l::FLAGS_KNOWN != 0 {
        return Err(CgebError::UnknownFlags {
            format: FORMAT,
            flags,
            unknown: flags & !l::FLAGS_KNOWN,
            offset: at(l::FLAGS_OFFSET),
        });
    }
    if CompressionType::from_code(h.compression_code()).is_none() {
        return Err(CgebError::UnsupportedCompression {
            code: h.compression_code(),
            offset: at(l::FLAGS_OFFSET),
        });
    }
    let dimension = h.dimension.get();
    if dimension == 0 || dimension > l::MAX_DIMENSION {
        return Err(CgebError::InvalidDimension {
            dimension: dimension.into(),
            offset: at(l::DIMENSION_OFFSET),
            reason: if dimension == 0 {
                "must be at least 1"
            } else {
                "above the limit of 1048576"
            },
        });
    }
    if h.top_k > h.num_experts {
        return Err(CgebError::InvalidField {
            format: FORMAT,
            field: "top_k",
            offset: at(l::TOP_K_OFFSET),
            reason: format!("{} is more than num_experts {}", h.top_k, h.num_experts),
        });
    }
    if h.reserved != [0; 2] {
        return Err(zero_field("reserved", version, at(l::RESERVED_OFFSET)));
    }
    if h.padding != [0; 16] {
        return Err(zero_field("padding", version, at(l::PADDING_OFFSET)));
    }
    let (aux_off, aux_len) = (h.aux_data_offset.get(), h.aux_data_length.get());
    if (aux_off == 0) != (aux_len == 0) {
        return Err(CgebError::AuxOutOfBounds {
            aux_offset: aux_off,
            aux_length: aux_len,
            offset: at(l::AUX_OFFSET_OFFSET),
            reason: "offset and length must both be zero or both non-zero".into(),
        });
    }
    if aux_len == 0 && h.compression_code() != 0 {
        return Err(CgebError::InvalidField {
            format: FORMAT,
            field: "flags",
            offset: at(l::FLAGS_OFFSET),
            reason: "aux compression set but the record has no aux data".into(),
        });
    }
    // v1 places aux data right after the fixed part: no gap the hash would cover but no
    // field would describe (a changed top_k would otherwise still hash the same bytes).
    if aux_len != 0 && aux_off != h.fixed_len() {
        let reason = if aux_off < h.fixed_len() {
            format!("overlaps the fixed part, which ends at {}", h.fixed_len())
        } else {
            format!(
                "must start right after the fixed part, at {}",
                h.fixed_len()
            )
        };
        return Err(CgebError::AuxOutOfBounds {
            aux_offset: aux_off,
            aux_length: aux_len,
            offset: at(l::AUX_OFFSET_OFFSET),
            reason,
        });
    }
    Ok(h)
}

/// A field the record's `version` requires to be zero (the record's own version, named
/// in the message: a version-2 record is not refused "in version 1").
fn zero_field(field: &'static str, version: u16, offset: u64) -> CgebError {
    CgebError::InvalidField {
        format: FORMAT,
        field,
        offset,
        reason: format!("must be zero in version {version}"),
    }
}

/// Check the header and that `bytes` holds everything it implies.
pub(crate) fn check_record(
    bytes: &[u8],
    base: u64,
) -> Result<(&EmbeddingHeader, RecordLayout), CgebError> {
    let h = check_header(bytes, base)?;
    let avail = bytes.len() as u64;
    let fixed = h.fixed_len();
    if fixed > avail {
        return Err(CgebError::BufferTooShort {
            format: FORMAT,
            what: "vector, expert weights and selected experts",
            offset: base + l::VECTOR_OFFSET as u64,
            needed: fixed,
            available: avail,
        });
    }
    let (aux_off, aux_len) = (h.aux_data_offset.get(), h.aux_data_length.get());
    let mut record_len = fixed;
    let aux = if aux_len == 0 {
        None
    } else {
        let end = aux_off.checked_add(aux_len).filter(|&e| e <= avail);
        let Some(end) = end else {
            return Err(CgebError::AuxOutOfBounds {
                aux_offset: aux_off,
                aux_length: aux_len,
                offset: base + l::AUX_OFFSET_OFFSET as u64,
                reason: format!("ends past the end of the record ({avail} bytes)"),
            });
        };
        record_len = end;
        // Both fit in `bytes.len()`, so they fit in usize.
        Some((aux_off as usize, aux_len as usize))
    };
    let compression = CompressionType::from_code(h.compression_code()).unwrap_or_default();
    Ok((
        h,
        RecordLayout {
            dimension: h.dimension.get() as usize,
            num_experts: h.num_experts.into(),
            top_k: h.top_k.into(),
            le_payload: h.le_payload(),
            compression,
            fixed_len: fixed as usize,
            aux,
            record_len: record_len as usize,
        },
    ))
}
