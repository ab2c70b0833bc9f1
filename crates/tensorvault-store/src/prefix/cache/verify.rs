//! [`PrefixCache::verify`]: check every block of every chunk without touching access
//! statistics (so tiering and LRU order do not change), and drop damaged chunks.

use std::sync::atomic::Ordering;

use super::view::View;
use super::PrefixCache;
use crate::clock::Clock;
use crate::error::Result;
use crate::types::BlockKey;

/// What [`PrefixCache::verify`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrefixVerifyReport {
    /// Chunks whose blocks were all checked.
    pub chunks: u64,
    /// Blocks checked (CRC32C of the stored payload, then decoded).
    pub blocks: u64,
    /// Ids of the chunks with a block that failed its checksum or decode, or is missing.
    pub damaged: Vec<u128>,
    /// Chunks deleted because of them (the damaged ones and every chunk extending them;
    /// 0 in a read-only cache).
    pub dropped: u64,
}

impl<C: Clock> PrefixCache<C> {
    /// Read every block of every chunk (verified and decoded, not counted as an access)
    /// through a snapshot, taking no lock. A writable cache then deletes each damaged
    /// chunk and the chunks extending it in one commit; a read-only one only reports them.
    ///
    /// # Errors
    /// Errors other than corruption (I/O, a poisoned lock); the store's delete errors.
    pub fn verify(&self) -> Result<PrefixVerifyReport> {
        let mut view = self.refresh(false)?;
        let mut report = self.verify_view(&view)?;
        // A block moved or evicted by a writer after the snapshot reads as damaged: check
        // again through a fresh snapshot before reporting anything.
        for _ in 0..3 {
            if report.damaged.is_empty() || !self.is_stale(&view)? {
                break;
            }
            view = self.refresh(true)?;
            report = self.verify_view(&view)?;
        }
        if !report.damaged.is_empty() {
            self.counters
                .damaged
                .fetch_add(report.damaged.len() as u64, Ordering::Relaxed);
        }
        if !self.cfg.read_only && !report.damaged.is_empty() {
            let before = self.counters.evicted.load(Ordering::Relaxed);
            let damaged = report.damaged.clone();
            self.commit(|w| {
                for id in &damaged {
                    self.drop_from(w, *id)?;
                }
                Ok(())
            })?;
            report.dropped = self.counters.evicted.load(Ordering::Relaxed) - before;
        }
        Ok(report)
    }

    fn verify_view(&self, view: &View<C>) -> Result<PrefixVerifyReport> {
        let mut report = PrefixVerifyReport::default();
        let chunks: Vec<(u128, u128)> = view
            .table
            .iter()
            .map(|(id, c)| (*id, c.tensor_id))
            .collect();
        let mut bytes = Vec::new();
        for (id, tensor_id) in chunks {
            let mut bad = false;
            for b in 0..self.blocks_per_chunk() {
                let key = BlockKey::new(tensor_id, b);
                // Hold the index lock so the slot cannot be freed and reused under the read.
                let idx = view.store.read_index()?;
                let Some(meta) = idx.get(&key) else {
                    bad = true;
                    break;
                };
                report.blocks += 1;
                match view.store.read_elements(&meta, &mut bytes) {
                    Ok(()) => {}
                    Err(e) if e.is_corruption() => {
                        tracing::warn!(%key, error = %e, "prefix cache verify: damaged chunk");
                        bad = true;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            report.chunks += 1;
            if bad {
                report.damaged.push(id);
            }
        }
        report.damaged.sort_unstable();
        Ok(report)
    }
}
