//! The model's use counters (`prefix.stats` in the collection directory): lookups, hit and
//! missed chunks, damaged, stored and evicted chunks, summed over every writable handle
//! of every process (each adds what it counted at each commit, under the writer lock).
//! Every byte offset is a named constant here; the spec is docs/formats/store.md,
//! "Prefix cache".

use tensorvault_core::checksum::crc32c;

use crate::error::{Result, StoreErr};

/// File name of the counters inside the collection directory.
pub const COUNTS_FILE: &str = "prefix.stats";
/// Magic.
pub const MAGIC: [u8; 8] = *b"TVPFXN\x1a\n";
/// The one format version.
pub const VERSION: u16 = 1;
/// Offset of the u16 version.
pub const VERSION_OFFSET: usize = 8;
/// Offset of the u16 reserved field (0).
pub const RESERVED_OFFSET: usize = 10;
/// Offset of the first of the [`FIELDS`] u64 counters.
pub const COUNTERS_OFFSET: usize = 12;
/// The counters, in file order.
pub const FIELDS: [&str; 6] = [
    "lookups",
    "hit_chunks",
    "miss_chunks",
    "damaged_chunks",
    "stored_chunks",
    "evicted_chunks",
];
/// Offset of the u32 CRC32C of every earlier byte.
pub const CRC_OFFSET: usize = COUNTERS_OFFSET + 8 * FIELDS.len();
/// The file's exact length.
pub const FILE_LEN: usize = CRC_OFFSET + 4;

/// A model's use counters, in [`FIELDS`] order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelCounts(pub [u64; 6]);

fn bad(field: &'static str, offset: usize, reason: String) -> StoreErr {
    StoreErr::BadHeader {
        file: COUNTS_FILE.to_owned(),
        field,
        offset: offset as u64,
        reason,
    }
}

impl ModelCounts {
    /// The counter named `field` (one of [`FIELDS`]).
    #[must_use]
    pub fn get(&self, field: &str) -> Option<u64> {
        FIELDS.iter().position(|f| *f == field).map(|i| self.0[i])
    }

    /// The file's bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(FILE_LEN);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        for v in self.0 {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let crc = crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parse and check the file.
    ///
    /// # Errors
    /// [`StoreErr::BadHeader`] naming the field and offset: a wrong length, bad magic, an
    /// unknown version, a non-zero reserved field, a checksum mismatch.
    pub fn decode(b: &[u8]) -> Result<Self> {
        if b.len() != FILE_LEN {
            return Err(bad(
                "length",
                0,
                format!("{} bytes, the file has {FILE_LEN}", b.len()),
            ));
        }
        if b[..8] != MAGIC {
            return Err(bad("magic", 0, "not a prefix-cache counters file".into()));
        }
        let version = u16::from_le_bytes([b[VERSION_OFFSET], b[VERSION_OFFSET + 1]]);
        if version != VERSION {
            return Err(bad(
                "version",
                VERSION_OFFSET,
                format!("version {version}, this build reads {VERSION}"),
            ));
        }
        if b[RESERVED_OFFSET..COUNTERS_OFFSET] != [0, 0] {
            return Err(bad("reserved", RESERVED_OFFSET, "must be 0".into()));
        }
        let mut c = [0u8; 4];
        c.copy_from_slice(&b[CRC_OFFSET..]);
        let (stored, actual) = (u32::from_le_bytes(c), crc32c(&b[..CRC_OFFSET]));
        if stored != actual {
            return Err(bad(
                crate::error::HEADER_CRC_FIELD,
                CRC_OFFSET,
                format!("stored {stored:#010x}, computed {actual:#010x}"),
            ));
        }
        let mut out = [0u64; 6];
        for (i, v) in out.iter_mut().enumerate() {
            let off = COUNTERS_OFFSET + 8 * i;
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[off..off + 8]);
            *v = u64::from_le_bytes(x);
        }
        Ok(Self(out))
    }

    /// Read the counters of the collection in `dir` (zero if the file is absent), refusing
    /// a file of the wrong size before reading it.
    ///
    /// # Errors
    /// [`StoreErr::Io`]; [`StoreErr::BadHeader`] as [`ModelCounts::decode`].
    pub fn read(dir: &std::path::Path) -> Result<Self> {
        let path = dir.join(COUNTS_FILE);
        match std::fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(StoreErr::io("stat", &path, e)),
        }
        let file = StoreErr::open_regular("open", &path, std::fs::OpenOptions::new().read(true))?;
        let len = file
            .metadata()
            .map_err(|e| StoreErr::io("stat", &path, e))?
            .len();
        if len != FILE_LEN as u64 {
            return Err(bad(
                "length",
                0,
                format!("{len} bytes, the file has {FILE_LEN}"),
            ));
        }
        let mut b = Vec::with_capacity(FILE_LEN);
        use std::io::Read;
        (&file)
            .take(FILE_LEN as u64 + 1)
            .read_to_end(&mut b)
            .map_err(|e| StoreErr::io("read", &path, e))?;
        Self::decode(&b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_damage_names_its_field() {
        let c = ModelCounts([1, 2, 3, 4, 5, u64::MAX]);
        let b = c.encode();
        assert_eq!(b.len(), FILE_LEN);
        assert_eq!(ModelCounts::decode(&b).unwrap(), c);
        assert_eq!(c.get("miss_chunks"), Some(3));
        let field = |b: &[u8]| match ModelCounts::decode(b).unwrap_err() {
            StoreErr::BadHeader { field, offset, .. } => (field, offset),
            e => panic!("{e}"),
        };
        assert_eq!(field(&b[..FILE_LEN - 1]), ("length", 0));
        let mut m = b.clone();
        m[1] ^= 1;
        assert_eq!(field(&m), ("magic", 0));
        let mut v = b.clone();
        v[VERSION_OFFSET] = 9;
        assert_eq!(field(&v), ("version", VERSION_OFFSET as u64));
        let mut r = b.clone();
        r[RESERVED_OFFSET + 1] = 1;
        assert_eq!(field(&r), ("reserved", RESERVED_OFFSET as u64));
        let mut x = b.clone();
        x[COUNTERS_OFFSET + 3] ^= 4;
        assert_eq!(
            field(&x),
            (crate::error::HEADER_CRC_FIELD, CRC_OFFSET as u64)
        );
    }
}
