//! [`PrefixCache`]: open, store, lookup, load, stats, maintain, close over a directory
//! store. See the module docs of `prefix`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use super::chain::{chunk_ids, chunk_name, parse_chunk_name};
use super::evict::{plan_eviction, AgeTiers, ChunkUse};
use super::kv_io::{block_bytes, KvData, KvShape, LoadedKv};
use super::manifest::{ModelManifest, MANIFEST_FILE, MAX_MODEL_LEN, MODEL_OFFSET};
use super::{collection_name, TENANT};
use crate::clock::{Clock, SystemClock};
use crate::config::{CollectionConfig, Durability, StoreConfig};
use crate::error::{Result, StoreErr};
use crate::fs::{collection_dir, DirStore};
use crate::store::BlockInfo;
use crate::types::{BlockKey, BlockMeta, DType, TensorKind, Tier};

mod verify;

pub use verify::PrefixVerifyReport;

/// Options of a prefix cache.
#[derive(Clone, Debug)]
pub struct PrefixConfig {
    /// Tokens per chunk (fixed when the model's collection is created).
    pub chunk_tokens: u32,
    /// Tiers by idle time, applied by [`PrefixCache::maintain`].
    pub age_tiers: AgeTiers,
    /// Most payload bytes the model's chunks may take (`None`: unlimited).
    pub budget_bytes: Option<u64>,
    /// Share the collection with other readers; every write fails with
    /// [`StoreErr::ReadOnly`].
    pub read_only: bool,
    /// The tier new chunks are written to (Tier0: raw f16, bit-exact).
    pub store_tier: Tier,
    /// The store's options (durability, lock wait); its `collection` is replaced by the
    /// KV layout of the model.
    pub store: StoreConfig,
}

impl Default for PrefixConfig {
    fn default() -> Self {
        Self {
            chunk_tokens: 256,
            age_tiers: AgeTiers::default(),
            budget_bytes: None,
            read_only: false,
            store_tier: Tier::Tier0,
            store: StoreConfig::default(),
        }
    }
}

/// Counts and sizes of one model's cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrefixStats {
    /// Complete chunks stored.
    pub chunks: u64,
    /// Tokens they hold.
    pub tokens: u64,
    /// Payload bytes of their blocks.
    pub stored_bytes: u64,
    /// What the same KV takes as f16.
    pub f16_bytes: u64,
    /// Chunks per tier (by their first block's tier).
    pub tier_chunks: [u64; 4],
    /// Payload bytes per tier.
    pub tier_bytes: [u64; 4],
    /// `lookup` and `load` calls since open.
    pub lookups: u64,
    /// Full chunks found by them.
    pub hit_chunks: u64,
    /// Full chunks of their tokens not found.
    pub miss_chunks: u64,
    /// Chunks whose blocks failed their checksum or decode on load (each a miss).
    pub damaged_chunks: u64,
    /// Chunks written since open.
    pub stored_chunks: u64,
    /// Chunks evicted since open (budget or damage).
    pub evicted_chunks: u64,
}

/// What [`PrefixCache::maintain`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrefixMaintainReport {
    /// Chunks moved into tiers 0..=3.
    pub demoted: [u64; 4],
    /// Chunks evicted for the budget.
    pub evicted: u64,
}

#[derive(Clone, Copy, Debug)]
struct Chunk {
    parent: u128,
    tensor_id: u128,
}

#[derive(Default)]
struct Counters {
    lookups: AtomicU64,
    hit_chunks: AtomicU64,
    miss_chunks: AtomicU64,
    damaged: AtomicU64,
    stored: AtomicU64,
    evicted: AtomicU64,
}

/// A KV prefix cache for one model over a directory store. See the module docs.
pub struct PrefixCache<C: Clock = SystemClock> {
    store: DirStore<C>,
    manifest: ModelManifest,
    shape: KvShape,
    cfg: PrefixConfig,
    chunks: RwLock<HashMap<u128, Chunk>>,
    /// Serializes `store`, eviction and `maintain` within the process.
    write: Mutex<()>,
    counters: Counters,
}

fn poisoned<T>(_: T) -> StoreErr {
    StoreErr::Poisoned {
        lock: "prefix cache",
    }
}

fn mismatch(field: &'static str, stored: impl ToString, given: impl ToString) -> StoreErr {
    StoreErr::ModelMismatch {
        field,
        stored: stored.to_string(),
        given: given.to_string(),
    }
}

impl PrefixCache<SystemClock> {
    /// Open (or create, unless read-only) the cache of `model` under `root`.
    ///
    /// # Errors
    /// As [`PrefixCache::open_with_clock`].
    pub fn open(
        root: &Path,
        model: &str,
        layers: u32,
        kv_heads: u32,
        head_dim: u32,
        cfg: PrefixConfig,
    ) -> Result<Self> {
        Self::open_with_clock(
            root,
            model,
            layers,
            kv_heads,
            head_dim,
            cfg,
            SystemClock::new(),
        )
    }
}

impl<C: Clock> PrefixCache<C> {
    /// Open (or create, unless `cfg.read_only`) the cache of `model` (an identity string:
    /// two models never share chunks) with `layers` layers of `kv_heads` KV heads of
    /// `head_dim` values, timestamps from `clock`. A writable open deletes the blocks of
    /// chunks a killed process left incomplete.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] for an empty or over-long model identity, a zero or
    /// too large geometry; [`StoreErr::ModelMismatch`] if the model's stored geometry,
    /// chunk size or identity differs; [`StoreErr::BadHeader`] for a damaged
    /// `prefix.model`; [`StoreErr::Locked`] if another process writes the model's
    /// collection; the store's open errors (a missing collection when read-only is
    /// [`StoreErr::CollectionNotFound`]).
    pub fn open_with_clock(
        root: &Path,
        model: &str,
        layers: u32,
        kv_heads: u32,
        head_dim: u32,
        cfg: PrefixConfig,
        clock: C,
    ) -> Result<Self> {
        let manifest = ModelManifest {
            model: model.to_owned(),
            layers,
            kv_heads,
            head_dim,
            chunk_tokens: cfg.chunk_tokens,
        };
        let wanted = manifest.encode()?; // checks the model identity
        for (field, v) in [
            ("layers", layers),
            ("kv_heads", kv_heads),
            ("head_dim", head_dim),
            ("chunk_tokens", cfg.chunk_tokens),
        ] {
            if v == 0 {
                return Err(StoreErr::InvalidArgument {
                    field,
                    reason: "must not be 0".into(),
                });
            }
        }
        if u64::from(layers) * u64::from(kv_heads) * 2 > u64::from(u32::MAX) {
            return Err(StoreErr::InvalidArgument {
                field: "layers",
                reason: format!("{layers} x {kv_heads} heads x 2 exceeds 2^32 blocks per chunk"),
            });
        }
        let mut scfg = cfg.store.clone();
        scfg.collection = CollectionConfig::kv_cache_tokens(head_dim, cfg.chunk_tokens)?;
        let coll = collection_name(model);
        let store = if cfg.read_only {
            DirStore::open_dir_shared(root, TENANT, &coll, clock, scfg)?
        } else {
            DirStore::open_dir(root, TENANT, &coll, clock, scfg, true)?
        };
        let dir = collection_dir(root, TENANT, &coll)?;
        let path = dir.join(MANIFEST_FILE);
        match read_manifest(&path)? {
            Some(stored) => {
                if stored.model != manifest.model {
                    return Err(mismatch("model", &stored.model, model));
                }
                for (field, s, g) in [
                    ("layers", stored.layers, layers),
                    ("kv_heads", stored.kv_heads, kv_heads),
                    ("head_dim", stored.head_dim, head_dim),
                    ("chunk_tokens", stored.chunk_tokens, cfg.chunk_tokens),
                ] {
                    if s != g {
                        return Err(mismatch(field, s, g));
                    }
                }
            }
            None if cfg.read_only => {
                return Err(StoreErr::io(
                    "open",
                    &path,
                    std::io::Error::new(std::io::ErrorKind::NotFound, "no prefix-cache manifest"),
                ))
            }
            None => tensorvault_core::atomic::write_atomic(&path, &wanted)
                .map_err(|e| StoreErr::io("write", &path, std::io::Error::other(e)))?,
        }
        let block_elems = store.geometry().block_elems;
        if u64::from(block_elems) != u64::from(cfg.chunk_tokens) * u64::from(head_dim) {
            return Err(mismatch(
                "block_elems",
                block_elems,
                u64::from(cfg.chunk_tokens) * u64::from(head_dim),
            ));
        }
        let cache = Self {
            store,
            manifest,
            shape: KvShape {
                layers,
                kv_heads,
                head_dim,
            },
            cfg,
            chunks: RwLock::new(HashMap::new()),
            write: Mutex::new(()),
            counters: Counters::default(),
        };
        cache.load_table()?;
        Ok(cache)
    }

    /// Blocks per chunk.
    fn blocks_per_chunk(&self) -> u32 {
        2 * self.shape.layers * self.shape.kv_heads
    }

    fn chunk_shape(&self) -> [u32; 5] {
        let s = self.shape;
        [2, s.layers, s.kv_heads, self.cfg.chunk_tokens, s.head_dim]
    }

    /// Build the chunk table from the store: complete chunks of the right shape only; a
    /// writer deletes the blocks of incomplete ones.
    fn load_table(&self) -> Result<()> {
        let want_shape = self.chunk_shape();
        let mut table = HashMap::new();
        let mut stale = Vec::new();
        for t in self.store.tensors()? {
            let Some((id, parent)) = t.name.as_deref().and_then(parse_chunk_name) else {
                continue;
            };
            if t.tensor_id != self.store.tensor_id_of(&chunk_name(id, parent)) {
                continue;
            }
            let complete = t.dtype == DType::F16
                && t.shape == want_shape
                && t.blocks == u64::from(self.blocks_per_chunk())
                && t.expected_blocks == t.blocks;
            if complete {
                table.insert(
                    id,
                    Chunk {
                        parent,
                        tensor_id: t.tensor_id,
                    },
                );
            } else {
                stale.push(t.tensor_id);
            }
        }
        if !self.cfg.read_only && !stale.is_empty() {
            let keys: Vec<BlockKey> = self
                .store
                .blocks()?
                .into_iter()
                .filter(|m| stale.contains(&m.key.tensor_id))
                .map(|m| m.key)
                .collect();
            tracing::warn!(
                chunks = stale.len(),
                "prefix cache: dropping incomplete chunks"
            );
            self.store.delete_blocks(&keys)?;
        }
        *self.chunks.write().map_err(poisoned)? = table;
        Ok(())
    }

    /// The store underneath.
    #[must_use]
    pub fn tensor_store(&self) -> &DirStore<C> {
        &self.store
    }

    /// The model's identity and geometry.
    #[must_use]
    pub fn manifest(&self) -> &ModelManifest {
        &self.manifest
    }

    /// Tokens per chunk.
    #[must_use]
    pub fn chunk_tokens(&self) -> u32 {
        self.cfg.chunk_tokens
    }

    fn check_writable(&self, op: &'static str) -> Result<()> {
        if self.cfg.read_only {
            return Err(StoreErr::ReadOnly { op });
        }
        Ok(())
    }

    /// Store the KV of `tokens`: `keys` and `values` hold, per layer, `[kv_heads,
    /// tokens.len(), head_dim]` values. Every full chunk not yet stored is written (a
    /// trailing partial chunk is not); returns the tokens newly stored. Then, with a
    /// budget, chunks are evicted until the model's chunks fit.
    ///
    /// # Errors
    /// [`StoreErr::ReadOnly`]; [`StoreErr::InvalidArgument`] naming `keys` or `values`
    /// for a wrong layer count or length; [`StoreErr::NonFiniteKv`] for a NaN or
    /// infinity; the store's write errors.
    pub fn store(&self, tokens: &[u32], keys: &[KvData], values: &[KvData]) -> Result<u64> {
        self.check_writable("store")?;
        self.shape.check(tokens.len(), keys, values)?;
        let c = self.cfg.chunk_tokens as usize;
        let hd = self.shape.head_dim as usize;
        let shape = self.chunk_shape();
        let _w = self.write.lock().map_err(poisoned)?;
        let mut added = 0u64;
        let mut bytes = Vec::with_capacity(c * hd * 2);
        for (i, (id, parent)) in chunk_ids(&self.manifest.model, self.cfg.chunk_tokens, tokens)
            .into_iter()
            .enumerate()
        {
            if self.chunks.read().map_err(poisoned)?.contains_key(&id) {
                continue;
            }
            let name = chunk_name(id, parent);
            let tid = self.store.tensor_id_of(&name);
            let mut batch = Vec::with_capacity(self.blocks_per_chunk() as usize);
            let mut b = 0u32;
            for (kind, arrays) in [(TensorKind::KvKey, keys), (TensorKind::KvValue, values)] {
                let info = BlockInfo::new(DType::F16, &shape).with_kind(kind);
                for a in arrays {
                    for head in 0..self.shape.kv_heads as usize {
                        bytes.clear();
                        block_bytes(a, hd, tokens.len(), head, i * c, c, &mut bytes);
                        let key = BlockKey::new(tid, b);
                        batch.push(
                            self.store
                                .prepare(key, self.cfg.store_tier, &info, &bytes)?,
                        );
                        b += 1;
                    }
                }
            }
            {
                let mut w = self.store.lock_writer()?;
                let sync = self.store.config().durability == Durability::EveryWrite;
                w.catalog.insert(tid, &name, sync)?;
            }
            self.store.write_prepared(batch)?;
            self.chunks.write().map_err(poisoned)?.insert(
                id,
                Chunk {
                    parent,
                    tensor_id: tid,
                },
            );
            self.counters.stored.fetch_add(1, Ordering::Relaxed);
            added += c as u64;
        }
        if let Some(budget) = self.cfg.budget_bytes {
            self.evict_to(budget)?;
        }
        Ok(added)
    }

    /// Chunks of `tokens` found in a row from the start.
    fn found(&self, tokens: &[u32]) -> Result<(Vec<(u128, Chunk)>, u64)> {
        let ids = chunk_ids(&self.manifest.model, self.cfg.chunk_tokens, tokens);
        let table = self.chunks.read().map_err(poisoned)?;
        let hits: Vec<(u128, Chunk)> = ids
            .iter()
            .map_while(|(id, _)| table.get(id).map(|c| (*id, *c)))
            .collect();
        Ok((hits, ids.len() as u64))
    }

    /// The longest stored prefix of `tokens`, in tokens (a multiple of the chunk size),
    /// reading no KV data.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the cache's lock.
    pub fn lookup(&self, tokens: &[u32]) -> Result<u64> {
        let (hits, total) = self.found(tokens)?;
        let n = hits.len() as u64;
        self.counters.lookups.fetch_add(1, Ordering::Relaxed);
        self.counters.hit_chunks.fetch_add(n, Ordering::Relaxed);
        self.counters
            .miss_chunks
            .fetch_add(total - n, Ordering::Relaxed);
        Ok(n * u64::from(self.cfg.chunk_tokens))
    }

    /// The KV of the first `n` tokens of `tokens` (default: the longest stored prefix),
    /// per layer `[kv_heads, tokens, head_dim]` f16, dequantized from each chunk's tier
    /// (exact at Tier0). Every block's checksum is verified: at a damaged chunk the load
    /// stops, so [`LoadedKv::tokens`] is then less than asked (never wrong data); the
    /// chunk counts in [`PrefixStats::damaged_chunks`] and a writable cache drops it and
    /// the chunks after it.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] (field `n`) if `n` exceeds the stored prefix;
    /// the store's read errors other than corruption.
    pub fn load(&self, tokens: &[u32], n: Option<u64>) -> Result<LoadedKv> {
        let (hits, total) = self.found(tokens)?;
        self.counters.lookups.fetch_add(1, Ordering::Relaxed);
        let c = u64::from(self.cfg.chunk_tokens);
        let stored = hits.len() as u64 * c;
        let n = n.unwrap_or(stored);
        if n > stored {
            return Err(StoreErr::InvalidArgument {
                field: "n",
                reason: format!("{n} tokens asked, {stored} stored for this prefix"),
            });
        }
        let need = n.div_ceil(c) as usize;
        let mut out = LoadedKv::zeroed(self.shape, n as usize);
        let hd = self.shape.head_dim as usize;
        let heads = self.shape.kv_heads as usize;
        let mut bytes = Vec::new();
        let mut loaded = 0usize;
        'chunks: for (j, (id, chunk)) in hits.iter().take(need).enumerate() {
            let first = j * c as usize;
            let rows = (n as usize - first).min(c as usize);
            for b in 0..self.blocks_per_chunk() {
                let key = BlockKey::new(chunk.tensor_id, b);
                match self.store.get_block(&key, &mut bytes) {
                    Ok(_) => {}
                    Err(e) if e.is_corruption() => {
                        tracing::warn!(%key, error = %e, "prefix cache: damaged chunk");
                        self.counters.damaged.fetch_add(1, Ordering::Relaxed);
                        if !self.cfg.read_only {
                            self.drop_from(*id)?;
                        }
                        break 'chunks;
                    }
                    Err(StoreErr::NotFound { .. }) => break 'chunks, // evicted meanwhile
                    Err(e) => return Err(e),
                }
                let Some(part) = bytes.get(..rows * hd * 2) else {
                    self.counters.damaged.fetch_add(1, Ordering::Relaxed);
                    break 'chunks;
                };
                let (kind, rest) = (
                    (b as usize) / (heads * self.shape.layers as usize),
                    b as usize,
                );
                let layer = (rest / heads) % self.shape.layers as usize;
                let head = rest % heads;
                let dest = if kind == 0 {
                    &mut out.keys[layer]
                } else {
                    &mut out.values[layer]
                };
                LoadedKv::put_rows(dest, n as usize, hd, head, first, part);
            }
            loaded = first + rows;
        }
        out.truncate(loaded);
        let full = (loaded as u64) / c;
        self.counters.hit_chunks.fetch_add(full, Ordering::Relaxed);
        self.counters
            .miss_chunks
            .fetch_add(total - full, Ordering::Relaxed);
        Ok(out)
    }

    /// Delete chunk `id` and every stored chunk that extends it.
    fn drop_from(&self, id: u128) -> Result<()> {
        let _w = self.write.lock().map_err(poisoned)?;
        let victims: Vec<u128> = {
            let table = self.chunks.read().map_err(poisoned)?;
            let mut kids: HashMap<u128, Vec<u128>> = HashMap::new();
            for (cid, c) in table.iter() {
                kids.entry(c.parent).or_default().push(*cid);
            }
            let mut out = vec![id];
            let mut i = 0;
            while let Some(cur) = out.get(i).copied() {
                out.extend(kids.get(&cur).into_iter().flatten().copied());
                i += 1;
            }
            out
        };
        self.delete_chunks(&victims)
    }

    fn delete_chunks(&self, ids: &[u128]) -> Result<()> {
        let mut keys = Vec::new();
        let mut removed = 0u64;
        {
            let mut table = self.chunks.write().map_err(poisoned)?;
            for id in ids {
                if let Some(c) = table.remove(id) {
                    removed += 1;
                    keys.extend(
                        (0..self.blocks_per_chunk()).map(|b| BlockKey::new(c.tensor_id, b)),
                    );
                }
            }
        }
        self.store.delete_blocks(&keys)?;
        self.counters.evicted.fetch_add(removed, Ordering::Relaxed);
        Ok(())
    }

    /// The blocks of every chunk, by chunk id (access statistics applied first).
    fn chunk_blocks(&self) -> Result<BTreeMap<u128, Vec<BlockMeta>>> {
        self.store.apply_pending_access()?;
        let by_tensor: HashMap<u128, u128> = self
            .chunks
            .read()
            .map_err(poisoned)?
            .iter()
            .map(|(id, c)| (c.tensor_id, *id))
            .collect();
        let mut out: BTreeMap<u128, Vec<BlockMeta>> = BTreeMap::new();
        for m in self.store.blocks()? {
            if let Some(id) = by_tensor.get(&m.key.tensor_id) {
                out.entry(*id).or_default().push(m);
            }
        }
        Ok(out)
    }

    /// Evict until the chunks' payload fits `budget` bytes; returns the chunks evicted.
    /// The caller holds the write lock.
    fn evict_to(&self, budget: u64) -> Result<u64> {
        let blocks = self.chunk_blocks()?;
        let table = self.chunks.read().map_err(poisoned)?.clone();
        let uses: Vec<ChunkUse> = blocks
            .iter()
            .filter_map(|(id, metas)| {
                Some(ChunkUse {
                    id: *id,
                    parent: table.get(id)?.parent,
                    bytes: metas.iter().map(|m| u64::from(m.data_len)).sum(),
                    last_use: metas
                        .iter()
                        .map(|m| m.last_access_at.max(m.created_at))
                        .max()?,
                })
            })
            .collect();
        let victims = plan_eviction(&uses, budget);
        if !victims.is_empty() {
            self.delete_chunks(&victims)?;
        }
        Ok(victims.len() as u64)
    }

    /// Move chunks idle for long to colder tiers ([`PrefixConfig::age_tiers`]; demotion
    /// only), then evict down to the budget.
    ///
    /// # Errors
    /// [`StoreErr::ReadOnly`]; the store's migration and write errors.
    pub fn maintain(&self) -> Result<PrefixMaintainReport> {
        self.check_writable("maintain")?;
        let _w = self.write.lock().map_err(poisoned)?;
        let now = self.store.clock().now_ticks();
        let mut report = PrefixMaintainReport::default();
        let mut moves: [Vec<BlockKey>; 4] = Default::default();
        for metas in self.chunk_blocks()?.values() {
            let Some(last) = metas
                .iter()
                .map(|m| m.last_access_at.max(m.created_at))
                .max()
            else {
                continue;
            };
            let target = self.cfg.age_tiers.tier_for_idle(now.saturating_sub(last));
            let mut moved = false;
            for m in metas.iter().filter(|m| m.tier < target) {
                moves[target.index()].push(m.key);
                moved = true;
            }
            if moved {
                report.demoted[target.index()] += 1;
            }
        }
        for (i, keys) in moves.iter().enumerate() {
            if !keys.is_empty() {
                self.store.migrate_blocks(keys, Tier::ALL[i])?;
            }
        }
        if let Some(budget) = self.cfg.budget_bytes {
            report.evicted = self.evict_to(budget)?;
        }
        self.store.compact_if_over(4)?;
        Ok(report)
    }

    /// Counts and sizes of the model's chunks, and this handle's hit/miss counters.
    ///
    /// # Errors
    /// Only if a thread panicked while holding a lock.
    pub fn stats(&self) -> Result<PrefixStats> {
        let k = &self.counters;
        let mut s = PrefixStats {
            lookups: k.lookups.load(Ordering::Relaxed),
            hit_chunks: k.hit_chunks.load(Ordering::Relaxed),
            miss_chunks: k.miss_chunks.load(Ordering::Relaxed),
            damaged_chunks: k.damaged.load(Ordering::Relaxed),
            stored_chunks: k.stored.load(Ordering::Relaxed),
            evicted_chunks: k.evicted.load(Ordering::Relaxed),
            ..PrefixStats::default()
        };
        let sh = self.shape;
        let per_chunk_f16 = 2
            * u64::from(sh.layers)
            * u64::from(sh.kv_heads)
            * u64::from(self.cfg.chunk_tokens)
            * u64::from(sh.head_dim)
            * 2;
        for metas in self.chunk_blocks()?.values() {
            s.chunks += 1;
            s.tokens += u64::from(self.cfg.chunk_tokens);
            s.f16_bytes += per_chunk_f16;
            if let Some(first) = metas.iter().find(|m| m.key.block_index == 0) {
                s.tier_chunks[first.tier.index()] += 1;
            }
            for m in metas {
                s.stored_bytes += u64::from(m.data_len);
                s.tier_bytes[m.tier.index()] += u64::from(m.data_len);
            }
        }
        Ok(s)
    }

    /// Flush and release the store (a writer compacts a log holding more than two
    /// records per live block first).
    ///
    /// # Errors
    /// As [`crate::TensorStore::compact`] and [`crate::TensorStore::close`].
    pub fn close(self) -> Result<()> {
        if !self.cfg.read_only {
            self.store.compact_if_over(2)?;
        }
        self.store.close()
    }
}

/// Read `prefix.model` if present, refusing a file larger than any valid manifest before
/// reading it.
fn read_manifest(path: &Path) -> Result<Option<ModelManifest>> {
    let len = match std::fs::symlink_metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreErr::io("stat", path, e)),
    };
    let max = (MODEL_OFFSET + MAX_MODEL_LEN + 4) as u64;
    if len > max {
        return Err(StoreErr::BadHeader {
            file: MANIFEST_FILE.to_owned(),
            field: "length",
            offset: 0,
            reason: format!("{len} bytes, a manifest has at most {max}"),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| StoreErr::io("read", path, e))?;
    ModelManifest::decode(&bytes).map(Some)
}
