//! `KvCache::read` of 1536 cached keys of one 64-wide head (the whole range attention reads
//! at a decode step) from an in-memory store, blocks raw (Tier0 f16): keys stored before
//! RoPE (rotated at read for their positions) against keys stored after it (no rotation),
//! and `RopeSpec::apply` alone on the same rows (the angles computed per call).
//!
//! `cargo bench -p tensorvault-store --bench kv_read`

// criterion_group! generates an undocumented `pub fn benches`.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use half::f16;
use tensorvault_store::kv::{RopePairing, RopeSpec};
use tensorvault_store::{
    BufferBlockIO, Catalog, CollectionConfig, Durability, KvCache, KvKind, KvSlot, ManualClock,
    MemMetaLog, StoreConfig, TensorStore,
};

const HD: u32 = 64;
const TOKENS: u64 = 1536;

type Cache = KvCache<Arc<ManualClock>, BufferBlockIO, MemMetaLog>;

fn cache(rope: Option<RopeSpec>) -> Cache {
    let geo = CollectionConfig {
        rope,
        ..CollectionConfig::kv_cache(HD).unwrap()
    };
    let cfg = StoreConfig {
        collection: geo,
        durability: Durability::Os,
        ..StoreConfig::default()
    };
    let store = TensorStore::open(
        "t",
        "c",
        Arc::new(ManualClock::new(1)),
        BufferBlockIO::new(&geo),
        MemMetaLog::new(geo),
        Catalog::in_memory(),
        cfg,
    )
    .unwrap();
    let c = KvCache::open(store, HD, rope).unwrap();
    let vals: Vec<f16> = (0..TOKENS * u64::from(HD))
        .map(|i| f16::from_f32(((i * 7919 % 113) as f32 - 56.0) * 0.01))
        .collect();
    c.append(KvSlot::new(0, 0, KvKind::Key), &vals).unwrap();
    c
}

fn bench_read(c: &mut Criterion) {
    let spec = RopeSpec::new(1e5, 64, RopePairing::Interleaved).unwrap();
    let mut g = c.benchmark_group("kv_read/1536_keys");
    g.throughput(Throughput::Bytes(TOKENS * u64::from(HD) * 2));
    let slot = KvSlot::new(0, 0, KvKind::Key);
    for (name, rope) in [("pre_rope", Some(spec)), ("post_rope", None)] {
        let kv = cache(rope);
        let mut out = Vec::new();
        g.bench_function(name, |b| {
            b.iter(|| {
                kv.read_into(slot, 0..TOKENS, &mut out).unwrap();
                black_box(out.len())
            })
        });
    }
    let mut rows = vec![0.5f32; (TOKENS * u64::from(HD)) as usize];
    g.bench_function("rope_spec_apply", |b| {
        b.iter(|| {
            spec.apply(black_box(&mut rows), HD as usize, 0).unwrap();
        })
    });
    g.finish();
}

criterion_group!(benches, bench_read);
criterion_main!(benches);
