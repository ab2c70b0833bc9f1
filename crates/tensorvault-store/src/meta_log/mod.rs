//! The append-only metadata log (ADR-018 sections 3.10 and 3.13): every state change of
//! a block is one 128-byte CRC32C-protected record; replaying the log rebuilds the index.

mod file;
mod file_replay;
pub mod layout;
mod mem;
mod record;
mod replayer;

pub use file::FileMetaLog;
pub use mem::MemMetaLog;
pub use record::{decode_header, decode_record, encode_header, encode_record};

use crate::config::{CollectionConfig, RecoveryMode};
use crate::error::Result;
use crate::types::{BlockKey, BlockMeta, Tier};

/// One state transition of one block.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum MetaRecord {
    /// A block was created (or replaced: a Create for a live key replaces it). Carries
    /// the whole [`BlockMeta`] except the access statistics, which start as
    /// `last_access_at = created_at`, `access_count = 0`, `ema = 0`, `window = 1`.
    Create {
        /// The new block's metadata (its access fields are ignored when encoding).
        meta: BlockMeta,
    },
    /// A block's access statistics.
    Access {
        /// The block.
        key: BlockKey,
        /// Tick of the most recent access.
        last_access_at: u64,
        /// Accesses since creation.
        access_count: u32,
        /// EMA access rate.
        ema_access_rate: f32,
        /// 64-tick access bitset.
        access_window: u64,
    },
    /// A block moved to another tier.
    Migrate {
        /// The block.
        key: BlockKey,
        /// Tier it left.
        old_tier: Tier,
        /// Tier it entered.
        new_tier: Tier,
        /// Bit width in the new tier.
        new_bits: u8,
        /// Largest group scale in the new tier.
        new_scale: f32,
        /// CRC32C of the new payload.
        new_checksum: u32,
        /// Slot offset in the new tier's file.
        new_data_offset: u64,
        /// Payload length.
        new_data_len: u32,
        /// Tick of the migration (the block's new `tier_since`).
        at: u64,
    },
    /// A block was deleted.
    Delete {
        /// The block.
        key: BlockKey,
    },
}

/// The reserved key whose Delete record is a *commit mark*: every record before it is
/// durable together with its data (docs/formats/store.md, "Commit mark"). No block may
/// use it.
pub const COMMIT_MARK_KEY: BlockKey = BlockKey {
    tensor_id: u128::MAX,
    block_index: u32::MAX,
};

impl MetaRecord {
    /// A commit mark (a Delete of [`COMMIT_MARK_KEY`]). Tools that write a log directly
    /// end it with one, as `flush`, `close` and compaction do.
    #[must_use]
    pub fn commit_mark() -> Self {
        MetaRecord::Delete {
            key: COMMIT_MARK_KEY,
        }
    }

    /// Whether this is a commit mark.
    #[must_use]
    pub fn is_commit_mark(&self) -> bool {
        matches!(self, MetaRecord::Delete { key } if *key == COMMIT_MARK_KEY)
    }

    /// The block this record is about.
    #[must_use]
    pub fn key(&self) -> BlockKey {
        match self {
            MetaRecord::Create { meta } => meta.key,
            MetaRecord::Access { key, .. }
            | MetaRecord::Migrate { key, .. }
            | MetaRecord::Delete { key } => *key,
        }
    }
}

/// What replay found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Records handed to the visitor.
    pub applied: u64,
    /// Corrupt records skipped (offset, reason), in file order. Capped at 1024 entries;
    /// `skipped_total` has the full count.
    pub skipped: Vec<(u64, String)>,
    /// Number of corrupt records skipped.
    pub skipped_total: u64,
    /// Bytes cut from the end of the log (a torn tail, or everything after the stop
    /// point in [`RecoveryMode::PointInTime`]).
    pub truncated_bytes: u64,
    /// In point-in-time mode: the offset of the first corrupt record, where replay stopped.
    pub stopped_at: Option<u64>,
}

/// Append-only metadata log.
///
/// A log is created with the collection's geometry (its header) and opened later by
/// the implementation's own constructor, which returns the stored geometry.
pub trait MetaLog: Send {
    /// The collection geometry stored in the log header.
    fn collection(&self) -> CollectionConfig;

    /// Append records (in order). Either every record of the batch is appended or the
    /// call fails; a crash mid-batch leaves a prefix of whole records plus at most one
    /// torn record, which replay discards.
    ///
    /// # Errors
    /// [`crate::StoreErr::Io`] on write failure; the log is then unusable until reopened.
    fn append(&mut self, recs: &[MetaRecord]) -> Result<()>;

    /// Make every appended record durable (fsync for files; the persistence hook for
    /// memory logs).
    ///
    /// # Errors
    /// [`crate::StoreErr::Io`].
    fn sync(&mut self) -> Result<()>;

    /// Replay every valid record in order into `visit`, applying `mode` to corrupt
    /// records, and cut a torn tail (so the next append starts on a record boundary
    /// after the last good record). Called once, right after opening.
    ///
    /// # Errors
    /// [`crate::StoreErr::Io`]; an error returned by `visit` stops replay and is returned.
    fn replay(
        &mut self,
        mode: RecoveryMode,
        visit: &mut dyn FnMut(MetaRecord) -> Result<()>,
    ) -> Result<ReplayStats>;

    /// [`MetaLog::replay`], handing `visit` each record's byte offset in the log as well
    /// (so a record that replay cannot use is reported where it is). The default knows no
    /// offsets (`None`); the file and memory logs override it.
    ///
    /// # Errors
    /// As [`MetaLog::replay`].
    fn replay_at(
        &mut self,
        mode: RecoveryMode,
        visit: &mut dyn FnMut(Option<u64>, MetaRecord) -> Result<()>,
    ) -> Result<ReplayStats> {
        self.replay(mode, &mut |rec| visit(None, rec))
    }

    /// Replace the whole log by `snapshot` (the live index as Create + Access records),
    /// atomically: after a crash at any point the log holds either the old records or the
    /// snapshot, never a mix. Increments the header's generation.
    ///
    /// # Errors
    /// [`crate::StoreErr::Io`]; on error the old log is intact.
    fn compact(&mut self, snapshot: &mut dyn Iterator<Item = MetaRecord>) -> Result<()>;

    /// Number of records in the log (valid or not) after the header.
    fn record_count(&self) -> u64;
}
