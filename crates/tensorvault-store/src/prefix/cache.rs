//! [`PrefixCache`]: open, store, lookup, load, stats, maintain, close over a directory
//! store. See the module docs of `prefix`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::chain::{chunk_ids, chunk_name};
use super::counts::ModelCounts;
use super::evict::AgeTiers;
use super::kv_io::{block_bytes, KvData, KvShape, LoadedKv};
use super::manifest::{ModelManifest, MANIFEST_FILE};
use super::{collection_name, TENANT};
use crate::clock::{Clock, SystemClock};
use crate::config::{CollectionConfig, Durability, StoreConfig};
use crate::error::{Result, StoreErr};
use crate::fs::{collection_dir, DirStore};
use crate::store::BlockInfo;
use crate::types::{BlockKey, DType, TensorKind, Tier};

mod commit;
mod maintain;
mod verify;
mod view;

use commit::{chunk_blocks, open_writer, writer_table};
pub use verify::PrefixVerifyReport;
pub use view::SharedClock;
use view::{chunk_table, Chunk, ChunkForm, Stamp, View};

/// Options of a prefix cache.
#[derive(Clone, Debug)]
pub struct PrefixConfig {
    /// Tokens per chunk (fixed when the model's collection is created).
    pub chunk_tokens: u32,
    /// Tiers by idle time, applied by [`PrefixCache::maintain`].
    pub age_tiers: AgeTiers,
    /// Most payload bytes the model's chunks may take (`None`: unlimited).
    pub budget_bytes: Option<u64>,
    /// Only read (through snapshots, taking no lock and writing nothing); every write
    /// fails with [`StoreErr::ReadOnly`].
    pub read_only: bool,
    /// The tier new chunks are written to (Tier0: raw f16, bit-exact).
    pub store_tier: Tier,
    /// The store's options (durability; `lock_wait`: the longest a commit waits for
    /// another writer); its `collection` is replaced by the KV layout of the model.
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
    /// `lookup` and `load` calls (of this handle since open in [`PrefixCache::stats`];
    /// of every writable handle ever in [`PrefixCache::model_counts`]).
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

#[derive(Default)]
struct Counters {
    lookups: AtomicU64,
    hit_chunks: AtomicU64,
    miss_chunks: AtomicU64,
    damaged: AtomicU64,
    stored: AtomicU64,
    evicted: AtomicU64,
}

impl Counters {
    fn values(&self) -> [u64; 6] {
        [
            &self.lookups,
            &self.hit_chunks,
            &self.miss_chunks,
            &self.damaged,
            &self.stored,
            &self.evicted,
        ]
        .map(|a| a.load(Ordering::Relaxed))
    }
}

/// A KV prefix cache for one model over a directory store. See the module docs.
///
/// Reads go through a snapshot of the model's collection that takes no lock (refreshed
/// when a writer anywhere committed since); each change is a commit that holds the
/// collection's writer lock only while it lasts. So any number of processes can read and
/// write one root at once, and readers never wait for writers.
pub struct PrefixCache<C: Clock = SystemClock> {
    root: PathBuf,
    coll: String,
    dir: PathBuf,
    clock: SharedClock<C>,
    manifest: ModelManifest,
    shape: KvShape,
    cfg: PrefixConfig,
    /// The store options every open uses (the model's KV layout).
    scfg: StoreConfig,
    view: RwLock<Arc<View<C>>>,
    /// Serializes snapshot reopens within the process.
    refreshing: Mutex<()>,
    /// Serializes commits within the process.
    write: Mutex<()>,
    /// Chunks used (loaded, or stored again) since the last commit: id -> tick.
    touches: Mutex<HashMap<u128, u64>>,
    /// Chunks a load found damaged: misses from now on, deleted at the next commit.
    pending_drop: Mutex<HashSet<u128>>,
    counters: Counters,
    /// Counter values already added to the model's `prefix.stats`.
    persisted: Mutex<[u64; 6]>,
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
    /// `head_dim` values, timestamps from `clock`. A writable open takes the writer lock
    /// for a moment (creating the collection and its manifest, deleting the blocks of
    /// chunks a killed process left incomplete); a read-only one takes no lock.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] for an empty or over-long model identity, a zero or
    /// too large geometry; [`StoreErr::ModelMismatch`] if the model's stored geometry,
    /// chunk size or identity differs; [`StoreErr::BadHeader`] for a damaged
    /// `prefix.model`; [`StoreErr::Locked`] if other writers kept the collection for
    /// longer than `cfg.store.lock_wait`; the store's open errors (a missing collection
    /// when read-only is [`StoreErr::CollectionNotFound`]).
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
        let dir = collection_dir(root, TENANT, &coll)?;
        let clock = SharedClock::new(clock);
        let form = ChunkForm {
            shape: [2, layers, kv_heads, cfg.chunk_tokens, head_dim],
            blocks: 2 * layers * kv_heads,
        };
        let open_view = |stamp| -> Result<View<C>> {
            let store =
                DirStore::open_dir_snapshot(root, TENANT, &coll, clock.clone(), scfg.clone())?;
            let (table, _incomplete) = chunk_table(&store, form)?;
            Ok(View {
                store: Arc::new(store),
                table,
                stamp,
            })
        };
        let view = if cfg.read_only {
            let stamp = Stamp::of(&dir)?;
            let v = open_view(stamp)?;
            match ModelManifest::read(&dir)? {
                Some(stored) => check_manifest(&stored, &manifest)?,
                None => {
                    let path = dir.join(MANIFEST_FILE);
                    return Err(StoreErr::io(
                        "open",
                        &path,
                        std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "no prefix-cache manifest",
                        ),
                    ));
                }
            }
            v
        } else {
            // Created (if need be) and checked under the writer lock: a second writer
            // waits, then finds the manifest.
            let store = open_writer(root, &coll, &clock, &scfg, true)?;
            let path = dir.join(MANIFEST_FILE);
            match ModelManifest::read(&dir)? {
                Some(stored) => check_manifest(&stored, &manifest)?,
                None => tensorvault_core::atomic::write_atomic(&path, &wanted)
                    .map_err(|e| StoreErr::io("write", &path, std::io::Error::other(e)))?,
            }
            writer_table(&store, form)?;
            store.close()?;
            open_view(Stamp::of(&dir)?)?
        };
        Self::assemble(root, &coll, &dir, &clock, &manifest, cfg, &scfg, view).finish_open()
    }

    /// The handle's fields, reading through `view`.
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        root: &Path,
        coll: &str,
        dir: &Path,
        clock: &SharedClock<C>,
        manifest: &ModelManifest,
        cfg: PrefixConfig,
        scfg: &StoreConfig,
        view: View<C>,
    ) -> Self {
        Self {
            root: root.to_owned(),
            coll: coll.to_owned(),
            dir: dir.to_owned(),
            clock: clock.clone(),
            manifest: manifest.clone(),
            shape: KvShape {
                layers: manifest.layers,
                kv_heads: manifest.kv_heads,
                head_dim: manifest.head_dim,
            },
            cfg,
            scfg: scfg.clone(),
            view: RwLock::new(Arc::new(view)),
            refreshing: Mutex::new(()),
            write: Mutex::new(()),
            touches: Mutex::new(HashMap::new()),
            pending_drop: Mutex::new(HashSet::new()),
            counters: Counters::default(),
            persisted: Mutex::new([0; 6]),
        }
    }

    /// Check the collection's block size.
    fn finish_open(self) -> Result<Self> {
        let block_elems = self.current()?.store.geometry().block_elems;
        let want = u64::from(self.cfg.chunk_tokens) * u64::from(self.shape.head_dim);
        if u64::from(block_elems) != want {
            return Err(mismatch("block_elems", block_elems, want));
        }
        Ok(self)
    }

    /// Blocks per chunk.
    fn blocks_per_chunk(&self) -> u32 {
        2 * self.shape.layers * self.shape.kv_heads
    }

    fn chunk_shape(&self) -> [u32; 5] {
        let s = self.shape;
        [2, s.layers, s.kv_heads, self.cfg.chunk_tokens, s.head_dim]
    }

    fn form(&self) -> ChunkForm {
        ChunkForm {
            shape: self.chunk_shape(),
            blocks: self.blocks_per_chunk(),
        }
    }

    fn current(&self) -> Result<Arc<View<C>>> {
        Ok(Arc::clone(&*self.view.read().map_err(poisoned)?))
    }

    /// The snapshot to read through: reopened first if a writer (in any process)
    /// committed since it was taken, or always with `force`.
    fn refresh(&self, force: bool) -> Result<Arc<View<C>>> {
        let cur = self.current()?;
        let now = Stamp::of(&self.dir)?;
        if !force && now == cur.stamp {
            return Ok(cur);
        }
        let _r = self.refreshing.lock().map_err(poisoned)?;
        let cur = self.current()?;
        if !force && now == cur.stamp {
            return Ok(cur); // another thread refreshed meanwhile
        }
        let stamp = Stamp::of(&self.dir)?; // before the open: a later commit is seen next time
        let store = DirStore::open_dir_snapshot(
            &self.root,
            TENANT,
            &self.coll,
            self.clock.clone(),
            self.scfg.clone(),
        )?;
        let (table, _incomplete) = chunk_table(&store, self.form())?;
        let v = Arc::new(View {
            store: Arc::new(store),
            table,
            stamp,
        });
        *self.view.write().map_err(poisoned)? = Arc::clone(&v);
        Ok(v)
    }

    /// Whether a writer committed since `v` was taken.
    fn is_stale(&self, v: &View<C>) -> Result<bool> {
        Ok(Stamp::of(&self.dir)? != v.stamp)
    }

    /// The store snapshot reads currently go through (refreshed if a writer committed).
    ///
    /// # Errors
    /// The snapshot's open errors.
    pub fn tensor_store(&self) -> Result<Arc<DirStore<SharedClock<C>>>> {
        Ok(Arc::clone(&self.refresh(false)?.store))
    }

    /// The clock this cache stamps uses with.
    #[must_use]
    pub fn clock(&self) -> &C {
        &self.clock
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
    /// trailing partial chunk is not); returns the tokens newly stored. The chunks are
    /// encoded first, then written in one commit that holds the writer lock (waiting for
    /// another writer at most `lock_wait`); a chunk another process stored meanwhile is
    /// skipped. With a budget, chunks are then evicted until the model's chunks fit.
    /// Storing only chunks already present takes no lock.
    ///
    /// # Errors
    /// [`StoreErr::ReadOnly`]; [`StoreErr::InvalidArgument`] naming `keys` or `values`
    /// for a wrong layer count or length; [`StoreErr::NonFiniteKv`] for a NaN or
    /// infinity; [`StoreErr::Locked`] if other writers kept the lock past `lock_wait`;
    /// the store's write errors.
    pub fn store(&self, tokens: &[u32], keys: &[KvData], values: &[KvData]) -> Result<u64> {
        self.check_writable("store")?;
        self.shape.check(tokens.len(), keys, values)?;
        let c = self.cfg.chunk_tokens as usize;
        let hd = self.shape.head_dim as usize;
        let shape = self.chunk_shape();
        let view = self.refresh(false)?;
        let ids = chunk_ids(&self.manifest.model, self.cfg.chunk_tokens, tokens);
        let mut todo = Vec::new();
        {
            let dropping = self.pending_drop.lock().map_err(poisoned)?;
            let mut touches = self.touches.lock().map_err(poisoned)?;
            let now = self.clock.now_ticks();
            for (i, (id, _)) in ids.iter().enumerate() {
                // After a missing chunk, every later one is encoded too: a chunk about to
                // be dropped takes its descendants with it (the commit skips any present).
                if todo.is_empty() && view.table.contains_key(id) && !dropping.contains(id) {
                    touches.insert(*id, now); // the same prefix came again: a use
                } else {
                    todo.push(i);
                }
            }
        }
        if todo.is_empty() {
            return Ok(0);
        }
        // Encode outside the lock (the codec needs only the collection's geometry).
        let mut prepared = Vec::with_capacity(todo.len());
        let mut bytes = Vec::with_capacity(c * hd * 2);
        for i in todo {
            let (id, parent) = ids[i];
            let tid = view.store.tensor_id_of(&chunk_name(id, parent));
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
                            view.store
                                .prepare(key, self.cfg.store_tier, &info, &bytes)?,
                        );
                        b += 1;
                    }
                }
            }
            prepared.push((id, parent, tid, batch));
        }
        drop(view);
        self.commit(|w| {
            let mut added = 0u64;
            for (id, parent, tid, batch) in prepared {
                if w.table.contains_key(&id) {
                    continue; // stored by another writer since our snapshot
                }
                {
                    let mut lw = w.store.lock_writer()?;
                    let sync = w.store.config().durability == Durability::EveryWrite;
                    lw.catalog.insert(tid, &chunk_name(id, parent), sync)?;
                }
                w.store.write_prepared(batch)?;
                w.table.insert(
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
                self.evict_to(w, budget)?;
            }
            Ok(added)
        })
    }

    /// Chunks of `tokens` found in a row from the start in `view`, and the full chunks
    /// of `tokens`.
    fn found(&self, view: &View<C>, tokens: &[u32]) -> Result<(Vec<(u128, Chunk)>, u64)> {
        let ids = chunk_ids(&self.manifest.model, self.cfg.chunk_tokens, tokens);
        let dropping = self.pending_drop.lock().map_err(poisoned)?;
        let hits: Vec<(u128, Chunk)> = ids
            .iter()
            .map_while(|(id, _)| {
                if dropping.contains(id) {
                    return None;
                }
                view.table.get(id).map(|c| (*id, *c))
            })
            .collect();
        Ok((hits, ids.len() as u64))
    }

    /// The longest stored prefix of `tokens`, in tokens (a multiple of the chunk size),
    /// reading no KV data (the snapshot is refreshed first if a writer committed).
    ///
    /// # Errors
    /// The snapshot's reopen errors; a thread panicked while holding the cache's lock.
    pub fn lookup(&self, tokens: &[u32]) -> Result<u64> {
        let view = self.refresh(false)?;
        let (hits, total) = self.found(&view, tokens)?;
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
    /// chunk counts in [`PrefixStats::damaged_chunks`] and a writable cache deletes it and
    /// the chunks after it at its next commit. (A block that a writer in another process
    /// moved or evicted after this handle's snapshot was taken is read again from a fresh
    /// snapshot, not reported damaged.)
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] (field `n`) if `n` exceeds the stored prefix;
    /// the store's read errors other than corruption.
    pub fn load(&self, tokens: &[u32], n: Option<u64>) -> Result<LoadedKv> {
        let mut view = self.refresh(false)?;
        let mut tries = 0;
        let (out, total, damaged) = loop {
            let (out, total, damaged) = self.load_from(&view, tokens, n)?;
            tries += 1;
            if damaged.is_some() && tries < 4 && self.is_stale(&view)? {
                view = self.refresh(true)?;
                continue;
            }
            break (out, total, damaged);
        };
        self.counters.lookups.fetch_add(1, Ordering::Relaxed);
        let c = u64::from(self.cfg.chunk_tokens);
        let full = (out.tokens as u64) / c;
        self.counters.hit_chunks.fetch_add(full, Ordering::Relaxed);
        self.counters
            .miss_chunks
            .fetch_add(total - full, Ordering::Relaxed);
        if let Some(id) = damaged {
            self.counters.damaged.fetch_add(1, Ordering::Relaxed);
            if !self.cfg.read_only {
                self.pending_drop.lock().map_err(poisoned)?.insert(id);
            }
        }
        if !self.cfg.read_only && full > 0 {
            let now = self.clock.now_ticks();
            let ids = chunk_ids(&self.manifest.model, self.cfg.chunk_tokens, tokens);
            let mut t = self.touches.lock().map_err(poisoned)?;
            for (id, _) in ids.iter().take(out.tokens.div_ceil(c as usize)) {
                t.insert(*id, now);
            }
        }
        Ok(out)
    }

    /// One load attempt through `view`: the KV read, the full chunks of `tokens`, and
    /// the chunk found damaged (if one was).
    fn load_from(
        &self,
        view: &View<C>,
        tokens: &[u32],
        n: Option<u64>,
    ) -> Result<(LoadedKv, u64, Option<u128>)> {
        let (hits, total) = self.found(view, tokens)?;
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
        let layers = self.shape.layers as usize;
        let mut bytes = Vec::new();
        let mut loaded = 0usize;
        let mut damaged = None;
        'chunks: for (j, (id, chunk)) in hits.iter().take(need).enumerate() {
            let first = j * c as usize;
            let rows = (n as usize - first).min(c as usize);
            for b in 0..self.blocks_per_chunk() {
                let key = BlockKey::new(chunk.tensor_id, b);
                match view.store.get_block(&key, &mut bytes) {
                    Ok(_) => {}
                    Err(e) if e.is_corruption() => {
                        tracing::warn!(%key, error = %e, "prefix cache: damaged chunk");
                        damaged = Some(*id);
                        break 'chunks;
                    }
                    Err(StoreErr::NotFound { .. }) => break 'chunks, // evicted meanwhile
                    Err(e) => return Err(e),
                }
                let Some(part) = bytes.get(..rows * hd * 2) else {
                    damaged = Some(*id);
                    break 'chunks;
                };
                let b = b as usize;
                let kind = b / (heads * layers);
                let layer = (b / heads) % layers;
                let head = b % heads;
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
        Ok((out, total, damaged))
    }

    /// Counts and sizes of the model's chunks (as of a fresh snapshot), and this handle's
    /// hit/miss counters.
    ///
    /// # Errors
    /// The snapshot's reopen errors; a thread panicked while holding a lock.
    pub fn stats(&self) -> Result<PrefixStats> {
        let [lookups, hit_chunks, miss_chunks, damaged_chunks, stored_chunks, evicted_chunks] =
            self.counters.values();
        let mut s = PrefixStats {
            lookups,
            hit_chunks,
            miss_chunks,
            damaged_chunks,
            stored_chunks,
            evicted_chunks,
            ..PrefixStats::default()
        };
        let sh = self.shape;
        let per_chunk_f16 = 2
            * u64::from(sh.layers)
            * u64::from(sh.kv_heads)
            * u64::from(self.cfg.chunk_tokens)
            * u64::from(sh.head_dim)
            * 2;
        let view = self.refresh(false)?;
        for metas in chunk_blocks(&view.store, &view.table)?.values() {
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

    /// The model's use counters summed over every writable handle's commits (this
    /// handle's uncommitted counts not included), from `prefix.stats`.
    ///
    /// # Errors
    /// [`StoreErr::BadHeader`] for a damaged counters file; I/O errors.
    pub fn model_counts(&self) -> Result<ModelCounts> {
        ModelCounts::read(&self.dir)
    }

    /// Commit what is pending (uses, damaged chunks, counters) and release the store.
    ///
    /// # Errors
    /// As [`PrefixCache::store`]'s commit.
    pub fn close(self) -> Result<()> {
        if !self.cfg.read_only {
            let pending = !self.touches.lock().map_err(poisoned)?.is_empty()
                || !self.pending_drop.lock().map_err(poisoned)?.is_empty()
                || self.counters.values() != *self.persisted.lock().map_err(poisoned)?;
            if pending {
                self.commit(|_| Ok(()))?;
            }
        }
        Ok(())
    }
}

fn check_manifest(stored: &ModelManifest, given: &ModelManifest) -> Result<()> {
    if stored.model != given.model {
        return Err(mismatch("model", &stored.model, &given.model));
    }
    for (field, s, g) in [
        ("layers", stored.layers, given.layers),
        ("kv_heads", stored.kv_heads, given.kv_heads),
        ("head_dim", stored.head_dim, given.head_dim),
        ("chunk_tokens", stored.chunk_tokens, given.chunk_tokens),
    ] {
        if s != g {
            return Err(mismatch(field, s, g));
        }
    }
    Ok(())
}
