//! Verification, statistics and (feature `metrics`) the Prometheus snapshot of a store.

use std::sync::atomic::Ordering;

use crate::block_io::BlockIO;
use crate::clock::Clock;
use crate::error::Result;
use crate::meta_log::MetaLog;
use crate::tensor::{numel, BlockProblem, StoreStats, VerifyReport};
use crate::types::{BlockMeta, Tier};

use super::TensorStore;

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// Read, checksum and decode every live block (without counting accesses) and report
    /// each one that fails, every block dropped at open, and every valid log record replay
    /// could not use ([`VerifyReport::defects`] counts them all).
    ///
    /// # Errors
    /// Only for store-level failures; corrupt blocks are reported, not returned.
    pub fn verify(&self) -> Result<VerifyReport> {
        let metas = self.blocks()?;
        let mut report = VerifyReport::default();
        let mut buf = Vec::new();
        for m in &metas {
            report.checked += 1;
            report.bytes += u64::from(m.data_len);
            let r = {
                let idx = self.read_index()?;
                match idx.get(&m.key) {
                    // A centred block is checked against its tensor's side record too
                    // (docs/formats/store.md, "Centred embedding tensors").
                    Some(cur) => self
                        .centre_of(&idx, &cur)
                        .and_then(|c| self.read_elements_centred(&cur, &mut buf, c.as_ref()))
                        .map(|()| cur),
                    None => continue, // deleted meanwhile
                }
            };
            if self.is_side_key(&m.key)
                && self
                    .read_index()?
                    .get(&crate::types::BlockKey::new(m.key.tensor_id, 0))
                    .is_none()
            {
                report.problems.push(
                    self.problem(
                        m,
                        "side record (mean row) of a tensor without block 0: a first put was \
                     interrupted after it; put or delete the tensor"
                            .to_owned(),
                    ),
                );
                continue;
            }
            if let Err(e) = r {
                report.problems.push(self.problem(m, e.to_string()));
            }
        }
        report.catalog_skipped = self.lock_writer_for_read()?.catalog.skipped;
        // Blocks dropped at open (a slot past the end of its tier file: the file was
        // removed, emptied or cut short; or a slot another block owns) are gone. Each is a
        // problem, not a silent absence.
        for (m, why) in &self.dropped_on_open {
            report.problems.push(self.problem(m, why.clone()));
        }
        // So is every valid log record replay could not use.
        report.replay_defects.clone_from(&self.replay_defects);
        report.replay_defects_total = self.replay_defects_total;
        Ok(report)
    }

    /// A verify problem for block `m`, named with its tensor's name when the catalog has it.
    fn problem(&self, m: &BlockMeta, error: String) -> BlockProblem {
        let tensor = self
            .writer
            .lock()
            .ok()
            .and_then(|w| w.catalog.name(m.key.tensor_id).map(str::to_owned));
        BlockProblem {
            key: m.key,
            tensor,
            tier: m.tier,
            offset: m.data_offset,
            error,
        }
    }

    /// Store-wide statistics.
    ///
    /// # Errors
    /// Only if a thread panicked while holding a store lock.
    pub fn stats(&self) -> Result<StoreStats> {
        let mut s = StoreStats::default();
        {
            let idx = self.read_index()?;
            let mut ids = std::collections::HashSet::new();
            for (key, tier, data_len) in idx.placements() {
                let t = tier.index();
                s.blocks[t] += 1;
                s.payload_bytes[t] += u64::from(data_len);
                ids.insert(key.tensor_id);
            }
            s.tensors = ids.len() as u64;
        }
        let metas = self.blocks()?;
        let mut steps: [Vec<f32>; 4] = Default::default();
        for m in &metas {
            steps[m.tier.index()].push(m.scale);
            let elems = if m.tier.is_quantized() {
                // values_per_frame lives in the segment header; the raw size is the block's
                // share of the tensor.
                let n = numel(m.shape()).unwrap_or(0);
                let start = u64::from(m.key.block_index) * u64::from(self.geo.block_elems);
                n.saturating_sub(start).min(u64::from(self.geo.block_elems))
            } else {
                u64::from(m.data_len) / m.dtype.size() as u64
            };
            s.raw_bytes[m.tier.index()] += elems * m.dtype.size() as u64;
        }
        for (out, v) in s.step_median.iter_mut().zip(&mut steps) {
            if !v.is_empty() {
                let mid = v.len() / 2;
                *out = *v.select_nth_unstable_by(mid, f32::total_cmp).1;
            }
        }
        s.usage = Tier::ALL.map(|t| self.io.usage(t));
        s.log_records = self.log_records()?;
        let c = &self.counters;
        s.reads = c.reads.load(Ordering::Relaxed);
        s.writes = c.writes.load(Ordering::Relaxed);
        s.migrations = c.migrations.load(Ordering::Relaxed);
        s.deletes = c.deletes.load(Ordering::Relaxed);
        s.checksum_failures = c.checksum_failures.load(Ordering::Relaxed);
        s.replay_nanos = self.replay_nanos;
        s.replay_skipped = self.replay.skipped_total;
        s.replay_ignored = self.replay_ignored;
        s.held_blocks = self.held_blocks()?.len() as u64;
        Ok(s)
    }
}

#[cfg(feature = "metrics")]
use crate::metrics::{MetricsSnapshot, StoreMetrics};

#[cfg(feature = "metrics")]
impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// The store's counters and gauges right now.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the index or writer lock.
    pub fn metrics_snapshot(&self) -> Result<MetricsSnapshot> {
        let c = &self.counters;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let mut s = MetricsSnapshot {
            reads: load(&c.reads),
            writes: load(&c.writes),
            read_bytes: load(&c.bytes_read),
            written_bytes: load(&c.bytes_written),
            migrations: c
                .migrations_by_tier
                .each_ref()
                .map(|row| row.each_ref().map(load)),
            deletes: load(&c.deletes),
            checksum_failures: load(&c.checksum_failures),
            repairs: load(&c.repairs),
            replay_seconds: self.replay_nanos as f64 / 1e9,
            replay_skipped: self.replay.skipped_total,
            replay_ignored: self.replay_ignored,
            held_blocks: self.held_blocks()?.len() as u64,
            ..MetricsSnapshot::default()
        };
        {
            let idx = self.read_index()?;
            let mut ids = std::collections::HashSet::new();
            for (key, tier, data_len) in idx.placements() {
                let t = tier.index();
                s.blocks[t] += 1;
                s.payload_bytes[t] += u64::from(data_len);
                ids.insert(key.tensor_id);
            }
            s.tensors = ids.len() as u64;
        }
        for t in Tier::ALL {
            let u = self.io.usage(t);
            s.file_bytes[t.index()] = u.bytes;
            s.slots[t.index()] = u.slots;
            s.free_slots[t.index()] = u.free_slots;
        }
        s.log_records = self.log_records()?;
        Ok(s)
    }

    /// Append this store's metrics to `out` in the classic Prometheus text format
    /// ([`StoreMetrics::encode_classic`]). Use [`StoreMetrics`] to expose several
    /// collections at once, or for the OpenMetrics format.
    ///
    /// # Errors
    /// As [`TensorStore::metrics_snapshot`].
    pub fn encode_prometheus(&self, out: &mut String) -> Result<()> {
        let mut m = StoreMetrics::new();
        m.add(self)?;
        m.encode_classic(out);
        Ok(())
    }
}

#[cfg(feature = "metrics")]
impl StoreMetrics {
    /// Take a snapshot of `store` (replacing an earlier one of the same tenant and
    /// collection).
    ///
    /// # Errors
    /// As [`TensorStore::metrics_snapshot`].
    pub fn add<C: Clock, B: BlockIO, M: MetaLog>(
        &mut self,
        store: &TensorStore<C, B, M>,
    ) -> Result<()> {
        let snap = store.metrics_snapshot()?;
        let (tenant, collection) = store.names();
        self.add_snapshot(tenant, collection, snap);
        Ok(())
    }
}
