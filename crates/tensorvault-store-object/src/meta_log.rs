//! [`ObjectMetaLog`]: the store's MetaLog as immutable objects. The log is the snapshot
//! object (a whole `meta.log` image: header + 128-byte records) followed by the sealed
//! segment objects the manifest lists (records only). [`MetaLog::append`] buffers
//! records; [`MetaLog::sync`] uploads them as one new segment (plus the name catalog if
//! it changed) and commits the manifest conditionally, so an acknowledged write is in a
//! committed segment and a writer that lost a race gets [`ObjectErr::Conflict`] with
//! nothing of its batch visible. [`MetaLog::compact`] uploads a new snapshot and commits
//! it with an empty segment list. When more than `max_segments` segments pile up, a sync
//! merges them into one (log content unchanged), so reopening always costs one snapshot
//! GET plus a bounded number of segment GETs (issued concurrently).

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use tensorvault_core::checksum::crc32c;
use tensorvault_store::meta_log::layout::RECORD_LEN;
use tensorvault_store::meta_log::{decode_header, encode_header};
use tensorvault_store::{
    CollectionConfig, MemMetaLog, MetaLog, MetaRecord, RecoveryMode, ReplayStats, Result,
};

use crate::collection::Collection;
use crate::error::{OResult, ObjectErr};
use crate::frame;
use crate::manifest::ObjRef;

/// The MetaLog of an object-store collection. See the module docs.
pub struct ObjectMetaLog {
    coll: Arc<Collection>,
    config: CollectionConfig,
    generation: u64,
    /// Snapshot + segments as loaded on open, until replay consumed them.
    image: Option<Vec<u8>>,
    /// Header + the records appended since the last sync (encoded and checked by the
    /// store's own codec).
    pending: MemMetaLog,
    /// Records in committed objects.
    durable_records: u64,
    /// The catalog file the store writes names to, and the CRC32C of what was uploaded.
    names_file: Option<PathBuf>,
    names_crc: Option<u32>,
    max_segments: usize,
}

impl ObjectMetaLog {
    /// A log over `image` (the snapshot body followed by the segment bodies, as loaded
    /// by [`crate::open_store`]).
    pub(crate) fn new(
        coll: Arc<Collection>,
        image: Vec<u8>,
        names_file: Option<PathBuf>,
        max_segments: usize,
    ) -> Result<Self> {
        let (config, generation) = decode_header(&image)?;
        let names_crc = names_file
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .map(|b| crc32c(&b));
        Ok(Self {
            pending: MemMetaLog::new(config),
            durable_records: (image.len().saturating_sub(RECORD_LEN) / RECORD_LEN) as u64,
            image: Some(image),
            coll,
            config,
            generation,
            names_file,
            names_crc,
            max_segments: max_segments.max(1),
        })
    }

    /// The shared collection (request counters, manifest).
    #[must_use]
    pub fn collection(&self) -> &Arc<Collection> {
        &self.coll
    }

    /// Generation of the log header (compactions so far).
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn pending_records(&self) -> &[u8] {
        self.pending
            .as_bytes()
            .get(RECORD_LEN..)
            .unwrap_or_default()
    }

    /// The catalog's bytes if they changed since the last upload.
    fn changed_names(&self) -> Option<(Vec<u8>, u32)> {
        let b = std::fs::read(self.names_file.as_ref()?).ok()?;
        let crc = crc32c(&b);
        (Some(crc) != self.names_crc).then_some((b, crc))
    }

    /// Upload `objects` concurrently.
    fn put_all(&self, objects: Vec<(String, Vec<u8>)>) -> OResult<()> {
        let c = &self.coll;
        c.rt.block_on(futures::future::try_join_all(
            objects
                .into_iter()
                .map(|(k, b)| async move { c.put(&k, Bytes::from(b)).await }),
        ))?;
        Ok(())
    }

    /// Upload a segment (if `records` is non-empty) and the catalog (if changed), then
    /// commit them; on success delete what the commit made unreachable.
    fn commit_records(&mut self, records: &[u8], snapshot: Option<Vec<u8>>) -> OResult<()> {
        let names = self.changed_names();
        if records.is_empty() && names.is_none() && snapshot.is_none() {
            // Everything that freed the waiting objects is already committed.
            let freed = self.coll.take_freed();
            if !freed.is_empty() {
                self.coll.rt.block_on(self.coll.delete_quiet(&freed));
            }
            return Ok(());
        }
        let freed = self.coll.take_freed();
        let mut uploads = Vec::new();
        let seg = (!records.is_empty()).then(|| {
            let b = frame::seal(records.to_vec());
            let r = ObjRef {
                key: self.coll.fresh_key("log", "seg"),
                bytes: b.len() as u64,
            };
            uploads.push((r.key.clone(), b));
            r
        });
        let snap = snapshot.map(|s| {
            let b = frame::seal(s);
            let r = ObjRef {
                key: self.coll.fresh_key("log", "snap"),
                bytes: b.len() as u64,
            };
            uploads.push((r.key.clone(), b));
            r
        });
        let names_ref = names.as_ref().map(|(n, _)| {
            let b = frame::seal(n.clone());
            let r = ObjRef {
                key: self.coll.fresh_key("names", "names"),
                bytes: b.len() as u64,
            };
            uploads.push((r.key.clone(), b));
            r
        });
        let written: Vec<String> = uploads.iter().map(|(k, _)| k.clone()).collect();
        if let Err(e) = self.put_all(uploads) {
            self.coll.rt.block_on(self.coll.delete_quiet(&written));
            return Err(e);
        }
        let before = self.coll.manifest();
        let committed = self.coll.commit(|m| {
            if let Some(s) = &snap {
                m.snapshot = s.clone();
                m.segments.clear();
            }
            if let Some(s) = &seg {
                m.segments.push(s.clone());
            }
            if let Some(n) = &names_ref {
                m.names = Some(n.clone());
            }
        });
        if let Err(e) = committed {
            // Our objects are unreachable: remove them. The freed blocks stay (their
            // freeing records were not committed).
            self.coll.rt.block_on(self.coll.delete_quiet(&written));
            return Err(e);
        }
        if let Some((_, crc)) = names {
            self.names_crc = Some(crc);
        }
        let mut garbage = freed;
        if names_ref.is_some() {
            garbage.extend(before.names.map(|n| n.key));
        }
        if snap.is_some() {
            garbage.push(before.snapshot.key);
            garbage.extend(before.segments.into_iter().map(|s| s.key));
        }
        if !garbage.is_empty() {
            self.coll.rt.block_on(self.coll.delete_quiet(&garbage));
        }
        Ok(())
    }

    /// Merge every segment into one (same records, same order) and commit it.
    fn merge_segments(&mut self) -> OResult<()> {
        let segs = self.coll.manifest().segments;
        if segs.len() <= 1 {
            return Ok(());
        }
        let c = &self.coll;
        let bodies = c.rt.block_on(futures::future::try_join_all(
            segs.iter().map(|s| async move { c.get(&s.key).await }),
        ))?;
        let mut merged = Vec::new();
        for (s, b) in segs.iter().zip(&bodies) {
            merged.extend_from_slice(frame::open(b, &c.url(&s.key))?);
        }
        let b = frame::seal(merged);
        let r = ObjRef {
            key: c.fresh_key("log", "seg"),
            bytes: b.len() as u64,
        };
        self.put_all(vec![(r.key.clone(), b)])?;
        let n = segs.len();
        let merged_keys: Vec<String> = segs.iter().map(|s| s.key.clone()).collect();
        let res = c.commit(|m| {
            // Only the segments we merged (a prefix of the list) are replaced.
            if m.segments.get(..n).is_some_and(|p| p == segs.as_slice()) {
                m.segments.splice(..n, std::iter::once(r.clone()));
            }
        });
        match res {
            Ok(_) => c.rt.block_on(c.delete_quiet(&merged_keys)),
            Err(e) => {
                c.rt.block_on(c.delete_quiet(&[r.key]));
                return Err(e);
            }
        }
        Ok(())
    }
}

impl MetaLog for ObjectMetaLog {
    fn collection(&self) -> CollectionConfig {
        self.config
    }

    fn append(&mut self, recs: &[MetaRecord]) -> Result<()> {
        if self.coll.read_only {
            // Readers keep access statistics in memory only; anything else is refused.
            if recs.iter().all(|r| matches!(r, MetaRecord::Access { .. })) {
                return Ok(());
            }
            return Err(ObjectErr::ReadOnly { op: "append" }.into_store("append"));
        }
        self.pending.append(recs)
    }

    fn sync(&mut self) -> Result<()> {
        if self.coll.read_only {
            return Ok(());
        }
        let records = self.pending_records().to_vec();
        self.commit_records(&records, None)
            .map_err(|e| e.into_store("commit"))?;
        self.durable_records += (records.len() / RECORD_LEN) as u64;
        self.pending = MemMetaLog::new(self.config);
        if self.coll.manifest().segments.len() > self.max_segments {
            self.merge_segments()
                .map_err(|e| e.into_store("merge segments"))?;
        }
        Ok(())
    }

    fn replay(
        &mut self,
        mode: RecoveryMode,
        visit: &mut dyn FnMut(MetaRecord) -> Result<()>,
    ) -> Result<ReplayStats> {
        let Some(image) = self.image.take() else {
            return Ok(ReplayStats::default());
        };
        let mut log = MemMetaLog::from_bytes(image)?;
        let stats = log.replay(mode, visit)?;
        // Objects are checksummed whole, so a record can only be skipped here if it was
        // written corrupt; its bytes stay in the objects and replay skips it again.
        self.durable_records = log.record_count();
        Ok(stats)
    }

    fn compact(&mut self, snapshot: &mut dyn Iterator<Item = MetaRecord>) -> Result<()> {
        if self.coll.read_only {
            return Err(ObjectErr::ReadOnly { op: "compact" }.into_store("compact"));
        }
        let mut log =
            MemMetaLog::from_bytes(encode_header(&self.config, self.generation).to_vec())?;
        log.compact(snapshot)?;
        let bytes = log.to_bytes();
        let count = log.record_count();
        self.commit_records(&[], Some(bytes))
            .map_err(|e| e.into_store("commit snapshot"))?;
        self.generation += 1;
        self.durable_records = count;
        self.pending = MemMetaLog::new(self.config);
        Ok(())
    }

    fn record_count(&self) -> u64 {
        self.durable_records + (self.pending_records().len() / RECORD_LEN) as u64
    }
}

impl Drop for ObjectMetaLog {
    fn drop(&mut self) {
        if let Some(p) = &self.names_file {
            let _ = std::fs::remove_file(p);
        }
    }
}
