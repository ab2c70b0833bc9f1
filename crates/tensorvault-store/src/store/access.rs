//! Access tracking: reads queue their accesses without the index write lock; queued
//! accesses are applied in batches and logged as Access records.

use std::sync::atomic::Ordering;

use crate::block_io::BlockIO;
use crate::clock::Clock;
use crate::error::Result;
use crate::error::StoreErr;
use crate::meta_log::{MetaLog, MetaRecord};
use crate::types::BlockKey;

use super::{poisoned, TensorStore};

/// Queued accesses that trigger an apply to the index.
const PENDING_ACCESS_MAX: usize = 4096;

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// Record one access. Readers never take the index write lock for this: the access
    /// is queued and applied in batches ([`TensorStore::apply_pending_access`]), so
    /// concurrent readers only share the index read lock. Every `access_flush_every`
    /// reads, the accumulated Access records are logged.
    pub(super) fn note_access(&self, key: &BlockKey) -> Result<()> {
        let now = self.clock.now_ticks();
        let queued = {
            let mut q = self.pending_access.lock().map_err(poisoned)?;
            q.push((*key, now));
            q.len()
        };
        if queued >= PENDING_ACCESS_MAX {
            self.apply_pending_access()?;
        }
        let every = self.cfg.access_flush_every;
        if every > 0
            && (self.reads_since_flush.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(every)
        {
            match self.flush_access() {
                // A stopped writer cannot log statistics; the read itself succeeded.
                Err(StoreErr::WriterFailed { .. }) => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Apply queued accesses to the index, in the order they happened (deterministic for
    /// a single reader). Called before anything reads access statistics.
    ///
    /// # Errors
    /// Only if a thread panicked while holding a store lock.
    pub(crate) fn apply_pending_access(&self) -> Result<()> {
        let batch = std::mem::take(&mut *self.pending_access.lock().map_err(poisoned)?);
        if batch.is_empty() {
            return Ok(());
        }
        let mut idx = self.write_index()?;
        for (key, now) in batch {
            idx.record_access(&key, now);
        }
        Ok(())
    }

    /// Append Access records for every block read since its last one (sorted by key).
    ///
    /// # Errors
    /// [`StoreErr::Io`] from the log.
    pub fn flush_access(&self) -> Result<()> {
        self.apply_pending_access()?;
        let mut w = self.lock_writer()?;
        let recs = {
            let mut idx = self.write_index()?;
            let mut keys: Vec<BlockKey> = idx.dirty.drain().collect();
            keys.sort();
            keys.iter()
                .filter_map(|k| idx.get(k))
                .map(|m| MetaRecord::Access {
                    key: m.key,
                    last_access_at: m.last_access_at,
                    access_count: m.access_count,
                    ema_access_rate: m.ema_access_rate,
                    access_window: m.access_window,
                })
                .collect::<Vec<_>>()
        };
        if recs.is_empty() {
            return Ok(());
        }
        if let Err(e) = w.log.append(&recs) {
            w.poisoned = Some(e.to_string());
            return Err(e);
        }
        Ok(())
    }
}
