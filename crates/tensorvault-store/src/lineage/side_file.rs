//! One lineage file (`delta.dat` or `factor.dat`) on a medium (a file, or memory with a
//! host persistence hook): append-only entries, an in-memory index of the latest valid
//! entry per block rebuilt by scanning, and garbage collection by atomic rewrite.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use tensorvault_core::checksum::crc32c;
use tensorvault_core::fsio;

use super::format::{
    check_file_header, decode_entry_header, encode_entry, encode_file_header, entry_size,
    EntryHeader, EntryKind, EntryTag, SideKind, ENTRY_ALIGN, ENTRY_HEADER_LEN, FILE_HEADER_LEN,
};
use crate::error::{Result, StoreErr};
use crate::types::BlockKey;

/// A host persistence hook: called with the whole file content.
pub type PersistFn = Box<dyn FnMut(&[u8]) + Send>;

/// Where the latest valid entry of a block lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    /// Byte offset of the entry header.
    pub offset: u64,
    /// The decoded header.
    pub header: EntryHeader,
}

/// What a scan found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Entries with a valid header whose payload failed its CRC (skipped).
    pub skipped_entries: u64,
    /// Bytes skipped while resynchronizing after an invalid header.
    pub skipped_bytes: u64,
    /// Bytes cut from the end (a torn tail).
    pub truncated_bytes: u64,
}

enum Medium {
    Mem {
        buf: Vec<u8>,
        hook: Option<PersistFn>,
        dirty: bool,
    },
    File {
        path: PathBuf,
        /// `None` until the file exists.
        file: Option<File>,
    },
}

/// One lineage file. See the module docs.
pub struct SideFile {
    side: SideKind,
    medium: Medium,
    /// End of the last valid entry (where the next append goes); 0 while no file exists.
    len: u64,
    index: HashMap<BlockKey, Loc>,
    /// Bytes of the entries `index` points at.
    live_bytes: u64,
    scan: ScanStats,
}

#[cfg(unix)]
fn read_at(f: &File, buf: &mut [u8], off: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, off)
}

#[cfg(not(unix))]
fn read_at(mut f: &File, buf: &mut [u8], off: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    f.seek(SeekFrom::Start(off))?;
    f.read_exact(buf)
}

impl SideFile {
    /// An empty in-memory file.
    #[must_use]
    pub fn in_memory(side: SideKind) -> Self {
        Self::with_medium(
            side,
            Medium::Mem {
                buf: Vec::new(),
                hook: None,
                dirty: false,
            },
        )
    }

    fn with_medium(side: SideKind, medium: Medium) -> Self {
        Self {
            side,
            medium,
            len: 0,
            index: HashMap::new(),
            live_bytes: 0,
            scan: ScanStats::default(),
        }
    }

    /// An in-memory file from bytes a persistence hook received (empty: no file yet).
    /// Scans it like a file is scanned on open (a torn tail is cut from the copy).
    ///
    /// # Errors
    /// [`StoreErr::BadHeader`] if the bytes do not start with a valid header of `side`.
    pub fn from_bytes(side: SideKind, bytes: Vec<u8>) -> Result<Self> {
        if !bytes.is_empty() {
            check_file_header(&bytes, side).map_err(|(field, offset, reason)| {
                StoreErr::BadHeader {
                    file: side.file_name().into(),
                    field,
                    offset,
                    reason,
                }
            })?;
        }
        let mut f = Self::with_medium(
            side,
            Medium::Mem {
                buf: bytes,
                hook: None,
                dirty: false,
            },
        );
        f.rescan()?;
        Ok(f)
    }

    /// Open `path` if it exists (created on the first append otherwise). A file whose
    /// header is damaged is renamed to `<name>.bad` with a warning and a fresh one is
    /// started: the store stays usable, only repairs from the lost entries are.
    ///
    /// # Errors
    /// [`StoreErr::Io`].
    pub fn open(side: SideKind, path: &Path) -> Result<Self> {
        let medium = Medium::File {
            path: path.to_owned(),
            file: None,
        };
        let mut f = Self::with_medium(side, medium);
        if !path.exists() {
            return Ok(f);
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| StoreErr::io("open", path, e))?;
        let mut head = [0u8; FILE_HEADER_LEN];
        let size = file
            .metadata()
            .map_err(|e| StoreErr::io("stat", path, e))?
            .len();
        let header_ok = size >= FILE_HEADER_LEN as u64
            && read_at(&file, &mut head, 0).is_ok()
            && check_file_header(&head, side).is_ok();
        if !header_ok {
            let mut bad = path.as_os_str().to_owned();
            bad.push(".bad");
            tracing::warn!(file = %path.display(), "lineage file header is damaged; moved aside, starting a new file");
            drop(file);
            fsio::rename(path, Path::new(&bad)).map_err(|e| StoreErr::io("rename", path, e))?;
            return Ok(f);
        }
        if let Medium::File { file: slot, .. } = &mut f.medium {
            *slot = Some(file);
        }
        f.rescan()?;
        Ok(f)
    }

    /// Install the persistence hook of an in-memory file (ignored for files).
    pub fn set_hook(&mut self, hook: PersistFn) {
        if let Medium::Mem { hook: h, .. } = &mut self.medium {
            *h = Some(hook);
        }
    }

    /// The bytes of an in-memory file (empty for files on disk).
    #[must_use]
    pub fn mem_bytes(&self) -> &[u8] {
        match &self.medium {
            Medium::Mem { buf, .. } => buf,
            Medium::File { .. } => &[],
        }
    }

    fn name(&self) -> PathBuf {
        match &self.medium {
            Medium::Mem { .. } => PathBuf::from(self.side.file_name()),
            Medium::File { path, .. } => path.clone(),
        }
    }

    fn size(&self) -> Result<u64> {
        match &self.medium {
            Medium::Mem { buf, .. } => Ok(buf.len() as u64),
            Medium::File { file: None, .. } => Ok(0),
            Medium::File {
                file: Some(f),
                path,
            } => Ok(f
                .metadata()
                .map_err(|e| StoreErr::io("stat", path, e))?
                .len()),
        }
    }

    fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        let short = || {
            StoreErr::io(
                "read",
                self.name(),
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            )
        };
        match &self.medium {
            Medium::Mem { buf: b, .. } => {
                let start = usize::try_from(off).map_err(|_| short())?;
                let src = start
                    .checked_add(buf.len())
                    .and_then(|end| b.get(start..end))
                    .ok_or_else(short)?;
                buf.copy_from_slice(src);
                Ok(())
            }
            Medium::File { file: None, .. } => Err(short()),
            Medium::File {
                file: Some(f),
                path,
            } => read_at(f, buf, off).map_err(|e| StoreErr::io("read", path, e)),
        }
    }

    /// Rebuild the index by scanning: entries with a bad header are resynchronized over
    /// (8 bytes at a time), entries with a bad payload CRC are skipped, the latest valid
    /// entry per block wins, and everything after the last valid entry is cut.
    fn rescan(&mut self) -> Result<()> {
        self.index.clear();
        self.live_bytes = 0;
        self.scan = ScanStats::default();
        let total = self.size()?;
        if total == 0 {
            self.len = 0;
            return Ok(());
        }
        let mut pos = FILE_HEADER_LEN as u64;
        let mut good_end = pos;
        let mut hb = [0u8; ENTRY_HEADER_LEN];
        let mut payload = Vec::new();
        while pos + ENTRY_HEADER_LEN as u64 <= total {
            self.read(pos, &mut hb)?;
            let Some(h) = decode_entry_header(&hb, self.side) else {
                pos += ENTRY_ALIGN;
                continue;
            };
            let size = entry_size(h.payload_len);
            if pos + size > total {
                // Its payload never fully reached the medium: a torn append, unless a
                // later valid entry turns up while resynchronizing.
                pos += ENTRY_ALIGN;
                continue;
            }
            payload.resize(h.payload_len as usize, 0);
            self.read(pos + ENTRY_HEADER_LEN as u64, &mut payload)?;
            if crc32c(&payload) != h.payload_crc {
                tracing::warn!(file = %self.name().display(), offset = pos, key = %h.key, "lineage entry payload fails its CRC; skipped");
                self.scan.skipped_entries += 1;
                pos += size;
                continue;
            }
            if pos > good_end {
                self.scan.skipped_bytes += pos - good_end;
            }
            self.insert(Loc {
                offset: pos,
                header: h,
            });
            pos += size;
            good_end = pos;
        }
        self.len = good_end;
        if good_end < total {
            self.scan.truncated_bytes = total - good_end;
            tracing::warn!(file = %self.name().display(), cut = total - good_end, "lineage file ends in a torn or corrupt tail; cut");
            self.set_len(good_end)?;
        }
        Ok(())
    }

    fn insert(&mut self, loc: Loc) {
        self.live_bytes += entry_size(loc.header.payload_len);
        if let Some(old) = self.index.insert(loc.header.key, loc) {
            self.live_bytes -= entry_size(old.header.payload_len);
        }
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        match &mut self.medium {
            Medium::Mem { buf, dirty, .. } => {
                buf.truncate(usize::try_from(len).unwrap_or(usize::MAX));
                *dirty = true;
            }
            Medium::File { file: None, .. } => {}
            Medium::File {
                file: Some(f),
                path,
            } => {
                fsio::set_len(f, path, len).map_err(|e| StoreErr::io("truncate", &*path, e))?;
                fsio::sync_data(f, path).map_err(|e| StoreErr::io("fsync", &*path, e))?;
            }
        }
        Ok(())
    }

    /// Where the latest valid entry of `key` lies.
    #[must_use]
    pub fn get(&self, key: &BlockKey) -> Option<Loc> {
        self.index.get(key).copied()
    }

    /// Read the latest entry of `key`, re-checking header and payload CRCs (the medium
    /// may have been damaged since the scan). `Ok(None)` if there is none.
    ///
    /// # Errors
    /// [`StoreErr::Io`]; [`StoreErr::InvalidRecord`] if the entry is now corrupt.
    pub fn read_entry(&self, key: &BlockKey) -> Result<Option<(EntryHeader, Vec<u8>)>> {
        let Some(loc) = self.get(key) else {
            return Ok(None);
        };
        let mut hb = [0u8; ENTRY_HEADER_LEN];
        self.read(loc.offset, &mut hb)?;
        let corrupt = |reason: &str| StoreErr::InvalidRecord {
            offset: loc.offset,
            reason: format!("{} entry of {key}: {reason}", self.side.file_name()),
        };
        if decode_entry_header(&hb, self.side) != Some(loc.header) {
            return Err(corrupt("header damaged"));
        }
        let mut payload = vec![0u8; loc.header.payload_len as usize];
        self.read(loc.offset + ENTRY_HEADER_LEN as u64, &mut payload)?;
        if crc32c(&payload) != loc.header.payload_crc {
            return Err(corrupt("payload fails its crc32c"));
        }
        Ok(Some((loc.header, payload)))
    }

    /// Append an entry for `key` (it becomes the latest one). Not durable until
    /// [`SideFile::sync`].
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] for a payload above the format's limit or of the
    /// wrong kind; [`StoreErr::Io`].
    pub fn append(
        &mut self,
        key: BlockKey,
        kind: EntryKind,
        tag: EntryTag,
        payload: &[u8],
    ) -> Result<()> {
        let payload_len = u32::try_from(payload.len())
            .ok()
            .filter(|&n| n <= super::format::MAX_PAYLOAD && self.side.holds(kind))
            .ok_or_else(|| StoreErr::InvalidArgument {
                field: "lineage entry",
                reason: format!(
                    "{kind:?} payload of {} bytes in {}",
                    payload.len(),
                    self.side.file_name()
                ),
            })?;
        let header = EntryHeader {
            key,
            kind,
            payload_len,
            tag,
            payload_crc: crc32c(payload),
        };
        let bytes = encode_entry(&header, payload);
        self.ensure_created()?;
        let at = self.len;
        match &mut self.medium {
            Medium::Mem { buf, dirty, .. } => {
                buf.truncate(at as usize);
                buf.extend_from_slice(&bytes);
                *dirty = true;
            }
            Medium::File { file: None, path } => {
                return Err(StoreErr::io(
                    "append",
                    &*path,
                    std::io::Error::other("file not created"),
                ))
            }
            Medium::File {
                file: Some(f),
                path,
            } => fsio::write_all_at(f, path, &bytes, at)
                .map_err(|e| StoreErr::io("append", &*path, e))?,
        }
        self.len = at + bytes.len() as u64;
        self.insert(Loc { offset: at, header });
        Ok(())
    }

    /// Write the file header if the file does not exist yet.
    fn ensure_created(&mut self) -> Result<()> {
        if self.len != 0 {
            return Ok(());
        }
        let head = encode_file_header(self.side);
        match &mut self.medium {
            Medium::Mem { buf, dirty, .. } => {
                buf.clear();
                buf.extend_from_slice(&head);
                *dirty = true;
            }
            Medium::File { file, path } => {
                // Atomic creation: the file either does not exist or has a whole header.
                tensorvault_core::atomic::write_atomic(&*path, &head)
                    .map_err(|e| StoreErr::io("create", &*path, std::io::Error::other(e)))?;
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&*path)
                    .map_err(|e| StoreErr::io("open", &*path, e))?;
                *file = Some(f);
            }
        }
        self.len = FILE_HEADER_LEN as u64;
        Ok(())
    }

    /// Make every append durable (fdatasync, or the persistence hook).
    ///
    /// # Errors
    /// [`StoreErr::Io`].
    pub fn sync(&mut self) -> Result<()> {
        match &mut self.medium {
            Medium::Mem { buf, hook, dirty } => {
                if *dirty {
                    if let Some(h) = hook.as_mut() {
                        h(buf);
                    }
                    *dirty = false;
                }
            }
            Medium::File { file: None, .. } => {}
            Medium::File {
                file: Some(f),
                path,
            } => fsio::sync_data(f, path).map_err(|e| StoreErr::io("fsync", &*path, e))?,
        }
        Ok(())
    }

    /// Bytes of entries that are superseded, skipped or otherwise not in the index.
    #[must_use]
    pub fn garbage(&self) -> u64 {
        self.len
            .saturating_sub(FILE_HEADER_LEN as u64)
            .saturating_sub(self.live_bytes)
    }

    /// File length (0 while no file exists).
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Blocks with an entry.
    #[must_use]
    pub fn entries(&self) -> usize {
        self.index.len()
    }

    /// What the scan on open found.
    #[must_use]
    pub fn scan_stats(&self) -> ScanStats {
        self.scan
    }
}

mod rewrite;

#[cfg(test)]
mod tests;
