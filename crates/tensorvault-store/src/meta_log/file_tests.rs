//! Tests of `FileMetaLog` replay over logs of several chunks.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::super::file_replay::CHUNK;
use super::*;
use crate::types::BlockKey;

fn access(i: u64) -> MetaRecord {
    MetaRecord::Access {
        key: BlockKey::new(u128::from(i) + 1, 0),
        last_access_at: i,
        access_count: 1,
        ema_access_rate: 0.5,
        access_window: 1,
    }
}

/// A log spanning several replay chunks (and so several batches of the reader thread)
/// with one damaged record in the second chunk.
fn damaged_log(dir: &Path, n: u64, bad: u64) -> PathBuf {
    let path = dir.join("meta.log");
    let mut log = FileMetaLog::create(&path, &CollectionConfig::default()).unwrap();
    let recs: Vec<MetaRecord> = (0..n).map(access).collect();
    log.append(&recs).unwrap();
    log.sync().unwrap();
    drop(log);
    let mut f = OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start((bad + 1) * RECORD_LEN as u64 + 30))
        .unwrap();
    std::io::Write::write_all(&mut f, &[0xAB]).unwrap();
    path
}

fn replay_all(path: &Path, mode: RecoveryMode) -> (ReplayStats, Vec<u64>) {
    let mut log = FileMetaLog::open(path).unwrap();
    let mut seen = Vec::new();
    let stats = log
        .replay(mode, &mut |r| {
            if let MetaRecord::Access { last_access_at, .. } = r {
                seen.push(last_access_at);
            }
            Ok(())
        })
        .unwrap();
    (stats, seen)
}

#[test]
fn replay_across_chunks_keeps_order_skips_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let per_chunk = (CHUNK / RECORD_LEN) as u64;
    let (n, bad) = (3 * per_chunk + 17, per_chunk + 5);
    let path = damaged_log(dir.path(), n, bad);

    let (stats, seen) = replay_all(&path, RecoveryMode::SkipAnyCorruptedRecords);
    let want: Vec<u64> = (0..n).filter(|&i| i != bad).collect();
    assert_eq!(seen, want);
    assert_eq!(stats.skipped_total, 1);
    assert_eq!(stats.skipped[0].0, (bad + 1) * RECORD_LEN as u64);
    assert_eq!(stats.truncated_bytes, 0);

    let (stats, seen) = replay_all(&path, RecoveryMode::PointInTime);
    assert_eq!(seen, (0..bad).collect::<Vec<_>>());
    assert_eq!(stats.stopped_at, Some((bad + 1) * RECORD_LEN as u64));
    assert_eq!(stats.applied, bad);
    assert_eq!(stats.truncated_bytes, (n - bad) * RECORD_LEN as u64);
}

#[test]
fn replay_error_from_the_visitor_stops_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let n = 4 * (CHUNK / RECORD_LEN) as u64;
    let path = damaged_log(dir.path(), n, n - 1);
    let mut log = FileMetaLog::open(&path).unwrap();
    let mut calls = 0u64;
    let err = log
        .replay(RecoveryMode::SkipAnyCorruptedRecords, &mut |_| {
            calls += 1;
            if calls == 10 {
                return Err(StoreErr::InvalidArgument {
                    field: "visit",
                    reason: "stop".into(),
                });
            }
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(
        err,
        StoreErr::InvalidArgument { field: "visit", .. }
    ));
    assert_eq!(calls, 10);
}
