//! The chunk table: framing detection and the layout checks that run when a reader
//! opens a file, before anything sized by the file is allocated.

use std::sync::Arc;

use crate::cvc::backend::ChunkCodec;
use crate::cvc::compression::Compression;
use crate::cvc::header::CvcHeader;
use crate::cvc::layout::{self, Framing, FORMAT, JSON_OPEN};
use crate::cvc::source::ReadAt;
use crate::FormatError;

/// Where one chunk lives in the file, derived from the header and checked against the
/// file at open.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkLayout {
    /// Chunk index.
    pub index: usize,
    /// First row of the chunk in the collection.
    pub row_start: u64,
    /// Rows in the chunk.
    pub rows: u64,
    /// Offset of the chunk frame (its u32 length field).
    pub frame_offset: u64,
    /// Offset of the payload.
    pub payload_offset: u64,
    /// Payload length in bytes (`rows * dimension * width`).
    pub payload_len: u64,
    /// Stored CRC-32 of the payload (v1.0 files).
    pub crc: Option<u32>,
    /// How the payload decodes.
    pub codec: ChunkCodec,
}

impl ChunkLayout {
    /// One past the last byte of the frame.
    #[must_use]
    pub fn frame_end(&self) -> u64 {
        self.payload_offset + self.payload_len
    }
}

pub(super) fn read_at<S: ReadAt>(
    src: &S,
    name: &str,
    buf: &mut [u8],
    offset: u64,
) -> Result<(), FormatError> {
    src.read_exact_at(buf, offset)
        .map_err(FormatError::io("read", name))
}

pub(super) fn truncated(
    what: impl Into<String>,
    offset: u64,
    end: u64,
    file_len: u64,
) -> FormatError {
    FormatError::Truncated {
        format: FORMAT,
        what: what.into(),
        offset,
        end,
        file_len,
    }
}

/// Detect the framing from the first bytes (at most 13), by where the JSON starts.
pub(super) fn detect_framing(
    head: &[u8],
    file_len: u64,
) -> Result<(Framing, (u16, u16)), FormatError> {
    let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]);
    if head.len() > 12 && head[12] == JSON_OPEN {
        let (major, minor) = (u16_at(4), u16_at(6));
        match major {
            layout::V1_MAJOR => return Ok((Framing::V1, (major, minor))),
            layout::COLUMNAR_MAJOR => {
                return Err(FormatError::UnsupportedVersion {
                    format: FORMAT,
                    major: major.into(),
                    minor: minor.into(),
                    offset: layout::V1_MAJOR_OFFSET,
                    reason: "major version 2 is decompressed's columnar format, which tensorvault does not read",
                })
            }
            // Also when byte 8 (the header length's low byte) happens to be '{': a major
            // in 1..=10 with minor <= 100 is versioned, as in the reference's heuristic.
            _ if head[8] != JSON_OPEN || ((1..=10).contains(&major) && minor <= 100) => {
                return Err(FormatError::UnsupportedVersion {
                    format: FORMAT,
                    major: major.into(),
                    minor: minor.into(),
                    offset: layout::V1_MAJOR_OFFSET,
                    reason: "unknown major version (this reader knows v0 and v1.x)",
                })
            }
            _ => {}
        }
    }
    if head.len() > 8 && head[8] == JSON_OPEN {
        return Ok((Framing::V0, (0, 1)));
    }
    if head.len() <= 12 {
        return Err(truncated(
            "file prefix (magic, version, header length)",
            0,
            13,
            file_len,
        ));
    }
    Err(FormatError::InvalidJson {
        format: FORMAT,
        offset: layout::V0_JSON_OFFSET,
        reason: "no JSON object at offset 8 (v0) or 12 (v1.0)".to_owned(),
    })
}

pub(super) fn build_layout<S: ReadAt>(
    src: &S,
    name: &str,
    header: &CvcHeader,
    json_end: u64,
    file_len: u64,
) -> Result<Vec<ChunkLayout>, FormatError> {
    let framing = header.framing;
    let prefix = framing.frame_prefix();
    let mut out = Vec::with_capacity(header.chunks.len());
    let mut cursor = json_end;
    let mut row_start = 0u64;
    for (i, ch) in header.chunks.iter().enumerate() {
        let field = |k: &str| format!("chunks[{i}].{k}");
        let payload_len =
            ch.payload_len(header.dimension)
                .ok_or_else(|| FormatError::InvalidField {
                    format: FORMAT,
                    field: field("rows"),
                    offset: framing.json_offset(),
                    reason: format!("{} rows x {} dims overflows u64", ch.rows, header.dimension),
                })?;
        let frame_offset = match ch.file_offset {
            None => cursor,
            Some(off) if off >= file_len => {
                return Err(FormatError::InvalidField {
                    format: FORMAT,
                    field: field("file_offset"),
                    offset: framing.json_offset(),
                    reason: format!("{off} points outside the file ({file_len} bytes)"),
                })
            }
            Some(off) if off < cursor => {
                return Err(FormatError::InvalidField {
                    format: FORMAT,
                    field: field("file_offset"),
                    offset: framing.json_offset(),
                    reason: format!(
                        "{off} overlaps the header or the previous chunk (which ends at {cursor})"
                    ),
                })
            }
            Some(off) => off,
        };
        let payload_offset = frame_offset + prefix;
        let frame_end = payload_offset
            .checked_add(payload_len)
            .filter(|&e| e <= file_len)
            .ok_or_else(|| {
                truncated(
                    format!("chunk {i} ({} rows, {payload_len} payload bytes)", ch.rows),
                    frame_offset,
                    payload_offset.saturating_add(payload_len),
                    file_len,
                )
            })?;
        let mut pre = [0u8; 8];
        read_at(src, name, &mut pre[..prefix as usize], frame_offset)?;
        let stored_len = u64::from(u32::from_le_bytes(pre[..4].try_into().expect("4 bytes")));
        if stored_len != payload_len {
            return Err(FormatError::LengthMismatch {
                format: FORMAT,
                what: format!(
                    "chunk {i} payload ({} rows x {} dims, {})",
                    ch.rows, header.dimension, ch.compression
                ),
                offset: frame_offset,
                expected: payload_len,
                found: stored_len,
            });
        }
        let crc = (framing == Framing::V1)
            .then(|| u32::from_le_bytes(pre[4..8].try_into().expect("4 bytes")));
        let codec = match (ch.compression, ch.int8) {
            (Compression::Int4, _) => ChunkCodec::Int4(Arc::clone(
                ch.int4
                    .as_ref()
                    .expect("the header parser requires col_offset/col_scale for int4"),
            )),
            (Compression::Fp16, _) => ChunkCodec::Fp16,
            (Compression::Bf16, _) => ChunkCodec::Bf16,
            (Compression::Int8, Some(p)) => ChunkCodec::Int8(p.codec),
            (Compression::Int8, None) => {
                unreachable!("the header parser requires min/scale for int8")
            }
        };
        out.push(ChunkLayout {
            index: i,
            row_start,
            rows: ch.rows,
            frame_offset,
            payload_offset,
            payload_len,
            crc,
            codec,
        });
        row_start += ch.rows;
        cursor = frame_end;
    }
    if cursor < file_len && !is_header_page_padding(src, name, header, cursor, file_len)? {
        return Err(FormatError::TrailingBytes {
            format: FORMAT,
            offset: cursor,
            count: file_len - cursor,
        });
    }
    Ok(out)
}

/// The reference pads an `mmap_optimized` header to a page boundary even when no chunk
/// follows; accept exactly that (zeros up to the next page), nothing else.
pub(super) fn is_header_page_padding<S: ReadAt>(
    src: &S,
    name: &str,
    header: &CvcHeader,
    cursor: u64,
    file_len: u64,
) -> Result<bool, FormatError> {
    if !(header.mmap_optimized
        && header.chunks.is_empty()
        && layout::page_align(cursor) == Some(file_len))
    {
        return Ok(false);
    }
    let mut pad = vec![0u8; (file_len - cursor) as usize]; // < one page
    read_at(src, name, &mut pad, cursor)?;
    Ok(pad.iter().all(|&b| b == 0))
}
