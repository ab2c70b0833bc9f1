//! [`ObjectBlockIO`]: one object per block, `blocks/t<tier>/<slot:012x>`, holding the
//! payload and the object trailer. The slot number (offset / slot length) names the
//! object; numbers come from ranges reserved in the manifest by a conditional commit, so
//! a number is never handed out twice (two writers cannot overwrite each other's blocks,
//! a stale writer fails at its first reservation) and a block object never changes
//! after its write (the cache can never hold a stale copy).
//!
//! Writes are uploaded in the background (bounded concurrency) and [`BlockIO::sync`]
//! waits for them, so a batch of blocks costs one round trip, not one per block. Reads
//! go to the in-flight buffer, then the local cache, then one ranged GET of exactly
//! `len + trailer` bytes. Freed objects are deleted only after the next manifest commit
//! (by then the records that freed them are durable).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use bytes::Bytes;
use tensorvault_core::checksum::crc32c;
use tensorvault_store::block_io::TierUsage;
use tensorvault_store::{BlockIO, BlockKey, CollectionConfig, Result, StoreErr, Tier};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::cache::BlockCache;
use crate::collection::Collection;
use crate::error::{OResult, ObjectErr};
use crate::frame;
use crate::manifest::{Layout, PACK_SLOTS};

/// Slot numbers reserved by the first reservation of a session; doubled on each later
/// one up to [`MAX_RESERVE`].
const FIRST_RESERVE: u64 = 256;
/// Largest reservation.
const MAX_RESERVE: u64 = 1 << 16;

/// The pack being filled (layout [`Layout::Packs`]).
struct OpenPack {
    pack: u64,
    buf: Vec<u8>,
    slots: Vec<u64>,
}

/// Allocation state of one tier.
#[derive(Default)]
struct TierAlloc {
    /// The pack being filled.
    open: Option<OpenPack>,
    /// Next slot number to hand out and the end of the reserved range.
    next: u64,
    end: u64,
    /// Size of the last reservation.
    last_reserve: u64,
    /// Live blocks (after `reset_allocation`).
    live: u64,
    /// `reset_allocation` ran.
    reset: bool,
}

/// An upload in flight: tier, the slots it carries, the task.
type Upload = (u8, Vec<u64>, JoinHandle<OResult<()>>);

/// Block payloads as immutable objects. See the module docs.
pub struct ObjectBlockIO {
    coll: Arc<Collection>,
    slot_len: [u32; 4],
    /// Per tier, the manifest's `next_slot` as this session knows it.
    hwm: [AtomicU64; 4],
    tiers: [Mutex<TierAlloc>; 4],
    /// Blocks written but not yet synced, readable meanwhile.
    pending: RwLock<HashMap<(u8, u64), Bytes>>,
    uploads: Mutex<Vec<Upload>>,
    limit: Arc<Semaphore>,
    cache: Option<BlockCache>,
    write_through: bool,
    layout: Layout,
    /// Entries fetched per cache miss (layout [`Layout::Packs`] with a cache).
    readahead: u32,
    /// Live blocks per (tier, pack) (layout [`Layout::Packs`]).
    pack_live: Mutex<HashMap<(u8, u64), u32>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Key of the object of `slot` in `tier` (layout [`Layout::Objects`]), relative to the
/// collection directory.
#[must_use]
pub fn block_key(tier: Tier, slot: u64) -> String {
    format!("blocks/t{}/{slot:012x}", tier as u8)
}

/// Key of pack `pack` of `tier` (layout [`Layout::Packs`]).
#[must_use]
pub fn pack_key(tier: Tier, pack: u64) -> String {
    format!("packs/t{}/{pack:010x}", tier as u8)
}

/// Where the framed bytes of `slot` live: (object key, byte offset in it).
#[must_use]
pub fn block_location(layout: Layout, tier: Tier, slot: u64, slot_len: u32) -> (String, u64) {
    match layout {
        Layout::Objects => (block_key(tier, slot), 0),
        Layout::Packs => (
            pack_key(tier, slot / PACK_SLOTS),
            (slot % PACK_SLOTS) * (u64::from(slot_len) + frame::TRAILER_LEN as u64),
        ),
    }
}

impl ObjectBlockIO {
    pub(crate) fn new(
        coll: Arc<Collection>,
        geo: &CollectionConfig,
        cache: Option<BlockCache>,
        write_through: bool,
        concurrency: usize,
        readahead: u32,
    ) -> Self {
        Self {
            slot_len: Tier::ALL.map(|t| geo.slot_len(t).max(1)),
            hwm: coll.manifest().next_slot.map(AtomicU64::new),
            layout: coll.manifest().layout,
            pack_live: Mutex::new(HashMap::new()),
            readahead,
            tiers: Default::default(),
            pending: RwLock::new(HashMap::new()),
            uploads: Mutex::new(Vec::new()),
            limit: Arc::new(Semaphore::new(concurrency.max(1))),
            cache,
            write_through,
            coll,
        }
    }

    /// The shared collection (request counters, manifest).
    #[must_use]
    pub fn collection(&self) -> &Arc<Collection> {
        &self.coll
    }

    /// The local cache, if configured.
    #[must_use]
    pub fn cache(&self) -> Option<&BlockCache> {
        self.cache.as_ref()
    }

    fn slot_of(&self, tier: Tier, offset: u64) -> Result<u64> {
        let sl = u64::from(self.slot_len[tier.index()]);
        let hwm = self.hwm[tier.index()].load(Ordering::Acquire);
        if offset % sl != 0 || offset / sl >= hwm {
            return Err(StoreErr::InvalidArgument {
                field: "offset",
                reason: format!(
                    "{offset} is not a slot start below {tier}'s high-water mark of {hwm} slots"
                ),
            });
        }
        Ok(offset / sl)
    }

    fn cache_name(tier: Tier, slot: u64) -> String {
        format!("t{}-{slot:012x}", tier as u8)
    }

    /// Reserve more slot numbers for `tier` in the manifest.
    fn reserve(&self, tier: Tier, a: &mut TierAlloc) -> Result<()> {
        let n = if a.last_reserve == 0 {
            FIRST_RESERVE
        } else {
            (a.last_reserve * 2).min(MAX_RESERVE)
        };
        let i = tier.index();
        let mut start = 0;
        self.coll
            .commit(|m| {
                start = m.next_slot[i];
                if m.layout == Layout::Packs {
                    start = start.div_ceil(PACK_SLOTS) * PACK_SLOTS;
                }
                m.next_slot[i] = start.saturating_add(n);
            })
            .map_err(|e| e.into_store("reserve slots"))?;
        a.next = start;
        a.end = start + n;
        self.hwm[i].fetch_max(a.end, Ordering::AcqRel);
        a.last_reserve = n;
        Ok(())
    }

    fn spawn_upload(&self, tier: Tier, key: String, slots: Vec<u64>, bytes: Bytes) {
        let limit = Arc::clone(&self.limit);
        let put = self.coll.put_task(&key, bytes);
        let h = self.coll.rt.spawn(async move {
            let _permit = limit.acquire_owned().await;
            put.await
        });
        lock(&self.uploads).push((tier as u8, slots, h));
    }

    /// Upload the pack being filled in `a` (if any).
    fn seal_pack(&self, tier: Tier, a: &mut TierAlloc) {
        if let Some(p) = a.open.take() {
            if !p.slots.is_empty() {
                self.spawn_upload(tier, pack_key(tier, p.pack), p.slots, Bytes::from(p.buf));
            }
        }
    }

    fn location(&self, tier: Tier, slot: u64) -> (String, u64) {
        block_location(self.layout, tier, slot, self.slot_len[tier.index()])
    }

    fn fetch(&self, tier: Tier, slot: u64, len: u32) -> OResult<Bytes> {
        let want = u64::from(len) + frame::TRAILER_LEN as u64;
        let (key, at) = self.location(tier, slot);
        self.coll
            .rt
            .block_on(self.coll.get_range(&key, at..at + want))
    }

    /// Fetch the entry of `slot` and up to `readahead - 1` entries after it in the same
    /// pack with one ranged GET; the neighbours go into the cache (a damaged or free
    /// neighbour is simply not cached). Returns the framed bytes of `slot`.
    fn fetch_window(&self, tier: Tier, slot: u64, len: u32) -> OResult<Bytes> {
        let stride = u64::from(self.slot_len[tier.index()]) + frame::TRAILER_LEN as u64;
        let first = slot % PACK_SLOTS;
        let last = (first + u64::from(self.readahead)).min(PACK_SLOTS);
        let (key, at) = self.location(tier, slot);
        let want = u64::from(len) + frame::TRAILER_LEN as u64;
        let end = at + (last - first - 1) * stride + stride;
        let b = self.coll.rt.block_on(self.coll.get_range(&key, at..end))?;
        let own = b.slice(..(want as usize).min(b.len()));
        if let Some(c) = &self.cache {
            for k in 1..(last - first) {
                let start = (k * stride) as usize;
                let Some(region) = b.get(start..(start + stride as usize).min(b.len())) else {
                    break;
                };
                // The entry ends at the last non-zero byte (the trailer's magic).
                let Some(e) = region.iter().rposition(|&x| x != 0) else {
                    continue;
                };
                let entry = &region[..=e];
                if frame::check(entry).is_ok() {
                    c.put(&Self::cache_name(tier, slot + k), entry);
                }
            }
        }
        Ok(own)
    }

    /// Allocate a slot for a write and queue its upload (or add it to the open pack).
    fn allocate(&self, tier: Tier, bytes: &Bytes) -> Result<u64> {
        let mut a = lock(&self.tiers[tier.index()]);
        if self.layout == Layout::Packs && a.open.is_none() {
            // A new pack starts on a pack boundary; the rest of a sealed pack's numbers
            // are skipped (never reused).
            a.next = a.next.div_ceil(PACK_SLOTS) * PACK_SLOTS;
            if a.next >= a.end {
                self.reserve(tier, &mut a)?;
            }
            a.open = Some(OpenPack {
                pack: a.next / PACK_SLOTS,
                buf: Vec::new(),
                slots: Vec::new(),
            });
        } else if a.next == a.end {
            self.reserve(tier, &mut a)?;
        }
        let slot = a.next;
        a.next += 1;
        a.live += 1;
        if self.layout == Layout::Objects {
            drop(a);
            self.spawn_upload(tier, block_key(tier, slot), vec![slot], bytes.clone());
            return Ok(slot);
        }
        let stride = u64::from(self.slot_len[tier.index()]) + frame::TRAILER_LEN as u64;
        let Some(p) = a.open.as_mut() else {
            return Ok(slot);
        };
        let at = ((slot % PACK_SLOTS) * stride) as usize;
        p.buf.resize(at, 0);
        p.buf.extend_from_slice(bytes);
        p.slots.push(slot);
        let pack = p.pack;
        *lock(&self.pack_live).entry((tier as u8, pack)).or_insert(0) += 1;
        if slot % PACK_SLOTS == PACK_SLOTS - 1 {
            self.seal_pack(tier, &mut a);
        }
        Ok(slot)
    }
}

impl BlockIO for ObjectBlockIO {
    fn slot_len(&self, tier: Tier) -> u32 {
        self.slot_len[tier.index()]
    }

    fn write_block(&self, tier: Tier, _key: BlockKey, src: &[u8]) -> Result<(u64, u32)> {
        let sl = self.slot_len[tier.index()];
        if src.len() > sl as usize {
            return Err(StoreErr::CapacityExceeded {
                tier,
                reason: format!("{} byte payload, slot holds {sl}", src.len()),
            });
        }
        if self.coll.read_only {
            return Err(ObjectErr::ReadOnly { op: "write block" }.into_store("put"));
        }
        let bytes = Bytes::from(frame::seal(src.to_vec()));
        // Readable from `pending` before the upload can finish (and be removed on sync).
        let mut pending = self
            .pending
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = self.allocate(tier, &bytes)?;
        pending.insert((tier as u8, slot), bytes.clone());
        drop(pending);
        if self.write_through {
            if let Some(c) = &self.cache {
                c.put(&Self::cache_name(tier, slot), &bytes);
            }
        }
        Ok((slot * u64::from(sl), src.len() as u32))
    }

    fn rewrite_block(&self, tier: Tier, offset: u64, src: &[u8]) -> Result<()> {
        let slot = self.slot_of(tier, offset)?;
        let sl = self.slot_len[tier.index()];
        if src.len() > sl as usize {
            return Err(StoreErr::InvalidArgument {
                field: "src",
                reason: format!("{} bytes, slot holds {sl}", src.len()),
            });
        }
        if self.coll.read_only {
            return Err(ObjectErr::ReadOnly {
                op: "rewrite block",
            }
            .into_store("put"));
        }
        let bytes = Bytes::from(frame::seal(src.to_vec()));
        let (key, at) = self.location(tier, slot);
        let c = &self.coll;
        let obj = if self.layout == Layout::Packs {
            // Read-modify-write of the whole pack (repairs are rare).
            let mut pack =
                c.rt.block_on(c.get(&key))
                    .map_err(|e| e.into_store("get"))?
                    .to_vec();
            let at = at as usize;
            if pack.len() < at + bytes.len() {
                pack.resize(at + bytes.len(), 0);
            }
            pack[at..at + bytes.len()].copy_from_slice(&bytes);
            Bytes::from(pack)
        } else {
            bytes.clone()
        };
        c.rt.block_on(c.put(&key, obj))
            .map_err(|e| e.into_store("put"))?;
        if let Some(c) = &self.cache {
            c.put(&Self::cache_name(tier, slot), &bytes);
        }
        Ok(())
    }

    fn with_block(
        &self,
        tier: Tier,
        key: BlockKey,
        offset: u64,
        len: u32,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<()> {
        let slot = self.slot_of(tier, offset).map_err(|_| StoreErr::NotFound {
            key,
            tier: Some(tier),
        })?;
        let n = len as usize;
        let pending = self
            .pending
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(tier as u8, slot))
            .cloned();
        if let Some(b) = pending {
            if let Some(body) = b.get(..n) {
                f(body);
                return Ok(());
            }
        }
        let cname = Self::cache_name(tier, slot);
        if let Some(c) = &self.cache {
            if let Some(b) = c.get(&cname) {
                match frame::check(&b) {
                    Ok(body) if body.len() == n => {
                        f(body);
                        return Ok(());
                    }
                    _ => {
                        tracing::warn!(entry = %cname, "damaged cache entry dropped");
                        c.remove(&cname);
                    }
                }
            }
        }
        let b = if self.readahead > 1 && self.layout == Layout::Packs && self.cache.is_some() {
            self.fetch_window(tier, slot, len)
        } else {
            self.fetch(tier, slot, len)
        }
        .map_err(|e| e.into_store("get"))?;
        match frame::check(&b) {
            Ok(body) if body.len() == n => {
                if let Some(c) = &self.cache {
                    c.put(&cname, &b);
                }
                f(body);
                Ok(())
            }
            Ok(body) => Err(StoreErr::Corruption {
                key,
                tier,
                offset,
                expected: 0,
                actual: crc32c(body),
            }),
            Err(bad) => {
                tracing::warn!(object = %self.coll.url(&self.location(tier, slot).0), reason = %bad.reason, "block fails its trailer");
                Err(StoreErr::Corruption {
                    key,
                    tier,
                    offset,
                    expected: bad.expected,
                    actual: bad.actual,
                })
            }
        }
    }

    fn free_block(&self, tier: Tier, offset: u64) -> Result<()> {
        let slot = self.slot_of(tier, offset)?;
        {
            let mut a = lock(&self.tiers[tier.index()]);
            a.live = a.live.saturating_sub(1);
        }
        self.pending
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&(tier as u8, slot));
        if let Some(c) = &self.cache {
            c.remove(&Self::cache_name(tier, slot));
        }
        match self.layout {
            Layout::Objects => lock(&self.coll.freed).push(block_key(tier, slot)),
            Layout::Packs => {
                let pack = slot / PACK_SLOTS;
                // Lock order: tier, then pack_live (as in `allocate`).
                let open = lock(&self.tiers[tier.index()])
                    .open
                    .as_ref()
                    .is_some_and(|p| p.pack == pack);
                let mut live = lock(&self.pack_live);
                let n = live.entry((tier as u8, pack)).or_insert(1);
                *n = n.saturating_sub(1);
                if *n == 0 && !open {
                    live.remove(&(tier as u8, pack));
                    lock(&self.coll.freed).push(pack_key(tier, pack));
                }
            }
        }
        Ok(())
    }

    fn reset_allocation(&self, live: &mut dyn Iterator<Item = (Tier, u64)>) -> Result<()> {
        let mut counts = [0u64; 4];
        let mut packs: HashMap<(u8, u64), u32> = HashMap::new();
        let hwm = self.hwm.each_ref().map(|h| h.load(Ordering::Acquire));
        for (tier, offset) in live {
            let sl = u64::from(self.slot_len[tier.index()]);
            if offset % sl != 0 || offset / sl >= hwm[tier.index()] {
                return Err(StoreErr::InvalidArgument {
                    field: "live",
                    reason: format!("{tier} offset {offset} is not a reserved slot start"),
                });
            }
            counts[tier.index()] += 1;
            if self.layout == Layout::Packs {
                *packs
                    .entry((tier as u8, offset / sl / PACK_SLOTS))
                    .or_insert(0) += 1;
            }
        }
        *lock(&self.pack_live) = packs;
        for t in Tier::ALL {
            let mut a = lock(&self.tiers[t.index()]);
            a.live = counts[t.index()];
            a.reset = true;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        if self.layout == Layout::Packs {
            for t in Tier::ALL {
                let mut a = lock(&self.tiers[t.index()]);
                self.seal_pack(t, &mut a);
            }
        }
        let uploads = std::mem::take(&mut *lock(&self.uploads));
        if uploads.is_empty() {
            return Ok(());
        }
        let (ids, handles): (Vec<(u8, Vec<u64>)>, Vec<_>) =
            uploads.into_iter().map(|(t, s, h)| ((t, s), h)).unzip();
        let results = self.coll.rt.block_on(futures::future::join_all(handles));
        let mut first_err = None;
        let mut pending = self
            .pending
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (id, r) in ids.into_iter().zip(results) {
            match r {
                Ok(Ok(())) => {
                    for slot in &id.1 {
                        pending.remove(&(id.0, *slot));
                    }
                }
                Ok(Err(e)) => {
                    first_err.get_or_insert(e.into_store("put"));
                }
                Err(join) => {
                    first_err.get_or_insert(StoreErr::io(
                        "put",
                        self.coll.url(&format!("t{}", id.0)),
                        std::io::Error::other(join.to_string()),
                    ));
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn usage(&self, tier: Tier) -> TierUsage {
        let a = lock(&self.tiers[tier.index()]);
        let sl = self.slot_len[tier.index()];
        // Before replay the store checks every block against `bytes`: report the
        // high-water mark then; afterwards the bytes the live blocks occupy.
        let slots = if a.reset {
            a.live
        } else {
            self.hwm[tier.index()].load(Ordering::Acquire)
        };
        TierUsage {
            slot_len: sl,
            slots,
            free_slots: 0,
            bytes: slots.saturating_mul(u64::from(sl)),
            allocated_bytes: slots.saturating_mul(u64::from(sl)),
        }
    }
}
