//! Roll back a commit whose log records reached the disk before its data did.
//!
//! Under `Durability::EveryWrite` a commit writes its data slots and appends its log
//! records, then waits for the data files' and the log's fdatasync *together* (one wait
//! instead of two in a row; see `write.rs`). A power cut during that wait can leave the
//! records durable and the data not. Only the last commit in the log can be in that
//! state: the next commit appends its records after both syncs of the previous one
//! completed. A flush, a close and a compaction end the log with a *commit mark* (a
//! Delete record of the reserved key [`COMMIT_MARK`], which older builds ignore as the
//! delete of an unknown block): everything before a mark is confirmed.
//!
//! So at open, if records follow the last mark, the blocks created or moved by the final
//! run of records with the same commit tick (at most [`TAIL_RECORDS`]) are checked
//! against the payload CRC their records carry; a block whose slot does not hold its
//! payload belongs to a commit that was never acknowledged, and the index goes back to
//! what the block was before that record (its old slot is intact: a slot is freed only
//! once the record freeing it is durable). Such a rollback is counted as an ignored
//! record. The price: after a crash (never after a clean close), a block of that final
//! run whose bytes rotted would be rolled back to its previous version instead of being
//! reported corrupt.
//!
//! Blocks with a reconstruction policy are rolled back too: their lineage entry is
//! appended only after their commit returned, so an unfinished one has none to heal from
//! (the power-cut suite found a `Delta` tensor's unfinished blocks reported as lost when
//! they were left to the lineage).

use tensorvault_core::checksum::crc32c;

use crate::block_io::BlockIO;
use crate::index::{BlockIndex, IndexBuilder};
use crate::meta_log::MetaRecord;
use crate::types::{BlockKey, BlockMeta, Tier};

/// Records at the end of the log whose data is checked at open: the most one commit
/// appends (a batch of 512 blocks of `put_tensor` or `migrate_blocks`).
pub(super) const TAIL_RECORDS: u64 = 512;

pub(crate) use crate::meta_log::COMMIT_MARK_KEY as COMMIT_MARK;

/// The commit mark record.
pub(crate) fn commit_mark() -> MetaRecord {
    MetaRecord::commit_mark()
}

/// One Create or Migrate of the log's tail and what its block was before it.
struct Undo {
    key: BlockKey,
    tier: Tier,
    offset: u64,
    /// The record's commit tick (`created_at` / `at`).
    tick: u64,
    before: Option<BlockMeta>,
}

/// Collects undo information for the records of the log's tail during replay.
pub(super) struct TailUndo {
    first: u64,
    seen: u64,
    undo: Vec<Undo>,
    marks: u64,
}

impl TailUndo {
    /// For a log of `records` records (as its length says).
    pub(super) fn new(records: u64) -> Self {
        Self {
            first: records.saturating_sub(TAIL_RECORDS),
            seen: 0,
            undo: Vec::new(),
            marks: 0,
        }
    }

    /// Whether replay saw a commit mark.
    pub(super) fn saw_mark(&self) -> bool {
        self.marks > 0
    }

    /// Called with each record instead of applying it if it is a commit mark; returns
    /// whether it was one.
    pub(super) fn take_mark(&mut self, rec: &MetaRecord) -> bool {
        if !rec.is_commit_mark() {
            return false;
        }
        self.seen += 1;
        self.marks += 1;
        self.undo.clear();
        true
    }

    /// Called with each record before it is applied to `index`.
    pub(super) fn before_apply(&mut self, rec: &MetaRecord, index: &mut IndexBuilder) {
        let n = self.seen;
        self.seen += 1;
        if n < self.first {
            return;
        }
        let (key, tier, offset, tick) = match *rec {
            MetaRecord::Create { meta } => (meta.key, meta.tier, meta.data_offset, meta.created_at),
            MetaRecord::Migrate {
                key,
                new_tier,
                new_data_offset,
                at,
                ..
            } => (key, new_tier, new_data_offset, at),
            MetaRecord::Access { .. } | MetaRecord::Delete { .. } => return,
        };
        self.undo.push(Undo {
            key,
            tier,
            offset,
            tick,
            before: index.get(&key),
        });
        // Sparse or damaged logs can hold more records than their length suggests.
        if self.undo.len() as u64 > TAIL_RECORDS {
            self.undo.remove(0);
        }
    }

    /// After replay: roll back, newest first, every record of the final same-tick run
    /// after the last mark whose block does not hold its payload. Returns the keys rolled
    /// back.
    pub(super) fn roll_back(self, index: &mut BlockIndex, io: &dyn BlockIO) -> Vec<BlockKey> {
        let mut rolled = Vec::new();
        let last_tick = self.undo.last().map(|u| u.tick);
        for u in self.undo.into_iter().rev() {
            if Some(u.tick) != last_tick {
                break;
            }
            let Some(cur) = index.get(&u.key) else {
                continue;
            };
            if cur.tier != u.tier || cur.data_offset != u.offset || holds_payload(io, &cur) {
                continue;
            }
            tracing::warn!(key = %u.key, tier = %u.tier, offset = u.offset,
                "the last commit's data never reached the disk: rolled back");
            match u.before {
                Some(m) => {
                    index.upsert(m);
                }
                None => {
                    index.remove(&u.key);
                }
            }
            rolled.push(u.key);
        }
        rolled
    }
}

/// Whether the slot of `m` holds bytes whose CRC32C is the record's (a slot beyond the
/// tier's end does not).
fn holds_payload(io: &dyn BlockIO, m: &BlockMeta) -> bool {
    let mut ok = false;
    let read = io.with_block(m.tier, m.key, m.data_offset, m.data_len, &mut |b| {
        ok = crc32c(b) == m.checksum;
    });
    read.is_ok() && ok
}
