//! Flush, close and compaction: make everything durable; rewrite the log as a snapshot
//! of the live index and drop names and lineage entries of dead blocks.

use crate::block_io::BlockIO;
use crate::clock::Clock;
use crate::error::Result;
use crate::meta_log::{MetaLog, MetaRecord};

use super::tail::commit_mark;
use super::TensorStore;

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// [`TensorStore::compact`] if the log holds more than `ratio` records per live block
    /// (0: never); returns whether it compacted.
    ///
    /// # Errors
    /// As [`TensorStore::compact`].
    pub fn compact_if_over(&self, ratio: u32) -> Result<bool> {
        if ratio == 0 {
            return Ok(false);
        }
        let live = self.read_index()?.len().max(1) as u64;
        if self.log_records()? <= u64::from(ratio).saturating_mul(live) {
            return Ok(false);
        }
        self.compact()?;
        Ok(true)
    }

    /// Log pending access statistics and make everything durable (data, log, names).
    ///
    /// # Errors
    /// [`StoreErr::Io`].
    pub fn flush(&self) -> Result<()> {
        self.flush_access()?;
        let mut w = self.lock_writer()?;
        self.io.sync()?;
        if w.unconfirmed {
            // Everything logged so far is durable with its data once this sync returns.
            w.log.append(&[commit_mark()])?;
        }
        w.log.sync()?;
        w.unconfirmed = false;
        w.catalog.sync()?;
        self.lineage.sync()?;
        w.unsynced = 0;
        self.release_frees(&mut w)
    }

    /// Flush and close.
    ///
    /// # Errors
    /// As [`TensorStore::flush`].
    pub fn close(self) -> Result<()> {
        self.flush()
    }

    /// Rewrite the log as a snapshot of the live index (Create + Access per block, in key
    /// order) and drop names of tensors without blocks. Crash-safe: the log is replaced
    /// atomically.
    ///
    /// # Errors
    /// [`StoreErr::Io`]; on error the old log is intact.
    pub fn compact(&self) -> Result<()> {
        self.apply_pending_access()?;
        let mut w = self.lock_writer()?;
        self.io.sync()?;
        let (snapshot, live_ids) = {
            let mut idx = self.write_index()?;
            idx.dirty.clear();
            let metas = idx.sorted();
            let ids: std::collections::HashSet<u128> =
                metas.iter().map(|m| m.key.tensor_id).collect();
            (metas, ids)
        };
        let it = snapshot.iter().flat_map(|m| {
            let create = MetaRecord::Create { meta: *m };
            let fresh =
                m.access_count == 0 && m.access_window == 1 && m.last_access_at == m.created_at;
            let access = (!fresh).then_some(MetaRecord::Access {
                key: m.key,
                last_access_at: m.last_access_at,
                access_count: m.access_count,
                ema_access_rate: m.ema_access_rate,
                access_window: m.access_window,
            });
            std::iter::once(create).chain(access)
        });
        // The data was synced above: the snapshot ends confirmed.
        let mut it = it.chain(std::iter::once(commit_mark()));
        w.log.compact(&mut it)?;
        w.unconfirmed = false;
        w.catalog.compact(&|id| live_ids.contains(&id))?;
        w.unsynced = 0;
        self.release_frees(&mut w)?;
        self.compact_lineage()
    }
}
