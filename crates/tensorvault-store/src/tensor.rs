//! What the whole-tensor, verification and statistics calls of [`crate::TensorStore`]
//! return (the calls themselves live in `store/tensor.rs` and `store/report.rs`).

use crate::block_io::TierUsage;
use crate::types::{BlockKey, DType, Tier};

/// Summary of one stored tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Logical name (`None` if the catalog lost it).
    pub name: Option<String>,
    /// The tensor id.
    pub tensor_id: u128,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<u32>,
    /// Blocks present.
    pub blocks: u64,
    /// Blocks the shape needs.
    pub expected_blocks: u64,
    /// Blocks per tier.
    pub tier_blocks: [u64; 4],
    /// Payload bytes stored (sum of block payloads, and of a centred tensor's side
    /// record: its mean row).
    pub stored_bytes: u64,
    /// Raw bytes (elements x dtype size).
    pub raw_bytes: u64,
}

/// A tensor read back.
#[derive(Clone, Debug)]
pub struct StoredTensor {
    /// What it is.
    pub info: TensorInfo,
    /// Little-endian elements of `info.dtype`, row-major.
    pub data: Vec<u8>,
}

/// One problem found by [`TensorStore::verify`].
#[derive(Clone, Debug)]
pub struct BlockProblem {
    /// The block.
    pub key: BlockKey,
    /// Its tensor's name, if known.
    pub tensor: Option<String>,
    /// Its tier.
    pub tier: Tier,
    /// Slot offset in the tier file.
    pub offset: u64,
    /// The error.
    pub error: String,
}

/// A metalog record with a valid CRC that replay could not use (issue 25): its Create
/// names an impossible slot or shape, or it touches a block that is not live. A valid
/// checksum proves the record undamaged, not sensible, so each is a defect `verify`
/// reports rather than a silent absence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayDefect {
    /// Byte offset of the record in the log (`None` for a log backend that does not
    /// report offsets).
    pub log_offset: Option<u64>,
    /// The record's kind: `create`, `access`, `migrate` or `delete`.
    pub record: &'static str,
    /// The block it names.
    pub key: BlockKey,
    /// Why replay did not apply it.
    pub reason: String,
}

/// Result of a full scan.
#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    /// Blocks scanned.
    pub checked: u64,
    /// Payload bytes scanned.
    pub bytes: u64,
    /// Every corrupt block.
    pub problems: Vec<BlockProblem>,
    /// `names.log` records skipped as corrupt when the store was opened (their tensors
    /// are listed without a name).
    pub catalog_skipped: u64,
    /// Valid metalog records replay could not use when the store was opened, in log
    /// order (the first [`MAX_DEFECT_ENTRIES`]; `replay_defects_total` has the count).
    pub replay_defects: Vec<ReplayDefect>,
    /// Number of such records.
    pub replay_defects_total: u64,
}

/// Most [`ReplayDefect`] entries kept (a forged log may hold millions).
pub const MAX_DEFECT_ENTRIES: usize = 1024;

impl VerifyReport {
    /// Number of defects: corrupt or lost blocks plus unusable log records.
    #[must_use]
    pub fn defects(&self) -> u64 {
        self.problems.len() as u64 + self.replay_defects_total
    }
}

/// Store-wide numbers.
#[derive(Clone, Debug, Default)]
pub struct StoreStats {
    /// Tensors with at least one block.
    pub tensors: u64,
    /// Live blocks per tier.
    pub blocks: [u64; 4],
    /// Payload bytes per tier.
    pub payload_bytes: [u64; 4],
    /// Raw (decoded) bytes per tier.
    pub raw_bytes: [u64; 4],
    /// Tier file occupancy.
    pub usage: [TierUsage; 4],
    /// Records in the MetaLog.
    pub log_records: u64,
    /// Reads since open.
    pub reads: u64,
    /// Block writes since open.
    pub writes: u64,
    /// Migrations since open.
    pub migrations: u64,
    /// Deletions since open.
    pub deletes: u64,
    /// Checksum failures seen since open.
    pub checksum_failures: u64,
    /// Replay time on open, nanoseconds.
    pub replay_nanos: u64,
    /// Corrupt records skipped by replay.
    pub replay_skipped: u64,
    /// Valid records replay ignored (stale or pointing at impossible slots).
    pub replay_ignored: u64,
    /// Error per tier: the median over its blocks of each block's largest quantization
    /// step (its largest group scale; 0 for Tier0, which is exact). A value inside its
    /// group's range decodes within half a step; the step is in the tensor's own units.
    pub step_median: [f32; 4],
    /// Blocks held in their tier because a colder tier cannot encode their values
    /// (NaN or infinity; `crate::finite`), as found by migrations since open.
    pub held_blocks: u64,
}

/// Most bytes [`TensorStore::get_tensor`] reserves before reading; past it the output
/// grows as blocks are read and verified.
pub(crate) const MAX_UPFRONT_BYTES: usize = 256 << 20;

pub(crate) fn numel(shape: &[u32]) -> Option<u64> {
    shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::from(d)))
}
