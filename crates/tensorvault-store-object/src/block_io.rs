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

/// Slot numbers reserved by the first reservation of a session; doubled on each later
/// one up to [`MAX_RESERVE`].
const FIRST_RESERVE: u64 = 256;
/// Largest reservation.
const MAX_RESERVE: u64 = 1 << 16;

/// Allocation state of one tier.
#[derive(Default)]
struct TierAlloc {
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

type Upload = (u8, u64, JoinHandle<OResult<()>>);

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
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Key of the object of `slot` in `tier`, relative to the collection directory.
#[must_use]
pub fn block_key(tier: Tier, slot: u64) -> String {
    format!("blocks/t{}/{slot:012x}", tier as u8)
}

impl ObjectBlockIO {
    pub(crate) fn new(
        coll: Arc<Collection>,
        geo: &CollectionConfig,
        cache: Option<BlockCache>,
        write_through: bool,
        concurrency: usize,
    ) -> Self {
        Self {
            slot_len: Tier::ALL.map(|t| geo.slot_len(t).max(1)),
            hwm: coll.manifest().next_slot.map(AtomicU64::new),
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
                m.next_slot[i] = start.saturating_add(n);
            })
            .map_err(|e| e.into_store("reserve slots"))?;
        a.next = start;
        a.end = start + n;
        self.hwm[i].fetch_max(a.end, Ordering::AcqRel);
        a.last_reserve = n;
        Ok(())
    }

    fn spawn_upload(&self, tier: Tier, slot: u64, bytes: Bytes) {
        let coll = Arc::clone(&self.coll);
        let limit = Arc::clone(&self.limit);
        let key = block_key(tier, slot);
        let h = self.coll.rt.spawn(async move {
            let _permit = limit.acquire_owned().await;
            coll.put(&key, bytes).await
        });
        lock(&self.uploads).push((tier as u8, slot, h));
    }

    fn fetch(&self, tier: Tier, slot: u64, len: u32) -> OResult<Bytes> {
        let want = u64::from(len) + frame::TRAILER_LEN as u64;
        let key = block_key(tier, slot);
        self.coll.rt.block_on(self.coll.get_range(&key, 0..want))
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
        let slot = {
            let mut a = lock(&self.tiers[tier.index()]);
            if a.next == a.end {
                self.reserve(tier, &mut a)?;
            }
            a.next += 1;
            a.live += 1;
            a.next - 1
        };
        let bytes = Bytes::from(frame::seal(src.to_vec()));
        if self.write_through {
            if let Some(c) = &self.cache {
                c.put(&Self::cache_name(tier, slot), &bytes);
            }
        }
        self.pending
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((tier as u8, slot), bytes.clone());
        self.spawn_upload(tier, slot, bytes);
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
        let key = block_key(tier, slot);
        self.coll
            .rt
            .block_on(self.coll.put(&key, bytes.clone()))
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
        let b = self
            .fetch(tier, slot, len)
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
                tracing::warn!(object = %self.coll.url(&block_key(tier, slot)), reason = %bad.reason, "block object fails its trailer");
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
        lock(&self.coll.freed).push(block_key(tier, slot));
        Ok(())
    }

    fn reset_allocation(&self, live: &mut dyn Iterator<Item = (Tier, u64)>) -> Result<()> {
        let mut counts = [0u64; 4];
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
        }
        for t in Tier::ALL {
            let mut a = lock(&self.tiers[t.index()]);
            a.live = counts[t.index()];
            a.reset = true;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let uploads = std::mem::take(&mut *lock(&self.uploads));
        if uploads.is_empty() {
            return Ok(());
        }
        let (ids, handles): (Vec<(u8, u64)>, Vec<_>) =
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
                    pending.remove(&id);
                }
                Ok(Err(e)) => {
                    first_err.get_or_insert(e.into_store("put"));
                }
                Err(join) => {
                    first_err.get_or_insert(StoreErr::io(
                        "put",
                        self.coll
                            .url(&block_key(Tier::from_u8(id.0).unwrap_or(Tier::Tier0), id.1)),
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
        }
    }
}
