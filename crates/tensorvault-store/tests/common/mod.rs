//! Helpers shared by the reliability suites (`crash.rs`, `corruption.rs`): a seeded
//! PRNG, deterministic block contents, the long-mode switch and an in-memory oracle that
//! says what a block reads back as after being stored in a given tier.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use tensorvault_store::{
    BlockInfo, BlockKey, BufferBlockIO, Catalog, CollectionConfig, DType, ManualClock, MemMetaLog,
    StoreConfig, TensorStore, Tier,
};

/// Elements per block in both suites: small blocks keep every run fast.
pub const BLOCK_ELEMS: u32 = 256;

/// Whether the long mode is on (`TV_STORE_LONG=1`).
#[must_use]
pub fn long_mode() -> bool {
    std::env::var("TV_STORE_LONG").is_ok_and(|v| v == "1")
}

/// `TV_STORE_SEED` (decimal or `0x` hex) if set, else `default`.
#[must_use]
pub fn seed_or(default: u64) -> u64 {
    match std::env::var("TV_STORE_SEED") {
        Ok(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => s.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("TV_STORE_SEED={s:?} is not a u64"))
        }
        Err(_) => default,
    }
}

/// SplitMix64 finalizer: a good 64-bit mix of `x`.
#[must_use]
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A small seeded PRNG (SplitMix64); every random choice of the suites goes through it.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `pct` percent.
    pub fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    /// A random tier.
    pub fn tier(&mut self) -> Tier {
        Tier::ALL[self.below(4) as usize]
    }

    /// A random tier other than `not`.
    pub fn other_tier(&mut self, not: Tier) -> Tier {
        let i = (not.index() + 1 + self.below(3) as usize) % 4;
        Tier::ALL[i]
    }
}

/// `n` finite f32 values in [-4, 4) derived from `seed`, as little-endian bytes.
#[must_use]
pub fn block_data(seed: u64, n: usize) -> Vec<u8> {
    let mut r = Rng::new(seed);
    (0..n)
        .flat_map(|_| {
            let unit = (r.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
            (unit * 8.0 - 4.0).to_le_bytes()
        })
        .collect()
}

thread_local! {
    /// Whether collections this thread creates use extent allocation (with entropy
    /// coding, so quantized payloads vary in length): set by [`with_extents`], or in a
    /// crash-suite child by `TV_STORE_EXTENTS=1`.
    static EXTENTS: std::cell::Cell<bool> =
        std::cell::Cell::new(std::env::var("TV_STORE_EXTENTS").is_ok_and(|v| v == "1"));
}

/// Run `f` with [`store_config`] creating extent-allocated, entropy-coded collections.
pub fn with_extents<R>(f: impl FnOnce() -> R) -> R {
    let before = EXTENTS.with(|e| e.replace(true));
    let out = f();
    EXTENTS.with(|e| e.set(before));
    out
}

/// Whether [`store_config`] creates extent-allocated collections on this thread.
#[must_use]
pub fn extents_on() -> bool {
    EXTENTS.with(std::cell::Cell::get)
}

/// Runtime options of both suites: small blocks, fsync on every write (extent
/// allocation and entropy coding inside [`with_extents`]).
#[must_use]
pub fn store_config() -> StoreConfig {
    let extents = extents_on();
    StoreConfig {
        collection: CollectionConfig {
            extents,
            entropy: extents,
            ..CollectionConfig::with_block_elems(BLOCK_ELEMS)
        },
        access_flush_every: 4,
        // Tests that keep a writer out should not wait the default 10 s for it.
        lock_wait: std::time::Duration::from_millis(200),
        ..StoreConfig::default()
    }
}

type MemStore = TensorStore<ManualClock, BufferBlockIO, MemMetaLog>;

/// An in-memory store with the suites' geometry: what a block stored in a tier reads
/// back as (bit-exact for Tier0, the codec's decode of its encode otherwise).
pub struct Oracle {
    store: MemStore,
    next: u32,
}

impl Default for Oracle {
    fn default() -> Self {
        Self::new()
    }
}

impl Oracle {
    /// A fresh oracle.
    #[must_use]
    pub fn new() -> Self {
        let cfg = StoreConfig {
            access_flush_every: 0,
            ..store_config()
        };
        let geo = cfg.collection;
        let store = TensorStore::open(
            "oracle",
            "c",
            ManualClock::new(1),
            BufferBlockIO::new(&geo),
            MemMetaLog::new(geo),
            Catalog::in_memory(),
            cfg,
        )
        .expect("open the in-memory oracle store");
        Self { store, next: 0 }
    }

    /// The bytes `get_block` returns for f32 `data` stored in `tier`.
    pub fn roundtrip(&mut self, tier: Tier, data: &[u8]) -> Vec<u8> {
        self.next = self.next.wrapping_add(1);
        let key = BlockKey::new(1, self.next % 64);
        let n = (data.len() / 4) as u32;
        self.store
            .put_block(key, tier, &BlockInfo::new(DType::F32, &[n]), data)
            .expect("oracle put");
        let mut out = Vec::new();
        self.store.get_block(&key, &mut out).expect("oracle get");
        out
    }
}

/// A fresh, empty scratch directory in the system temp dir (removed on drop).
#[must_use]
pub fn scratch_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("tv-{tag}-"))
        .tempdir()
        .expect("create a temp dir")
}

/// `<root>/<tenant>/<collection>`.
#[must_use]
pub fn coll_dir(root: &Path, tenant: &str, collection: &str) -> PathBuf {
    root.join(tenant).join(collection)
}
