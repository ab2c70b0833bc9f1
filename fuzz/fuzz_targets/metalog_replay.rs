//! Fuzz MetaLog replay: arbitrary bytes as a `meta.log` (a `MemMetaLog`, which holds the
//! file's exact bytes) replayed in both recovery modes must never panic, and the log
//! left behind must replay cleanly and accept appends.
//!
//! Every record comes with its byte offset (`replay_at`), where the record's bytes are.
//!
//! The first input byte selects fix-ups that get past the checksums, so the field checks
//! behind them are fuzzed too: bit 0 = replace the header with a valid one, bit 1 =
//! recompute every record's CRC32C.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_core::checksum::crc32c;
use tensorvault_store::meta_log::layout::{CRC_OFFSET, PAD_OFFSET, RECORD_LEN};
use tensorvault_store::meta_log::{decode_record, encode_header, encode_record};
use tensorvault_store::{
    BlockKey, CollectionConfig, MemMetaLog, MetaLog, MetaRecord, RecoveryMode,
};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if flags & 1 != 0 {
        let h = encode_header(&CollectionConfig::default(), 0);
        let n = bytes.len().min(RECORD_LEN);
        bytes[..n].copy_from_slice(&h[..n]);
        bytes.extend_from_slice(&h[n..]);
    }
    if flags & 2 != 0 && bytes.len() > RECORD_LEN {
        for rec in bytes[RECORD_LEN..].chunks_exact_mut(RECORD_LEN) {
            let crc = crc32c(&rec[..CRC_OFFSET]);
            rec[CRC_OFFSET..PAD_OFFSET].copy_from_slice(&crc.to_le_bytes());
        }
    }
    for mode in [
        RecoveryMode::SkipAnyCorruptedRecords,
        RecoveryMode::PointInTime,
    ] {
        let Ok(mut log) = MemMetaLog::from_bytes(bytes.clone()) else {
            return;
        };
        let mut got = Vec::new();
        let mut last_at = 0u64;
        let stats = log
            .replay_at(mode, &mut |at, r| {
                // Whatever decodes re-encodes to a record that decodes to itself.
                let again = decode_record(&encode_record(&r), 0).expect("re-decode");
                assert_eq!(encode_record(&again), encode_record(&r));
                // Each record comes with its own offset: a whole record past the header,
                // after the previous one, where these bytes decode to this record.
                let at = at.expect("the memory log reports offsets");
                assert!(at >= RECORD_LEN as u64 && at % RECORD_LEN as u64 == 0 && at > last_at);
                let at_us = at as usize;
                let raw: [u8; RECORD_LEN] = bytes[at_us..at_us + RECORD_LEN]
                    .try_into()
                    .expect("a whole record");
                let here = decode_record(&raw, at).expect("the record at its offset decodes");
                assert_eq!(encode_record(&here), encode_record(&r));
                last_at = at;
                got.push(r);
                Ok(())
            })
            .expect("replay of memory bytes cannot fail");
        assert_eq!(stats.applied, got.len() as u64);
        let whole = (bytes.len() - RECORD_LEN) / RECORD_LEN;
        assert!(stats.applied + stats.skipped_total <= whole as u64);
        assert_eq!(
            log.as_bytes().len() as u64 + stats.truncated_bytes,
            bytes.len() as u64
        );
        assert_eq!(log.as_bytes().len() % RECORD_LEN, 0);
        if mode == RecoveryMode::PointInTime {
            assert_eq!(stats.skipped_total, 0);
        }
        // After the cut: appends work and a second replay sees the same records plus it.
        let extra = MetaRecord::Delete {
            key: BlockKey::new(1, 2),
        };
        log.append(&[extra]).expect("append after replay");
        let mut again = MemMetaLog::from_bytes(log.to_bytes()).expect("header kept");
        let mut second = Vec::new();
        let s2 = again
            .replay(mode, &mut |r| {
                second.push(r);
                Ok(())
            })
            .expect("replay");
        assert_eq!(s2.truncated_bytes, 0);
        assert_eq!(s2.skipped_total, stats.skipped_total);
        got.push(extra);
        assert_eq!(second.len(), got.len());
        for (a, b) in second.iter().zip(&got) {
            assert_eq!(encode_record(a), encode_record(b));
        }
    }
});
