//! A write that fails part-way stops the writer with a typed error
//! (`StoreErr::WriterFailed`, not a generic invalid argument): later writes are refused
//! with it until the store is reopened; reads keep working.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tensorvault_store::meta_log::{MetaRecord, ReplayStats};
use tensorvault_store::{
    BufferBlockIO, Catalog, CollectionConfig, DType, ManualClock, MemMetaLog, MetaLog,
    RecoveryMode, StoreConfig, StoreErr, TensorStore, Tier,
};

/// A MemMetaLog whose appends fail while `fail` is set.
struct FlakyLog {
    inner: MemMetaLog,
    fail: Arc<AtomicBool>,
}

impl MetaLog for FlakyLog {
    fn collection(&self) -> CollectionConfig {
        self.inner.collection()
    }
    fn append(&mut self, recs: &[MetaRecord]) -> tensorvault_store::Result<()> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(StoreErr::io(
                "append",
                "meta.log",
                std::io::Error::other("injected: device full"),
            ));
        }
        self.inner.append(recs)
    }
    fn sync(&mut self) -> tensorvault_store::Result<()> {
        self.inner.sync()
    }
    fn replay(
        &mut self,
        mode: RecoveryMode,
        visit: &mut dyn FnMut(MetaRecord) -> tensorvault_store::Result<()>,
    ) -> tensorvault_store::Result<ReplayStats> {
        self.inner.replay(mode, visit)
    }
    fn compact(
        &mut self,
        snapshot: &mut dyn Iterator<Item = MetaRecord>,
    ) -> tensorvault_store::Result<()> {
        self.inner.compact(snapshot)
    }
    fn record_count(&self) -> u64 {
        self.inner.record_count()
    }
}

#[test]
fn a_failed_append_stops_the_writer_with_a_typed_error() {
    let geo = CollectionConfig::default();
    let fail = Arc::new(AtomicBool::new(false));
    let log = FlakyLog {
        inner: MemMetaLog::new(geo),
        fail: fail.clone(),
    };
    let s = TensorStore::open(
        "t",
        "c",
        ManualClock::new(1),
        BufferBlockIO::new(&geo),
        log,
        Catalog::in_memory(),
        StoreConfig::default(),
    )
    .unwrap();
    let data: Vec<u8> = (0..64u32).flat_map(|v| (v as f32).to_le_bytes()).collect();
    s.put_tensor("a", DType::F32, &[64], &data, Tier::Tier0)
        .unwrap();
    fail.store(true, Ordering::SeqCst);
    let e = s
        .put_tensor("b", DType::F32, &[64], &data, Tier::Tier1)
        .unwrap_err();
    assert!(matches!(e, StoreErr::Io { op: "append", .. }), "{e:?}");
    // Healed device or not: the writer stays stopped until a reopen.
    fail.store(false, Ordering::SeqCst);
    match s.put_tensor("c", DType::F32, &[64], &data, Tier::Tier0) {
        Err(StoreErr::WriterFailed { cause }) => assert!(cause.contains("device full"), "{cause}"),
        other => panic!("expected WriterFailed, got {other:?}"),
    }
    assert!(!StoreErr::WriterFailed {
        cause: String::new()
    }
    .is_corruption());
    // Reads of acknowledged data still work.
    assert_eq!(s.get_tensor("a").unwrap().data, data);
    assert!(s.get_tensor("b").is_err());
}
