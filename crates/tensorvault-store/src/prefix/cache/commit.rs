//! The write side of a prefix cache: every change (new chunks, eviction, demotion, the
//! drop of damaged chunks, the uses this handle saw) is one *commit*, made under the
//! collection's writer lock, which is held only for that commit: the lock is taken with a
//! bounded wait, the chunk table is rebuilt from the log under it (so a chunk another
//! process stored meanwhile is seen and not stored twice, and the blocks of a chunk whose
//! writer was killed are deleted), the change is logged and the store closed.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use std::path::Path;

use super::view::{chunk_table, Chunk, ChunkForm, SharedClock};
use super::{poisoned, PrefixCache};
use crate::clock::Clock;
use crate::config::StoreConfig;
use crate::error::{Result, StoreErr};
use crate::fs::DirStore;
use crate::prefix::counts::{ModelCounts, COUNTS_FILE};
use crate::prefix::evict::{plan_eviction, ChunkUse};
use crate::prefix::TENANT;
use crate::types::{BlockKey, BlockMeta};

/// Pause between two tries for the writer lock.
const LOCK_RETRY: Duration = Duration::from_millis(5);

/// The collection open for writing during one commit, and its complete chunks.
pub(super) struct Writer<C: Clock> {
    pub store: DirStore<SharedClock<C>>,
    pub table: HashMap<u128, Chunk>,
}

/// Open the collection for writing, retrying while another writer (a process, or another
/// handle of this process) holds it, for at most the store's `lock_wait`.
pub(super) fn open_writer<C: Clock>(
    root: &Path,
    coll: &str,
    clock: &SharedClock<C>,
    scfg: &StoreConfig,
    create: bool,
) -> Result<DirStore<SharedClock<C>>> {
    let start = Instant::now();
    let wait = scfg.lock_wait;
    let mut said = false;
    loop {
        match DirStore::open_dir(root, TENANT, coll, clock.clone(), scfg.clone(), create) {
            Ok(s) => return Ok(s),
            Err(StoreErr::Locked { path, held, .. }) => {
                let waited = start.elapsed();
                if waited >= wait {
                    return Err(StoreErr::Locked {
                        path,
                        held,
                        waited: format!(" (waited {:.1} s)", waited.as_secs_f64()),
                    });
                }
                if !said && waited >= Duration::from_millis(500) {
                    tracing::info!(
                        path = %path.display(),
                        "prefix cache: waiting for another writer to finish its commit"
                    );
                    said = true;
                }
                std::thread::sleep(LOCK_RETRY);
            }
            Err(e) => return Err(e),
        }
    }
}

/// The chunk table of a store just opened for writing; the blocks of incomplete chunks
/// (left by a killed writer: no other can be writing now) are deleted.
pub(super) fn writer_table<C: Clock>(
    store: &DirStore<SharedClock<C>>,
    form: ChunkForm,
) -> Result<HashMap<u128, Chunk>> {
    let (table, stale) = chunk_table(store, form)?;
    if !stale.is_empty() {
        let keys: Vec<BlockKey> = store
            .blocks()?
            .into_iter()
            .filter(|m| stale.contains(&m.key.tensor_id))
            .map(|m| m.key)
            .collect();
        tracing::warn!(
            chunks = stale.len(),
            "prefix cache: dropping incomplete chunks"
        );
        store.delete_blocks(&keys)?;
    }
    Ok(table)
}

impl<C: Clock> PrefixCache<C> {
    /// Run `f` as one commit: take the writer lock, rebuild the table, drop the chunks
    /// found damaged, record the uses seen since the last commit, run `f`, add this
    /// handle's counters to the model's, close the store, refresh the snapshot.
    pub(super) fn commit<R>(&self, f: impl FnOnce(&mut Writer<C>) -> Result<R>) -> Result<R> {
        self.check_writable("commit")?;
        let _w = self.write.lock().map_err(poisoned)?;
        let store = open_writer(&self.root, &self.coll, &self.clock, &self.scfg, false)?;
        let table = writer_table(&store, self.form())?;
        let mut w = Writer { store, table };
        let drops: Vec<u128> = std::mem::take(&mut *self.pending_drop.lock().map_err(poisoned)?)
            .into_iter()
            .collect();
        for id in drops {
            self.drop_from(&mut w, id)?;
        }
        let touches = std::mem::take(&mut *self.touches.lock().map_err(poisoned)?);
        if !touches.is_empty() {
            {
                let mut idx = w.store.write_index()?;
                for (id, tick) in &touches {
                    if let Some(c) = w.table.get(id) {
                        for b in 0..self.blocks_per_chunk() {
                            idx.record_access(&BlockKey::new(c.tensor_id, b), *tick);
                        }
                    }
                }
            }
            w.store.flush_access()?;
        }
        let out = f(&mut w)?;
        self.persist_counts()?;
        w.store.compact_if_over(2)?;
        w.store.close()?;
        self.refresh(true)?;
        Ok(out)
    }

    /// Add what this handle counted since its last commit to the model's `prefix.stats`
    /// (called under the writer lock). A damaged counters file is replaced.
    fn persist_counts(&self) -> Result<()> {
        let now = self.counters.values();
        let mut done = self.persisted.lock().map_err(poisoned)?;
        if now == *done {
            return Ok(());
        }
        let mut total = match ModelCounts::read(&self.dir) {
            Ok(c) => c,
            Err(e) if e.is_corruption() || matches!(e, StoreErr::BadHeader { .. }) => {
                tracing::warn!(error = %e, "prefix cache: replacing a damaged {COUNTS_FILE}");
                ModelCounts::default()
            }
            Err(e) => return Err(e),
        };
        for i in 0..6 {
            total.0[i] = total.0[i].saturating_add(now[i] - done[i]);
        }
        let path = self.dir.join(COUNTS_FILE);
        tensorvault_core::atomic::write_atomic(&path, &total.encode())
            .map_err(|e| StoreErr::io("write", &path, std::io::Error::other(e)))?;
        *done = now;
        Ok(())
    }

    /// Delete chunk `id` and every chunk that extends it.
    pub(super) fn drop_from(&self, w: &mut Writer<C>, id: u128) -> Result<()> {
        let mut kids: HashMap<u128, Vec<u128>> = HashMap::new();
        for (cid, c) in &w.table {
            kids.entry(c.parent).or_default().push(*cid);
        }
        let mut out = vec![id];
        let mut i = 0;
        while let Some(cur) = out.get(i).copied() {
            out.extend(kids.get(&cur).into_iter().flatten().copied());
            i += 1;
        }
        self.delete_chunks(w, &out)
    }

    pub(super) fn delete_chunks(&self, w: &mut Writer<C>, ids: &[u128]) -> Result<()> {
        let mut keys = Vec::new();
        let mut removed = 0u64;
        for id in ids {
            if let Some(c) = w.table.remove(id) {
                removed += 1;
                keys.extend((0..self.blocks_per_chunk()).map(|b| BlockKey::new(c.tensor_id, b)));
            }
        }
        w.store.delete_blocks(&keys)?;
        self.counters.evicted.fetch_add(removed, Ordering::Relaxed);
        Ok(())
    }

    /// Evict until the chunks' payload fits `budget` bytes; returns the chunks evicted.
    pub(super) fn evict_to(&self, w: &mut Writer<C>, budget: u64) -> Result<u64> {
        let blocks = chunk_blocks(&w.store, &w.table)?;
        let uses: Vec<ChunkUse> = blocks
            .iter()
            .filter_map(|(id, metas)| {
                Some(ChunkUse {
                    id: *id,
                    parent: w.table.get(id)?.parent,
                    bytes: metas.iter().map(|m| u64::from(m.data_len)).sum(),
                    last_use: metas
                        .iter()
                        .map(|m| m.last_access_at.max(m.created_at))
                        .max()?,
                })
            })
            .collect();
        let victims = plan_eviction(&uses, budget);
        if !victims.is_empty() {
            self.delete_chunks(w, &victims)?;
        }
        Ok(victims.len() as u64)
    }
}

/// The blocks of every chunk of `table` in `store`, by chunk id.
pub(super) fn chunk_blocks<C: Clock>(
    store: &DirStore<SharedClock<C>>,
    table: &HashMap<u128, Chunk>,
) -> Result<std::collections::BTreeMap<u128, Vec<BlockMeta>>> {
    store.apply_pending_access()?;
    let by_tensor: HashMap<u128, u128> = table.iter().map(|(id, c)| (c.tensor_id, *id)).collect();
    let mut out: std::collections::BTreeMap<u128, Vec<BlockMeta>> = Default::default();
    for m in store.blocks()? {
        if let Some(id) = by_tensor.get(&m.key.tensor_id) {
            out.entry(*id).or_default().push(m);
        }
    }
    Ok(out)
}
