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
use tensorvault_store::block_io::TierUsage;
use tensorvault_store::{BlockIO, BlockKey, CollectionConfig, Result, StoreErr, Tier};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::cache::BlockCache;
use crate::collection::Collection;
use crate::error::{OResult, ObjectErr};
use crate::frame;
use crate::manifest::{Layout, PACK_SLOTS};

mod read;
mod write;

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
            // With extent allocation a block may exceed the worst-case slot up to the
            // tier's cap where objects are payload-sized anyway (`objects`); packs keep
            // their slot stride (a cap-sized stride would pad every block to the cap).
            slot_len: Tier::ALL.map(|t| match coll.manifest().layout {
                Layout::Objects => geo.max_block_len(t).max(1),
                Layout::Packs => geo.slot_len(t).max(1),
            }),
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
        if !offset.is_multiple_of(sl) || offset / sl >= hwm {
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

    fn location(&self, tier: Tier, slot: u64) -> (String, u64) {
        block_location(self.layout, tier, slot, self.slot_len[tier.index()])
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
        self.rewrite(tier, offset, src)
    }

    fn with_block(
        &self,
        tier: Tier,
        key: BlockKey,
        offset: u64,
        len: u32,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<()> {
        self.read_slot(tier, key, offset, len, f)
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

    fn reset_allocation(&self, live: &mut dyn Iterator<Item = (Tier, u64, u32)>) -> Result<()> {
        let mut counts = [0u64; 4];
        let mut packs: HashMap<(u8, u64), u32> = HashMap::new();
        let hwm = self.hwm.each_ref().map(|h| h.load(Ordering::Acquire));
        for (tier, offset, _len) in live {
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
                    let path = self.coll.url(&format!("t{}", id.0));
                    first_err.get_or_insert(
                        ObjectErr::Task {
                            op: "put",
                            path,
                            source: join,
                        }
                        .into_store("put"),
                    );
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
            alloc_unit: sl,
            slots,
            free_slots: 0,
            live_bytes: slots.saturating_mul(u64::from(sl)),
            bytes: slots.saturating_mul(u64::from(sl)),
            allocated_bytes: slots.saturating_mul(u64::from(sl)),
        }
    }
}
