//! [`PrefixCache::verify`]: check every block of every chunk without touching access
//! statistics (so tiering and LRU order do not change), and drop damaged chunks.

use std::sync::atomic::Ordering;

use super::{poisoned, PrefixCache};
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
    /// Read every block of every chunk (verified and decoded, not counted as an access).
    /// A writable cache deletes each damaged chunk and the chunks extending it, as a
    /// `load` that met it would; a read-only one only reports them.
    ///
    /// # Errors
    /// Errors other than corruption (I/O, a poisoned lock); the store's delete errors.
    pub fn verify(&self) -> Result<PrefixVerifyReport> {
        let mut report = PrefixVerifyReport::default();
        let chunks: Vec<(u128, u128)> = self
            .chunks
            .read()
            .map_err(poisoned)?
            .iter()
            .map(|(id, c)| (*id, c.tensor_id))
            .collect();
        let mut bytes = Vec::new();
        for (id, tensor_id) in chunks {
            let mut bad = false;
            for b in 0..self.blocks_per_chunk() {
                let key = BlockKey::new(tensor_id, b);
                // Hold the index lock so the slot cannot be freed and reused under the read.
                let idx = self.store.read_index()?;
                let Some(meta) = idx.get(&key) else {
                    bad = true;
                    break;
                };
                report.blocks += 1;
                match self.store.read_elements(&meta, &mut bytes) {
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
        if !report.damaged.is_empty() {
            self.counters
                .damaged
                .fetch_add(report.damaged.len() as u64, Ordering::Relaxed);
        }
        if !self.cfg.read_only {
            let before = self.counters.evicted.load(Ordering::Relaxed);
            for id in &report.damaged {
                self.drop_from(*id)?;
            }
            report.dropped = self.counters.evicted.load(Ordering::Relaxed) - before;
        }
        Ok(report)
    }
}
