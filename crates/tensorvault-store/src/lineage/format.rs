//! Byte layout of `delta.dat` and `factor.dat` (docs/formats/store.md, "Lineage files"):
//! a 32-byte file header, then entries aligned to 8 bytes, each a 64-byte header, a
//! payload and zero padding. Every offset is derived from the previous one.

use tensorvault_core::checksum::crc32c;

use crate::types::BlockKey;

/// File magic: PNG-style, so text-mode transfers and 7-bit channels are caught.
pub const FILE_MAGIC: [u8; 8] = [0x89, b'T', b'V', b'L', b'N', 0x0D, 0x0A, 0x1A];
/// The one format version.
pub const FILE_VERSION: u16 = 1;
/// `u16` version.
pub const FILE_VERSION_OFFSET: usize = FILE_MAGIC.len();
/// `u8` file kind ([`SideKind`]).
pub const FILE_KIND_OFFSET: usize = FILE_VERSION_OFFSET + 2;
/// Reserved, zero.
pub const FILE_RESERVED_OFFSET: usize = FILE_KIND_OFFSET + 1;
/// `u32` CRC32C of bytes `0..FILE_CRC_OFFSET`.
pub const FILE_CRC_OFFSET: usize = 28;
/// File header length; the first entry starts here.
pub const FILE_HEADER_LEN: usize = FILE_CRC_OFFSET + 4;

/// Entry magic.
pub const ENTRY_MAGIC: [u8; 4] = *b"TVLE";
/// `u8` entry kind ([`EntryKind`]).
pub const E_KIND: usize = ENTRY_MAGIC.len();
/// Three reserved zero bytes.
pub const E_RESERVED: usize = E_KIND + 1;
/// `u128` tensor id of the block.
pub const E_TENSOR_ID: usize = E_RESERVED + 3;
/// `u32` block index.
pub const E_BLOCK_INDEX: usize = E_TENSOR_ID + 16;
/// `u32` payload length in bytes.
pub const E_PAYLOAD_LEN: usize = E_BLOCK_INDEX + 4;
/// `u64` the block's `created_at` when the entry was taken.
pub const E_BLOCK_CREATED_AT: usize = E_PAYLOAD_LEN + 4;
/// `u32` CRC32C of the block payload the entry was made for.
pub const E_BLOCK_CRC: usize = E_BLOCK_CREATED_AT + 8;
/// `u32` CRC32C of the parent block's payload the delta was taken against (0: factor).
pub const E_PARENT_CRC: usize = E_BLOCK_CRC + 4;
/// `u64` the parent block's `created_at` (0: factor).
pub const E_PARENT_CREATED_AT: usize = E_PARENT_CRC + 4;
/// `u32` CRC32C of the payload.
pub const E_PAYLOAD_CRC: usize = E_PARENT_CREATED_AT + 8;
/// `u32` CRC32C of header bytes `0..E_HEADER_CRC`.
pub const E_HEADER_CRC: usize = E_PAYLOAD_CRC + 4;
/// Entry header length.
pub const ENTRY_HEADER_LEN: usize = E_HEADER_CRC + 4;
/// Entries start at multiples of this (payloads are zero-padded).
pub const ENTRY_ALIGN: u64 = 8;
/// Largest payload accepted (a factor or sparse delta of the largest block is
/// `16 + 8 * MAX_BLOCK_ELEMS` bytes at most).
pub const MAX_PAYLOAD: u32 = 64 + 8 * crate::config::MAX_BLOCK_ELEMS;

/// Which lineage file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SideKind {
    /// `delta.dat`: deltas of `Delta` blocks against their lineage parent.
    Delta = 1,
    /// `factor.dat`: low-rank factors of `Factor` blocks.
    Factor = 2,
}

impl SideKind {
    /// The file name inside the collection directory.
    #[must_use]
    pub const fn file_name(self) -> &'static str {
        match self {
            SideKind::Delta => "delta.dat",
            SideKind::Factor => "factor.dat",
        }
    }

    /// Whether entries of `kind` belong in this file.
    #[must_use]
    pub const fn holds(self, kind: EntryKind) -> bool {
        matches!(
            (self, kind),
            (
                SideKind::Delta,
                EntryKind::DeltaQuant | EntryKind::DeltaSparse
            ) | (SideKind::Factor, EntryKind::Factor)
        )
    }
}

/// How an entry's payload is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EntryKind {
    /// One 8-bit groupwise TQTC segment (docs/formats/quant.md) of the delta.
    DeltaQuant = 1,
    /// `n u32, count u32, count x (index u32, value f32)`, indices strictly increasing.
    DeltaSparse = 2,
    /// `m u32, n u32, r u32, residual f32, U (m x r f32), V (r x n f32)`, row-major.
    Factor = 3,
}

impl EntryKind {
    /// From the on-disk byte.
    #[must_use]
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(EntryKind::DeltaQuant),
            2 => Some(EntryKind::DeltaSparse),
            3 => Some(EntryKind::Factor),
            _ => None,
        }
    }
}

/// Which version of a block (and of its parent) an entry belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EntryTag {
    /// The block's `created_at`.
    pub block_created_at: u64,
    /// CRC32C of the block payload the entry was made for (updated by repairs).
    pub block_crc: u32,
    /// The parent block's `created_at` (deltas; 0 for factors).
    pub parent_created_at: u64,
    /// CRC32C of the parent payload the delta was taken against (0 for factors).
    pub parent_crc: u32,
}

/// A decoded entry header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    /// The block.
    pub key: BlockKey,
    /// Payload encoding.
    pub kind: EntryKind,
    /// Payload length.
    pub payload_len: u32,
    /// Version tag.
    pub tag: EntryTag,
    /// CRC32C of the payload.
    pub payload_crc: u32,
}

/// Bytes an entry with `payload_len` payload bytes occupies (header, payload, padding).
#[must_use]
pub fn entry_size(payload_len: u32) -> u64 {
    (ENTRY_HEADER_LEN as u64 + u64::from(payload_len)).div_ceil(ENTRY_ALIGN) * ENTRY_ALIGN
}

/// The file header of `kind`.
#[must_use]
pub fn encode_file_header(kind: SideKind) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..FILE_VERSION_OFFSET].copy_from_slice(&FILE_MAGIC);
    h[FILE_VERSION_OFFSET..FILE_KIND_OFFSET].copy_from_slice(&FILE_VERSION.to_le_bytes());
    h[FILE_KIND_OFFSET] = kind as u8;
    let crc = crc32c(&h[..FILE_CRC_OFFSET]);
    h[FILE_CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Check a file header; the reason names the first bad field.
///
/// # Errors
/// `(field, offset, reason)` of the first problem.
pub fn check_file_header(bytes: &[u8], kind: SideKind) -> Result<(), (&'static str, u64, String)> {
    let Some(h) = bytes.get(..FILE_HEADER_LEN) else {
        return Err((
            "length",
            0,
            format!("{} bytes, header needs {FILE_HEADER_LEN}", bytes.len()),
        ));
    };
    let crc = u32_at(h, FILE_CRC_OFFSET);
    if crc != crc32c(&h[..FILE_CRC_OFFSET]) {
        return Err((
            crate::error::HEADER_CRC_FIELD,
            FILE_CRC_OFFSET as u64,
            "crc32c mismatch".into(),
        ));
    }
    if h[..FILE_VERSION_OFFSET] != FILE_MAGIC {
        return Err(("magic", 0, "not a tensorvault lineage file".into()));
    }
    let version = u16::from_le_bytes([h[FILE_VERSION_OFFSET], h[FILE_VERSION_OFFSET + 1]]);
    if version != FILE_VERSION {
        return Err((
            "version",
            FILE_VERSION_OFFSET as u64,
            format!("version {version}, expected {FILE_VERSION}"),
        ));
    }
    if h[FILE_KIND_OFFSET] != kind as u8 {
        return Err((
            "kind",
            FILE_KIND_OFFSET as u64,
            format!("kind {}, expected {}", h[FILE_KIND_OFFSET], kind as u8),
        ));
    }
    if let Some(i) = h[FILE_RESERVED_OFFSET..FILE_CRC_OFFSET]
        .iter()
        .position(|&b| b != 0)
    {
        let off = FILE_RESERVED_OFFSET + i;
        return Err(("reserved", off as u64, format!("byte {off} is not zero")));
    }
    Ok(())
}

/// Encode an entry (header, payload, zero padding).
#[must_use]
pub fn encode_entry(h: &EntryHeader, payload: &[u8]) -> Vec<u8> {
    let size = entry_size(h.payload_len) as usize;
    let mut out = vec![0u8; size];
    out[..E_KIND].copy_from_slice(&ENTRY_MAGIC);
    out[E_KIND] = h.kind as u8;
    out[E_TENSOR_ID..E_BLOCK_INDEX].copy_from_slice(&h.key.tensor_id.to_le_bytes());
    out[E_BLOCK_INDEX..E_PAYLOAD_LEN].copy_from_slice(&h.key.block_index.to_le_bytes());
    out[E_PAYLOAD_LEN..E_BLOCK_CREATED_AT].copy_from_slice(&h.payload_len.to_le_bytes());
    out[E_BLOCK_CREATED_AT..E_BLOCK_CRC].copy_from_slice(&h.tag.block_created_at.to_le_bytes());
    out[E_BLOCK_CRC..E_PARENT_CRC].copy_from_slice(&h.tag.block_crc.to_le_bytes());
    out[E_PARENT_CRC..E_PARENT_CREATED_AT].copy_from_slice(&h.tag.parent_crc.to_le_bytes());
    out[E_PARENT_CREATED_AT..E_PAYLOAD_CRC].copy_from_slice(&h.tag.parent_created_at.to_le_bytes());
    out[E_PAYLOAD_CRC..E_HEADER_CRC].copy_from_slice(&h.payload_crc.to_le_bytes());
    let crc = crc32c(&out[..E_HEADER_CRC]);
    out[E_HEADER_CRC..ENTRY_HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    out[ENTRY_HEADER_LEN..ENTRY_HEADER_LEN + payload.len()].copy_from_slice(payload);
    out
}

/// Decode an entry header of a file of `side`; `None` if anything is off (magic, CRC,
/// kind, reserved bytes, a payload longer than [`MAX_PAYLOAD`]).
#[must_use]
pub fn decode_entry_header(b: &[u8; ENTRY_HEADER_LEN], side: SideKind) -> Option<EntryHeader> {
    if b[..E_KIND] != ENTRY_MAGIC || u32_at(b, E_HEADER_CRC) != crc32c(&b[..E_HEADER_CRC]) {
        return None;
    }
    let kind = EntryKind::from_u8(b[E_KIND]).filter(|k| side.holds(*k))?;
    if b[E_RESERVED..E_TENSOR_ID].iter().any(|&x| x != 0) {
        return None;
    }
    let payload_len = u32_at(b, E_PAYLOAD_LEN);
    if payload_len > MAX_PAYLOAD {
        return None;
    }
    let mut id = [0u8; 16];
    id.copy_from_slice(&b[E_TENSOR_ID..E_BLOCK_INDEX]);
    Some(EntryHeader {
        key: BlockKey::new(u128::from_le_bytes(id), u32_at(b, E_BLOCK_INDEX)),
        kind,
        payload_len,
        tag: EntryTag {
            block_created_at: u64_at(b, E_BLOCK_CREATED_AT),
            block_crc: u32_at(b, E_BLOCK_CRC),
            parent_crc: u32_at(b, E_PARENT_CRC),
            parent_created_at: u64_at(b, E_PARENT_CREATED_AT),
        },
        payload_crc: u32_at(b, E_PAYLOAD_CRC),
    })
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(x)
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_pinned() {
        assert_eq!(FILE_HEADER_LEN, 32);
        assert_eq!(
            (
                E_TENSOR_ID,
                E_BLOCK_INDEX,
                E_PAYLOAD_LEN,
                E_BLOCK_CREATED_AT
            ),
            (8, 24, 28, 32)
        );
        assert_eq!(
            (
                E_BLOCK_CRC,
                E_PARENT_CRC,
                E_PARENT_CREATED_AT,
                E_PAYLOAD_CRC
            ),
            (40, 44, 48, 56)
        );
        assert_eq!((E_HEADER_CRC, ENTRY_HEADER_LEN), (60, 64));
        assert_eq!(entry_size(0), 64);
        assert_eq!(entry_size(1), 72);
        assert_eq!(entry_size(8), 72);
    }

    #[test]
    fn headers_round_trip_and_reject_damage() {
        let h = EntryHeader {
            key: BlockKey::new(0x0123_4567_89ab_cdef_0011_2233_4455_6677, 9),
            kind: EntryKind::DeltaSparse,
            payload_len: 12,
            tag: EntryTag {
                block_created_at: 5,
                block_crc: 6,
                parent_created_at: 7,
                parent_crc: 8,
            },
            payload_crc: crc32c(&[1; 12]),
        };
        let e = encode_entry(&h, &[1; 12]);
        assert_eq!(e.len(), 80);
        let mut hb = [0u8; ENTRY_HEADER_LEN];
        hb.copy_from_slice(&e[..ENTRY_HEADER_LEN]);
        assert_eq!(decode_entry_header(&hb, SideKind::Delta), Some(h));
        assert_eq!(decode_entry_header(&hb, SideKind::Factor), None);
        for i in 0..ENTRY_HEADER_LEN {
            let mut bad = hb;
            bad[i] ^= 0x10;
            assert_eq!(decode_entry_header(&bad, SideKind::Delta), None, "byte {i}");
        }
        let fh = encode_file_header(SideKind::Factor);
        check_file_header(&fh, SideKind::Factor).unwrap();
        assert_eq!(
            check_file_header(&fh, SideKind::Delta).unwrap_err().0,
            "kind"
        );
        assert_eq!(
            check_file_header(&fh[..10], SideKind::Factor)
                .unwrap_err()
                .0,
            "length"
        );
        let mut bad = fh;
        bad[0] = b'x';
        assert_eq!(
            check_file_header(&bad, SideKind::Factor).unwrap_err().0,
            "crc32c"
        );
    }
}
