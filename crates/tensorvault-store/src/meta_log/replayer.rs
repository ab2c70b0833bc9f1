//! The replay state machine shared by [`super::FileMetaLog`] and [`super::MemMetaLog`]:
//! fed every whole record in file order (raw, or decoded on another thread), it applies
//! the recovery mode and says where the log must be cut.

use super::layout::RECORD_LEN;
use super::record::decode_record;
use super::{MetaRecord, ReplayStats};
use crate::config::RecoveryMode;
use crate::error::{Result, StoreErr};

/// Most skipped-record entries kept in [`ReplayStats::skipped`].
pub(crate) const MAX_SKIPPED_ENTRIES: usize = 1024;

/// An all-zero record (never valid: the CRC-32C of 120 zero bytes is not zero).
const ZERO_RECORD: [u8; RECORD_LEN] = [0; RECORD_LEN];

/// A record as replay sees it: decoded, or the reason it was refused.
pub(crate) type Decoded = std::result::Result<MetaRecord, String>;

/// Decode the record `rec` (RECORD_LEN bytes) found at byte `at`.
fn decode_one(rec: &[u8], at: u64) -> Decoded {
    // Callers pass exactly RECORD_LEN bytes; were it not so, the zero record stands in,
    // which fails its CRC like any damaged record.
    let b = <&[u8; RECORD_LEN]>::try_from(rec).unwrap_or(&ZERO_RECORD);
    decode_record(b, at).map_err(|e| match e {
        StoreErr::InvalidRecord { reason, .. } => reason,
        other => other.to_string(),
    })
}

/// Decode every whole record of `chunk` (which starts at byte `offset` of the log) into
/// `out` (cleared first); a trailing partial record is left out, as [`Replayer::feed`]
/// leaves it.
#[cfg(feature = "threads")]
pub(crate) fn decode_batch(chunk: &[u8], offset: u64, out: &mut Vec<Decoded>) {
    out.clear();
    out.reserve(chunk.len() / RECORD_LEN);
    let mut at = offset;
    for rec in chunk.chunks_exact(RECORD_LEN) {
        out.push(decode_one(rec, at));
        at += RECORD_LEN as u64;
    }
}

/// The replay state machine: fed every whole record in file order, it applies the
/// recovery mode and finally says where the log must be cut. The visitor gets each valid
/// record with its byte offset in the log.
pub(crate) struct Replayer {
    mode: RecoveryMode,
    stats: ReplayStats,
    /// End of the last valid record (the cut point if nothing valid follows).
    good_end: u64,
    /// Invalid records after the last valid one: skipped if a valid record follows,
    /// cut as a torn tail otherwise.
    pending: Vec<(u64, String)>,
    pending_total: u64,
    stopped: bool,
}

impl Replayer {
    pub(crate) fn new(mode: RecoveryMode) -> Self {
        Self {
            mode,
            stats: ReplayStats::default(),
            good_end: RECORD_LEN as u64,
            pending: Vec::new(),
            pending_total: 0,
            stopped: false,
        }
    }

    /// Whether replay stopped (point-in-time mode hit a corrupt record).
    pub(crate) fn stopped(&self) -> bool {
        self.stopped
    }

    /// Process every whole record of `chunk`, which starts at byte `offset` of the log.
    /// A trailing partial record is ignored (the final length passed to
    /// [`Replayer::finish`] accounts for it).
    pub(crate) fn feed(
        &mut self,
        chunk: &[u8],
        offset: u64,
        visit: &mut dyn FnMut(u64, MetaRecord) -> Result<()>,
    ) -> Result<()> {
        let mut at = offset;
        for rec in chunk.chunks_exact(RECORD_LEN) {
            if self.stopped {
                return Ok(());
            }
            self.step(at, decode_one(rec, at), visit)?;
            at += RECORD_LEN as u64;
        }
        Ok(())
    }

    /// [`Replayer::feed`] for records already decoded (by [`decode_batch`], on another
    /// thread): `recs` are the whole records of a chunk that starts at byte `offset`.
    #[cfg(feature = "threads")]
    pub(crate) fn feed_decoded(
        &mut self,
        recs: impl Iterator<Item = Decoded>,
        offset: u64,
        visit: &mut dyn FnMut(u64, MetaRecord) -> Result<()>,
    ) -> Result<()> {
        let mut at = offset;
        for rec in recs {
            if self.stopped {
                return Ok(());
            }
            self.step(at, rec, visit)?;
            at += RECORD_LEN as u64;
        }
        Ok(())
    }

    /// One record at byte `at`, decoded or refused with a reason.
    fn step(
        &mut self,
        at: u64,
        rec: Decoded,
        visit: &mut dyn FnMut(u64, MetaRecord) -> Result<()>,
    ) -> Result<()> {
        match rec {
            Ok(r) => {
                self.flush_pending();
                visit(at, r)?;
                self.stats.applied += 1;
                self.good_end = at + RECORD_LEN as u64;
            }
            Err(reason) => match self.mode {
                RecoveryMode::PointInTime => {
                    tracing::warn!(offset = at, %reason, "metalog: corrupt record, point-in-time replay stops here");
                    self.stats.stopped_at = Some(at);
                    self.stopped = true;
                }
                RecoveryMode::SkipAnyCorruptedRecords => {
                    if self.stats.skipped.len() + self.pending.len() < MAX_SKIPPED_ENTRIES {
                        self.pending.push((at, reason));
                    }
                    self.pending_total += 1;
                }
            },
        }
        Ok(())
    }

    /// `count` records starting at `offset` are all zero bytes (a hole in a sparse file):
    /// each is invalid (its CRC field is zero, the CRC-32C of 120 zero bytes is not), so
    /// they count as `count` corrupt records, without decoding them one by one. This keeps
    /// replay work proportional to the bytes a file really holds: a 64 GiB sparse
    /// `meta.log` replays in milliseconds.
    pub(crate) fn feed_zeros(&mut self, count: u64, offset: u64) {
        if count == 0 || self.stopped {
            return;
        }
        let reason = "all-zero record (a hole in the file)".to_owned();
        match self.mode {
            RecoveryMode::PointInTime => {
                tracing::warn!(offset, %reason, "metalog: corrupt record, point-in-time replay stops here");
                self.stats.stopped_at = Some(offset);
                self.stopped = true;
            }
            RecoveryMode::SkipAnyCorruptedRecords => {
                if self.stats.skipped.len() + self.pending.len() < MAX_SKIPPED_ENTRIES {
                    self.pending.push((offset, reason));
                }
                self.pending_total += count;
            }
        }
    }

    /// A valid record follows the pending invalid ones: they were corrupt records in the
    /// middle of the log, skipped.
    fn flush_pending(&mut self) {
        if self.pending_total == 0 {
            return;
        }
        for (offset, reason) in self.pending.drain(..) {
            tracing::warn!(offset, %reason, "metalog: skipping corrupt record");
            self.stats.skipped.push((offset, reason));
        }
        self.stats.skipped_total += self.pending_total;
        self.pending_total = 0;
    }

    /// The stats and the length the log must be cut to, given its length `len`.
    pub(crate) fn finish(mut self, len: u64) -> (ReplayStats, u64) {
        let cut = self.good_end.min(len);
        self.stats.truncated_bytes = len - cut;
        if self.stats.skipped_total > MAX_SKIPPED_ENTRIES as u64 {
            tracing::warn!(
                total = self.stats.skipped_total,
                "metalog: corrupt records skipped in total"
            );
        }
        if self.stats.truncated_bytes > 0 {
            tracing::warn!(
                offset = cut,
                bytes = self.stats.truncated_bytes,
                invalid_records = self.pending_total,
                "metalog: cutting the log after the last good record"
            );
        }
        (self.stats, cut)
    }
}
