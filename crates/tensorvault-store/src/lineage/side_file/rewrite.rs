//! Rewriting a lineage side file with only the entries that are still needed.

use std::fs::OpenOptions;
use std::io::Write;

use super::super::format::{encode_file_header, entry_size, EntryTag, FILE_HEADER_LEN};
use super::{Loc, Medium, SideFile};
use crate::error::{Result, StoreErr};
use crate::types::BlockKey;

impl SideFile {
    /// Drop the entries `keep` refuses and every superseded or corrupt byte: the file is
    /// rewritten with the kept entries in key order (atomically: temp file, fsync,
    /// rename, directory fsync; in memory: replaced, then the hook is called).
    ///
    /// # Errors
    /// [`StoreErr::Io`]; the old file is intact on error.
    pub fn rewrite(&mut self, keep: &dyn Fn(&BlockKey, &EntryTag) -> bool) -> Result<()> {
        let mut locs: Vec<Loc> = self
            .index
            .values()
            .filter(|l| keep(&l.header.key, &l.header.tag))
            .copied()
            .collect();
        locs.sort_by_key(|l| l.header.key);
        let mut out = Vec::new();
        let mut tmp = match &self.medium {
            Medium::File { path, .. } if self.len > 0 => Some(
                tensorvault_core::atomic::AtomicFile::create(path)
                    .map_err(|e| StoreErr::io("create", path, std::io::Error::other(e)))?,
            ),
            _ => None,
        };
        let name = self.name();
        let mut emit = |bytes: &[u8]| -> Result<()> {
            match tmp.as_mut() {
                Some(t) => t
                    .write_all(bytes)
                    .map_err(|e| StoreErr::io("write", &name, e)),
                None => {
                    out.extend_from_slice(bytes);
                    Ok(())
                }
            }
        };
        if self.len > 0 {
            emit(&encode_file_header(self.side))?;
        }
        let mut buf = Vec::new();
        let mut new_locs = Vec::with_capacity(locs.len());
        let mut pos = FILE_HEADER_LEN as u64;
        for l in &locs {
            buf.resize(entry_size(l.header.payload_len) as usize, 0);
            self.read(l.offset, &mut buf)?;
            emit(&buf)?;
            new_locs.push(Loc {
                offset: pos,
                header: l.header,
            });
            pos += buf.len() as u64;
        }
        match &mut self.medium {
            Medium::Mem { buf, dirty, .. } => {
                *buf = out;
                *dirty = true;
            }
            Medium::File { file, path } => {
                if let Some(t) = tmp {
                    t.commit()
                        .map_err(|e| StoreErr::io("rename", &*path, std::io::Error::other(e)))?;
                    let f = OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&*path)
                        .map_err(|e| StoreErr::io("open", &*path, e))?;
                    *file = Some(f);
                }
            }
        }
        if self.len > 0 {
            self.len = pos;
        }
        self.index.clear();
        self.live_bytes = 0;
        for l in new_locs {
            self.insert(l);
        }
        self.sync()
    }
}
