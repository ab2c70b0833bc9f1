//! The tensor-name catalog (`names.log`): tensor ids are one-way hashes, so the logical
//! names `store ls` shows are kept in their own small append-only file of 128-byte
//! CRC32C records (docs/formats/store.md, "Name catalog").

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use tensorvault_core::checksum::crc32c;
use tensorvault_core::fsio;

use crate::error::{Result, StoreErr};

/// Record (and header) length.
pub const NAME_RECORD_LEN: usize = 128;
/// Longest tensor name in bytes.
pub const MAX_NAME_LEN: usize = 100;
/// Header magic.
pub const NAMES_MAGIC: [u8; 8] = *b"TVNAMES\0";
/// Header version.
pub const NAMES_VERSION: u32 = 1;
/// u128 tensor id.
const N_ID: usize = 0;
/// u8 name length.
const N_LEN: usize = N_ID + 16;
/// Name bytes (UTF-8), zero padded to [`N_CRC`].
const N_NAME: usize = N_LEN + 1;
/// u32 CRC32C of bytes `0..N_CRC`.
const N_CRC: usize = 120;
const _: () = assert!(N_NAME + MAX_NAME_LEN <= N_CRC);

/// Tensor id -> logical name, optionally backed by a file.
#[derive(Debug, Default)]
pub struct Catalog {
    path: Option<PathBuf>,
    file: Option<File>,
    names: HashMap<u128, String>,
    /// Further distinct names recorded for an id (only a forged or damaged file has
    /// any: a tensor's id is derived from its name), kept until [`Catalog::authenticate`].
    conflicts: Vec<(u128, String)>,
    /// Records skipped as corrupt while loading, plus names [`Catalog::authenticate`]
    /// rejected.
    pub skipped: u64,
}

/// Check a tensor name: 1..=100 bytes of UTF-8 without control characters.
///
/// # Errors
/// [`StoreErr::InvalidName`].
pub fn validate_tensor_name(name: &str) -> Result<()> {
    let bad = |reason| {
        Err(StoreErr::InvalidName {
            field: "tensor",
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > MAX_NAME_LEN {
        return bad("longer than 100 bytes");
    }
    if name.chars().any(char::is_control) {
        return bad("contains a control character");
    }
    Ok(())
}

fn header() -> [u8; NAME_RECORD_LEN] {
    let mut h = [0u8; NAME_RECORD_LEN];
    h[..8].copy_from_slice(&NAMES_MAGIC);
    h[8..12].copy_from_slice(&NAMES_VERSION.to_le_bytes());
    let crc = crc32c(&h[..N_CRC]);
    h[N_CRC..N_CRC + 4].copy_from_slice(&crc.to_le_bytes());
    h
}

fn encode(id: u128, name: &str) -> [u8; NAME_RECORD_LEN] {
    let mut r = [0u8; NAME_RECORD_LEN];
    r[N_ID..N_ID + 16].copy_from_slice(&id.to_le_bytes());
    r[N_LEN] = name.len() as u8;
    r[N_NAME..N_NAME + name.len()].copy_from_slice(name.as_bytes());
    let crc = crc32c(&r[..N_CRC]);
    r[N_CRC..N_CRC + 4].copy_from_slice(&crc.to_le_bytes());
    r
}

fn decode(r: &[u8]) -> std::result::Result<(u128, String), &'static str> {
    let crc = u32::from_le_bytes([r[N_CRC], r[N_CRC + 1], r[N_CRC + 2], r[N_CRC + 3]]);
    if crc != crc32c(&r[..N_CRC]) {
        return Err("crc32c mismatch");
    }
    if r[N_CRC + 4..].iter().any(|&b| b != 0) {
        return Err("nonzero padding");
    }
    let len = usize::from(r[N_LEN]);
    if len == 0 || len > MAX_NAME_LEN {
        return Err("name length out of range");
    }
    if r[N_NAME + len..N_CRC].iter().any(|&b| b != 0) {
        return Err("nonzero bytes after the name");
    }
    let name = std::str::from_utf8(&r[N_NAME..N_NAME + len]).map_err(|_| "name is not UTF-8")?;
    let mut id = [0u8; 16];
    id.copy_from_slice(&r[N_ID..N_ID + 16]);
    Ok((u128::from_le_bytes(id), name.to_owned()))
}

impl Catalog {
    /// An in-memory catalog.
    #[must_use]
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// Open (or create) `path`, loading every valid record; corrupt records are skipped
    /// with a warning (and counted in `skipped`); an invalid tail stays until the next
    /// append overwrites it.
    ///
    /// # Errors
    /// [`StoreErr::Io`]; [`StoreErr::BadHeader`] if the header is not a names header.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, true)
    }

    /// Open `path` for reading only (a shared, read-only store): nothing is created or
    /// written, and an insert fails with [`StoreErr::Io`]. A missing or headerless file
    /// reads as an empty catalog.
    ///
    /// # Errors
    /// As [`Catalog::open`].
    pub fn open_read_only(path: &Path) -> Result<Self> {
        Self::open_with(path, false)
    }

    fn open_with(path: &Path, writable: bool) -> Result<Self> {
        let io = |op, e| StoreErr::io(op, path, e);
        if writable && !path.exists() {
            // Created whole (temp file, fsync, rename, directory fsync): after a power
            // cut the file either does not exist or holds its header, and its directory
            // entry is durable before any name is acknowledged.
            tensorvault_core::atomic::write_atomic(path, &header())
                .map_err(|e| io("create", std::io::Error::other(e)))?;
        }
        let opened = StoreErr::open_regular(
            "open",
            path,
            OpenOptions::new()
                .read(true)
                .write(writable)
                .create(writable)
                .truncate(false),
        );
        let mut file = match opened {
            Ok(f) => f,
            Err(StoreErr::Io { source, .. })
                if !writable && source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(Catalog::default());
            }
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| io("read", e))?;
        let mut cat = Catalog {
            path: Some(path.to_owned()),
            ..Catalog::default()
        };
        if bytes.len() < NAME_RECORD_LEN && !writable {
            cat.file = Some(file);
            return Ok(cat);
        }
        if bytes.len() < NAME_RECORD_LEN {
            // New (or torn while being created): start over with a header.
            fsio::set_len(&file, path, 0).map_err(|e| io("truncate", e))?;
            fsio::write_all_at(&file, path, &header(), 0).map_err(|e| io("write", e))?;
            fsio::sync_data(&file, path).map_err(|e| io("fsync", e))?;
            cat.file = Some(file);
            return Ok(cat);
        }
        let h = header();
        if bytes[..NAME_RECORD_LEN] != h {
            let field = if bytes[..8] != NAMES_MAGIC {
                "magic"
            } else {
                "version/crc"
            };
            return Err(StoreErr::BadHeader {
                file: path.display().to_string(),
                field,
                offset: 0,
                reason: "not a tensorvault names.log header".into(),
            });
        }
        let mut good_end = NAME_RECORD_LEN;
        for (i, r) in bytes[NAME_RECORD_LEN..]
            .chunks_exact(NAME_RECORD_LEN)
            .enumerate()
        {
            let off = NAME_RECORD_LEN * (i + 1);
            match decode(r) {
                Ok((id, name)) => {
                    match cat.names.get(&id) {
                        Some(n) if *n != name => cat.conflicts.push((id, name)),
                        Some(_) => {}
                        None => {
                            cat.names.insert(id, name);
                        }
                    }
                    good_end = off + NAME_RECORD_LEN;
                }
                Err(reason) => {
                    tracing::warn!(path = %path.display(), offset = off, reason, "skipping corrupt names.log record");
                    cat.skipped += 1;
                }
            }
        }
        if good_end < bytes.len() {
            // A torn or corrupt tail stays on disk (opening a store never writes it; verify
            // reports the skipped records): the next append lands on the record boundary
            // at or below the file's end, over a partial record if there is one.
            tracing::warn!(path = %path.display(), bytes = bytes.len() - good_end, "names.log ends in invalid bytes");
        }
        cat.file = Some(file);
        Ok(cat)
    }

    /// Keep only names that belong to their id: `belongs(id, name)` says whether `name`
    /// derives `id` (`Some(true)`), does not (`Some(false)`), or cannot be checked
    /// (`None`: the id has no blocks; kept). Of several names recorded for one id the
    /// one that belongs wins. Returns how many names were rejected (also added to
    /// `skipped`, so `verify` reports them).
    pub fn authenticate(&mut self, mut belongs: impl FnMut(u128, &str) -> Option<bool>) -> u64 {
        let mut rejected = 0u64;
        let conflicts = std::mem::take(&mut self.conflicts);
        self.names.retain(|&id, name| {
            if belongs(id, name) == Some(false) {
                tracing::warn!(id = %format!("{id:032x}"), name = %name, "names.log record does not match its tensor id; ignored");
                rejected += 1;
                false
            } else {
                true
            }
        });
        for (id, name) in conflicts {
            if !self.names.contains_key(&id) && belongs(id, &name) == Some(true) {
                self.names.insert(id, name);
            } else {
                rejected += 1;
            }
        }
        self.skipped += rejected;
        rejected
    }

    /// The name of `id`, if recorded.
    #[must_use]
    pub fn name(&self, id: u128) -> Option<&str> {
        self.names.get(&id).map(String::as_str)
    }

    /// Every (id, name).
    pub fn iter(&self) -> impl Iterator<Item = (u128, &str)> {
        self.names.iter().map(|(k, v)| (*k, v.as_str()))
    }

    /// Record `name` for `id` (no-op if already recorded) and make it durable when `sync`.
    ///
    /// # Errors
    /// [`StoreErr::InvalidName`]; [`StoreErr::Io`].
    pub fn insert(&mut self, id: u128, name: &str, sync: bool) -> Result<()> {
        validate_tensor_name(name)?;
        if self.names.get(&id).is_some_and(|n| n == name) {
            return Ok(());
        }
        if let (Some(f), Some(p)) = (self.file.as_mut(), self.path.as_ref()) {
            let end = f.metadata().map_err(|e| StoreErr::io("stat", p, e))?.len();
            let end = end - end % NAME_RECORD_LEN as u64;
            fsio::write_all_at(f, p, &encode(id, name), end)
                .map_err(|e| StoreErr::io("write", p, e))?;
            if sync {
                fsio::sync_data(f, p).map_err(|e| StoreErr::io("fsync", p, e))?;
            }
        }
        self.names.insert(id, name.to_owned());
        Ok(())
    }

    /// Make appended names durable.
    ///
    /// # Errors
    /// [`StoreErr::Io`].
    pub fn sync(&self) -> Result<()> {
        if let (Some(f), Some(p)) = (self.file.as_ref(), self.path.as_ref()) {
            fsio::sync_data(f, p).map_err(|e| StoreErr::io("fsync", p, e))?;
        }
        Ok(())
    }

    /// Keep only the names of `live` ids, rewriting the file atomically (temp + fsync +
    /// rename + dir fsync).
    ///
    /// # Errors
    /// [`StoreErr::Io`]; the old file is intact on error.
    pub fn compact(&mut self, live: &dyn Fn(u128) -> bool) -> Result<()> {
        self.names.retain(|id, _| live(*id));
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let mut ids: Vec<_> = self.names.iter().collect();
        ids.sort();
        let mut buf = Vec::with_capacity((ids.len() + 1) * NAME_RECORD_LEN);
        buf.extend_from_slice(&header());
        for (id, name) in ids {
            buf.extend_from_slice(&encode(*id, name));
        }
        tensorvault_core::atomic::write_atomic(&path, &buf)
            .map_err(|e| StoreErr::io("rewrite", &path, std::io::Error::other(e)))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| StoreErr::io("open", &path, e))?;
        self.file = Some(file);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_survive_reopen_and_corruption_is_skipped() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("names.log");
        {
            let mut c = Catalog::open(&p).unwrap();
            c.insert(1, "a", true).unwrap();
            c.insert(2, "layer.0/key", true).unwrap();
            c.insert(3, "third", true).unwrap();
        }
        // Flip a bit in record 2 ("layer.0/key") and tear the tail.
        let mut b = std::fs::read(&p).unwrap();
        b[2 * NAME_RECORD_LEN + 20] ^= 0x10;
        b.extend_from_slice(&[7u8; 50]);
        std::fs::write(&p, &b).unwrap();
        let mut c = Catalog::open(&p).unwrap();
        assert_eq!(c.name(1), Some("a"));
        assert_eq!(c.name(2), None);
        assert_eq!(c.name(3), Some("third"));
        assert_eq!(c.skipped, 1);
        // Opening leaves the torn tail in place; the next append overwrites it on the
        // record boundary.
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            4 * NAME_RECORD_LEN as u64 + 50
        );
        c.insert(4, "four", true).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            5 * NAME_RECORD_LEN as u64
        );
        assert_eq!(Catalog::open(&p).unwrap().name(4), Some("four"));
        c.compact(&|id| id != 1).unwrap();
        let c = Catalog::open(&p).unwrap();
        assert_eq!(c.name(1), None);
        assert_eq!(c.name(4), Some("four"));
        assert_eq!(c.skipped, 0);
    }

    #[test]
    fn bad_names_are_refused() {
        assert!(validate_tensor_name("").is_err());
        assert!(validate_tensor_name(&"x".repeat(101)).is_err());
        assert!(validate_tensor_name("a\nb").is_err());
        assert!(validate_tensor_name("layer.3/head.7/key").is_ok());
    }

    #[test]
    fn a_foreign_file_is_a_bad_header() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("names.log");
        std::fs::write(&p, [1u8; 300]).unwrap();
        assert!(matches!(Catalog::open(&p), Err(StoreErr::BadHeader { .. })));
    }
}
