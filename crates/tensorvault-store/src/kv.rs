//! The attention KV-cache workload (ADR-018 sections 1.3 and 8.2) over a [`TensorStore`]
//! opened with the KV layout ([`crate::CollectionConfig::kv_cache`]).
//!
//! Layout: one tensor per (layer, head, key|value), named `L{layer}.H{head}.{k|v}` and
//! recorded in the collection's name catalog, of shape `[tokens, head_dim]` f16. A block
//! holds `block_elems / head_dim` whole token positions (128 at head_dim 128), so token
//! `t` lives in block `t / tokens_per_block` and a token range never splits a position
//! across blocks.
//!
//! Appends go to the *tail* block, always in Tier0 (raw f16, bit-exact): the tail's
//! values are kept in memory and every append rewrites the partial tail block with the
//! same key (`put_block` semantics: a new slot, the old one freed). When the tail fills
//! up it is *sealed* and never rewritten again; the next append starts a new block.
//! Sealed blocks are demoted by [`TensorStore::maintain`] according to their access
//! scores, like any other block.
//!
//! The tail is *pinned* ([`TensorStore::pin_block`]): `maintain` and capacity evictions
//! never move it, whatever its score (a freshly rewritten tail scores almost zero, since a
//! rewrite starts the block's access statistics afresh, so without the pin it would be
//! the first block a full Tier0 evicts). Sealing moves the pin to the new tail. Pins live
//! in memory; [`KvCache::new`] pins the tail of every tensor it finds.
//!
//! Values: appends refuse NaN and ±infinity ([`StoreErr::NonFiniteKv`], naming the layer,
//! head and token; nothing is written), since a block holding one could never be
//! quantized. A block that holds one anyway (written by an older build or through the
//! generic store API) is held in its tier by `maintain` and [`KvCache::demote_by_age`]
//! and reported, while every other block keeps moving (`crate::finite`).
//!
//! Shape: every block an append writes records the tensor's shape *after* that append,
//! `[tokens, head_dim]`. Sealed blocks are not rewritten, so they keep the shape of the
//! append that sealed them: the tensor's current shape is the one of its last block, and
//! that is where [`KvCache::new`] reads the token count from on reopen. (Whole-tensor
//! reads such as `get_tensor` take the shape from block 0, so they see only the tokens
//! up to block 0's seal; read KV tensors through [`KvCache::read`].)

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Mutex;

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::block_io::BlockIO;
use crate::clock::Clock;
use crate::config::Durability;
use crate::error::{Result, StoreErr};
use crate::meta_log::MetaLog;
use crate::store::{BlockInfo, Prepared, TensorStore};
use crate::types::{BlockKey, DType, TensorKind, Tier};

mod rope;
mod rope_table;
mod slot;

pub use rope::{RopePairing, RopeSpec};
pub use slot::{KvKind, KvSlot};

/// The in-memory state of one tensor: its id, token count and the values of its partial
/// tail block.
#[derive(Clone, Debug)]
struct Tail {
    id: u128,
    tokens: u64,
    /// `(tokens % tokens_per_block) * head_dim` values: the partial tail block.
    values: Vec<f16>,
}

/// A KV cache over a store with the KV layout. See the module docs.
pub struct KvCache<C: Clock, B: BlockIO, M: MetaLog> {
    store: TensorStore<C, B, M>,
    head_dim: u32,
    tokens_per_block: u32,
    /// Keys are stored before RoPE and rotated at read (the collection's persisted spec).
    rope: Option<RopeSpec>,
    /// The rotations reads apply, computed once per position.
    rope_table: Option<rope_table::RopeTable>,
    tails: Mutex<HashMap<KvSlot, Tail>>,
}

fn poisoned<T>(_: T) -> StoreErr {
    StoreErr::Poisoned { lock: "kv cache" }
}

fn le_bytes(values: &[f16]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn push_f16(bytes: &[u8], out: &mut Vec<f16>) {
    out.extend(
        bytes
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]])),
    );
}

impl<C: Clock, B: BlockIO, M: MetaLog> KvCache<C, B, M> {
    /// A cache of `head_dim`-wide heads over `store`, which must have the KV layout for
    /// that head dimension (blocks of whole token positions, 2-byte Tier0 elements).
    /// Every tensor of the collection named `L{layer}.H{head}.{k|v}` is picked up: its
    /// token count comes from its last block's shape, its partial tail is loaded into
    /// memory and pinned.
    ///
    /// Keys follow the collection's persisted RoPE spec
    /// ([`crate::CollectionConfig::rope`]): with one, appends take keys before RoPE and
    /// reads return them after it; [`KvCache::open`] also checks the spec.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] if the geometry does not fit `head_dim` (or its RoPE
    /// spec rotates more channels than `head_dim`), or a stored KV tensor is not f16 of
    /// shape `[tokens, head_dim]`; read errors of the tail blocks.
    pub fn new(store: TensorStore<C, B, M>, head_dim: u32) -> Result<Self> {
        let rope = store.geometry().rope;
        Self::open(store, head_dim, rope)
    }

    /// [`KvCache::new`], checking that the collection was created with RoPE spec `rope`
    /// (`None`: a cache of post-RoPE keys). A store opened for a new collection with
    /// `StoreConfig::collection.rope = rope` passes; an existing collection keeps the
    /// spec it was created with.
    ///
    /// # Errors
    /// [`StoreErr::RopeMismatch`] if the persisted spec differs; as [`KvCache::new`].
    pub fn open(
        store: TensorStore<C, B, M>,
        head_dim: u32,
        rope: Option<RopeSpec>,
    ) -> Result<Self> {
        let geo = *store.geometry();
        if geo.rope != rope {
            return Err(StoreErr::RopeMismatch {
                stored: geo.rope,
                requested: rope,
            });
        }
        if let Some(r) = rope {
            r.validate(Some(head_dim))?;
        }
        if head_dim == 0 || !geo.block_elems.is_multiple_of(head_dim) || geo.tier0_elem_bytes < 2 {
            return Err(StoreErr::InvalidArgument {
                field: "head_dim",
                reason: format!(
                    "{head_dim} does not fit the collection's blocks of {} elements ({}-byte \
                     Tier0 elements); create it with CollectionConfig::kv_cache({head_dim})",
                    geo.block_elems, geo.tier0_elem_bytes
                ),
            });
        }
        let cache = Self {
            tokens_per_block: geo.block_elems / head_dim,
            head_dim,
            rope,
            rope_table: rope.map(rope_table::RopeTable::new),
            tails: Mutex::new(HashMap::new()),
            store,
        };
        cache.load_existing()?;
        Ok(cache)
    }

    /// Find the KV tensors already stored, load their tails and pin them.
    fn load_existing(&self) -> Result<()> {
        let mut last: BTreeMap<u128, u32> = BTreeMap::new();
        for m in self.store.blocks()? {
            let e = last.entry(m.key.tensor_id).or_insert(0);
            *e = (*e).max(m.key.block_index);
        }
        let names: Vec<(u128, String)> = {
            let w = self.store.lock_writer_for_read()?;
            last.keys()
                .filter_map(|id| w.catalog.name(*id).map(|n| (*id, n.to_owned())))
                .collect()
        };
        let mut tails = self.tails.lock().map_err(poisoned)?;
        for (id, name) in names {
            let Some(slot) = KvSlot::parse(&name) else {
                continue;
            };
            if id != self.store.tensor_id_of(&name) {
                continue; // a lineage child of the same name, not ours
            }
            let key = BlockKey::new(id, last[&id]);
            let Some(meta) = self.store.meta(&key)? else {
                continue;
            };
            let bad = |reason: String| StoreErr::InvalidArgument {
                field: "kv tensor",
                reason: format!("{name}: {reason}"),
            };
            let (&[tokens, hd], DType::F16) = (meta.shape(), meta.dtype) else {
                return Err(bad(format!(
                    "{} {:?} is not f16 [tokens, head_dim]",
                    meta.dtype,
                    meta.shape()
                )));
            };
            if hd != self.head_dim {
                return Err(bad(format!(
                    "head_dim {hd}, the cache has {}",
                    self.head_dim
                )));
            }
            let tokens = u64::from(tokens);
            let tpb = u64::from(self.tokens_per_block);
            if tokens.div_ceil(tpb) != u64::from(key.block_index) + 1 {
                return Err(bad(format!(
                    "last block {} does not hold token {} of {tokens}",
                    key.block_index,
                    tokens.saturating_sub(1)
                )));
            }
            let mut values = Vec::new();
            let partial = (tokens % tpb) as usize * self.head_dim as usize;
            if partial > 0 {
                let mut bytes = Vec::new();
                self.store.read_elements(&meta, &mut bytes)?;
                push_f16(&bytes, &mut values);
                values.truncate(partial);
                if values.len() != partial {
                    return Err(bad(format!(
                        "tail block holds {} values, expected {partial}",
                        values.len()
                    )));
                }
                self.store.pin_block(key)?;
            }
            tails.insert(slot, Tail { id, tokens, values });
        }
        Ok(())
    }

    /// The store underneath (for `maintain`, statistics, flushing).
    #[must_use]
    pub fn store(&self) -> &TensorStore<C, B, M> {
        &self.store
    }

    /// Give the store back (its pins stay until it is closed).
    #[must_use]
    pub fn into_store(self) -> TensorStore<C, B, M> {
        self.store
    }

    /// The RoPE spec keys are stored under (`None`: keys are stored as given).
    #[must_use]
    pub fn rope(&self) -> Option<RopeSpec> {
        self.rope
    }

    /// Values per token position.
    #[must_use]
    pub fn head_dim(&self) -> u32 {
        self.head_dim
    }

    /// Token positions per block.
    #[must_use]
    pub fn tokens_per_block(&self) -> u32 {
        self.tokens_per_block
    }

    /// The tensor id of `slot`.
    #[must_use]
    pub fn tensor_id(&self, slot: KvSlot) -> u128 {
        self.store.tensor_id_of(&slot.name())
    }

    /// The key of block `block_index` of `slot` (tokens `block_index * tokens_per_block`
    /// onwards).
    #[must_use]
    pub fn block_key(&self, slot: KvSlot, block_index: u32) -> BlockKey {
        BlockKey::new(self.tensor_id(slot), block_index)
    }

    /// Every slot with at least one token, sorted.
    ///
    /// # Errors
    /// Only if a thread panicked while holding the cache lock.
    pub fn slots(&self) -> Result<Vec<KvSlot>> {
        let mut v: Vec<KvSlot> = self
            .tails
            .lock()
            .map_err(poisoned)?
            .keys()
            .copied()
            .collect();
        v.sort();
        Ok(v)
    }

    /// Pin block `block_index` of `slot`: tiering leaves it in its tier (see
    /// [`TensorStore::pin_block`]). Returns whether it was not pinned yet.
    ///
    /// # Errors
    /// [`StoreErr::NotFound`] if `slot` has no such block (the store's `pin_block`
    /// accepts keys of blocks still to be written; a cache user pins what exists).
    pub fn pin(&self, slot: KvSlot, block_index: u32) -> Result<bool> {
        let key = self.block_key(slot, block_index);
        if self.store.meta(&key)?.is_none() {
            return Err(StoreErr::NotFound { key, tier: None });
        }
        self.store.pin_block(key)
    }

    /// Remove the pin of block `block_index` of `slot`; returns whether it was pinned
    /// (false for a block that does not exist).
    ///
    /// # Errors
    /// Only if a thread panicked while holding the index lock.
    pub fn unpin(&self, slot: KvSlot, block_index: u32) -> Result<bool> {
        self.store.unpin_block(&self.block_key(slot, block_index))
    }

    /// Token positions stored for `slot` (0 if none).
    ///
    /// # Errors
    /// Only if a thread panicked while holding the cache lock.
    pub fn tokens(&self, slot: KvSlot) -> Result<u64> {
        Ok(self
            .tails
            .lock()
            .map_err(poisoned)?
            .get(&slot)
            .map_or(0, |t| t.tokens))
    }

    /// Append `values` (a whole number of token positions, `head_dim` values each,
    /// row-major) to `slot`; returns its new token count. See
    /// [`KvCache::append_batch`].
    ///
    /// # Errors
    /// As [`KvCache::append_batch`].
    pub fn append(&self, slot: KvSlot, values: &[f16]) -> Result<u64> {
        self.append_batch(&[(slot, values)])?;
        self.tokens(slot)
    }

    /// Append to several slots at once (a decode step: every head of a layer, or of the
    /// model). The partial tail block of each slot is rewritten in Tier0 and every block
    /// an append fills is written too, all as one batch of the store (one log append and,
    /// per the durability policy, one sync). All or nothing: on error no slot changes.
    /// A slot may appear more than once; its appends apply in order.
    ///
    /// Values must be finite: a NaN or infinity (e.g. an f32 beyond ±65504 cast to f16)
    /// could never be quantized, so it is refused here (`crate::finite`).
    ///
    /// # Errors
    /// [`StoreErr::NonFiniteKv`] naming the slot's layer, head and token position of the
    /// first NaN or infinite value (nothing is written);
    /// [`StoreErr::InvalidArgument`] for an empty append, a length that is not a whole
    /// number of token positions, or more than 2^32 - 1 tokens in a tensor;
    /// [`StoreErr::InvalidName`] for a name the catalog refuses; the write errors of
    /// [`TensorStore::put_block`] (e.g. [`StoreErr::CapacityExceeded`], [`StoreErr::Io`]).
    pub fn append_batch(&self, items: &[(KvSlot, &[f16])]) -> Result<()> {
        let hd = self.head_dim as usize;
        for (slot, values) in items {
            if values.is_empty() || values.len() % hd != 0 {
                return Err(StoreErr::InvalidArgument {
                    field: "values",
                    reason: format!(
                        "{slot}: {} values is not a non-empty whole number of {hd}-value token positions",
                        values.len()
                    ),
                });
            }
        }
        let mut tails = self.tails.lock().map_err(poisoned)?;
        // The KV policy (`crate::finite`): NaN and infinity are refused, naming the token.
        let mut ahead: HashMap<KvSlot, u64> = HashMap::new();
        for (slot, values) in items {
            let at = ahead
                .entry(*slot)
                .or_insert_with(|| tails.get(slot).map_or(0, |t| t.tokens));
            let field = match slot.kind {
                KvKind::Key => "keys",
                KvKind::Value => "values",
            };
            crate::finite::check_kv_f16(field, slot.layer, slot.head, *at, hd, values)?;
            *at += (values.len() / hd) as u64;
        }
        // Work on copies: nothing changes unless the batch is written.
        let mut next: HashMap<KvSlot, Tail> = HashMap::new();
        let mut batch: Vec<Prepared> = Vec::new();
        // Blocks written by this batch, for pinning: slot -> (first written, new tail).
        let mut new_names: Vec<(u128, String)> = Vec::new();
        for (slot, values) in items {
            let tail = match next.get(slot).or_else(|| tails.get(slot)) {
                Some(t) => t.clone(),
                None => {
                    let name = slot.name();
                    let id = self.store.tensor_id_of(&name);
                    new_names.push((id, name));
                    Tail {
                        id,
                        tokens: 0,
                        values: Vec::new(),
                    }
                }
            };
            let t = self.extend(tail, values, slot.kind.tensor_kind(), &mut batch)?;
            next.insert(*slot, t);
        }
        // Later appends to the same slot in this batch rewrite the same tail key: keep
        // only the last write of each key (the batch is applied in order anyway, this just
        // saves the slots).
        let mut seen = std::collections::HashSet::new();
        let mut dedup: Vec<Prepared> = Vec::with_capacity(batch.len());
        for p in batch.into_iter().rev() {
            if seen.insert(p.key) {
                dedup.push(p);
            }
        }
        dedup.reverse();
        if !new_names.is_empty() {
            let mut w = self.store.lock_writer()?;
            let sync = self.store.config().durability == Durability::EveryWrite;
            for (id, name) in &new_names {
                w.catalog.insert(*id, name, sync)?;
            }
        }
        // Pin the new tails before they exist, so no maintain step can see them unpinned.
        let pin_of = |t: &Tail| {
            (!t.tokens.is_multiple_of(u64::from(self.tokens_per_block))).then(|| {
                BlockKey::new(
                    t.id,
                    ((t.tokens - 1) / u64::from(self.tokens_per_block)) as u32,
                )
            })
        };
        let mut newly_pinned = Vec::new();
        for t in next.values() {
            if let Some(k) = pin_of(t) {
                if self.store.pin_block(k)? {
                    newly_pinned.push(k);
                }
            }
        }
        if let Err(e) = self.store.write_prepared(dedup) {
            for k in &newly_pinned {
                let _ = self.store.unpin_block(k);
            }
            return Err(e);
        }
        for (slot, t) in next {
            let new_pin = pin_of(&t);
            if let Some(old) = tails.get(&slot).and_then(pin_of) {
                if Some(old) != new_pin {
                    self.store.unpin_block(&old)?;
                }
            }
            tails.insert(slot, t);
        }
        Ok(())
    }

    /// Append `values` to `tail`, pushing a prepared Tier0 block for every block touched.
    fn extend(
        &self,
        mut tail: Tail,
        values: &[f16],
        kind: TensorKind,
        batch: &mut Vec<Prepared>,
    ) -> Result<Tail> {
        let hd = self.head_dim as usize;
        let tpb = u64::from(self.tokens_per_block);
        let block_elems = self.tokens_per_block as usize * hd;
        let added = (values.len() / hd) as u64;
        let tokens = tail.tokens + added;
        let Ok(tokens32) = u32::try_from(tokens) else {
            return Err(StoreErr::InvalidArgument {
                field: "values",
                reason: format!("{tokens} tokens exceed the 2^32 - 1 of a tensor shape"),
            });
        };
        let shape = [tokens32, self.head_dim];
        let info = BlockInfo::new(DType::F16, &shape).with_kind(kind);
        let mut block = (tail.tokens / tpb) as u32;
        let mut rest = values;
        while !rest.is_empty() {
            let take = (block_elems - tail.values.len()).min(rest.len());
            tail.values.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            let key = BlockKey::new(tail.id, block);
            batch.push(
                self.store
                    .prepare(key, Tier::Tier0, &info, &le_bytes(&tail.values))?,
            );
            if tail.values.len() == block_elems {
                tail.values.clear(); // sealed
                block += 1;
            }
        }
        tail.tokens = tokens;
        Ok(tail)
    }

    /// Read token positions `range` of `slot` into `out` (replaced), `head_dim` values
    /// per position. Only the blocks covering the range are read, each dequantized from
    /// whatever tier it is in (exact in Tier0); every block read counts as an access for
    /// tiering. Keys of a cache with a RoPE spec are returned after RoPE for their token
    /// positions (rounded to f16 once, after the rotation).
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] if the range is not within `0..tokens(slot)`; the
    /// errors of [`TensorStore::get_block`]; [`StoreErr::InvalidArgument`] if a block
    /// holds fewer positions than the cache expects (written behind the cache's back).
    pub fn read_into(&self, slot: KvSlot, range: Range<u64>, out: &mut Vec<f16>) -> Result<()> {
        out.clear();
        let (id, tokens) = match self.tails.lock().map_err(poisoned)?.get(&slot) {
            Some(t) => (t.id, t.tokens),
            None => (0, 0),
        };
        if range.start > range.end || range.end > tokens {
            return Err(StoreErr::InvalidArgument {
                field: "range",
                reason: format!("{slot}: tokens {range:?} not within 0..{tokens}"),
            });
        }
        if range.is_empty() {
            return Ok(());
        }
        let hd = self.head_dim as usize;
        let tpb = u64::from(self.tokens_per_block);
        out.reserve((range.end - range.start) as usize * hd);
        let mut bytes = Vec::new();
        for b in range.start / tpb..=(range.end - 1) / tpb {
            let key = BlockKey::new(id, b as u32);
            self.store.get_block(&key, &mut bytes)?;
            let first = b * tpb;
            let lo = (range.start.max(first) - first) as usize * hd * 2;
            let hi = (range.end.min(first + tpb) - first) as usize * hd * 2;
            let Some(rows) = bytes.get(lo..hi) else {
                return Err(StoreErr::InvalidArgument {
                    field: "kv tensor",
                    reason: format!(
                        "{slot}: block {b} holds {} bytes, the cache expects at least {hi}",
                        bytes.len()
                    ),
                });
            };
            push_f16(rows, out);
        }
        if let (Some(r), KvKind::Key) = (&self.rope_table, slot.kind) {
            // Slice conversions (vectorized where the CPU has F16C; the same values).
            let mut x = vec![0f32; out.len()];
            out.convert_to_f32_slice(&mut x);
            r.apply(&mut x, hd, range.start)?;
            out.convert_from_f32_slice(&x);
        }
        Ok(())
    }

    /// Block `block_index` of `slot` as stored (dequantized from its tier; keys of a
    /// cache with a RoPE spec before RoPE) into `out` (replaced), with its metadata,
    /// *without* counting an access: for checks and tools
    /// that must not disturb tiering. A corrupt block is reported, not healed.
    ///
    /// # Errors
    /// [`StoreErr::NotFound`]; [`StoreErr::Corruption`]; [`StoreErr::Decode`];
    /// [`StoreErr::Io`].
    pub fn peek_block(
        &self,
        slot: KvSlot,
        block_index: u32,
        out: &mut Vec<f16>,
    ) -> Result<crate::types::BlockMeta> {
        out.clear();
        let key = self.block_key(slot, block_index);
        let mut bytes = Vec::new();
        let meta = {
            // Hold the index lock so the slot cannot be freed and reused under the read.
            let idx = self.store.read_index()?;
            let meta = idx
                .get(&key)
                .ok_or(StoreErr::NotFound { key, tier: None })?;
            self.store.read_elements(&meta, &mut bytes)?;
            meta
        };
        push_f16(&bytes, out);
        Ok(meta)
    }

    /// [`KvCache::read_into`] into a new vector.
    ///
    /// # Errors
    /// As [`KvCache::read_into`].
    pub fn read(&self, slot: KvSlot, range: Range<u64>) -> Result<Vec<f16>> {
        let mut out = Vec::new();
        self.read_into(slot, range, &mut out)?;
        Ok(out)
    }
}
