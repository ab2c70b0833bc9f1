//! The write side of [`ObjectBlockIO`]: slot-number reservations in the manifest, packs,
//! background uploads, in-place repairs.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use tensorvault_store::{Result, StoreErr, Tier};

use super::{
    block_key, lock, pack_key, ObjectBlockIO, OpenPack, TierAlloc, FIRST_RESERVE, MAX_RESERVE,
};
use crate::error::ObjectErr;
use crate::frame;
use crate::manifest::{Layout, PACK_SLOTS};

impl ObjectBlockIO {
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
    pub(super) fn seal_pack(&self, tier: Tier, a: &mut TierAlloc) {
        if let Some(p) = a.open.take() {
            if !p.slots.is_empty() {
                self.spawn_upload(tier, pack_key(tier, p.pack), p.slots, Bytes::from(p.buf));
            }
        }
    }

    /// Allocate a slot for a write and queue its upload (or add it to the open pack).
    pub(super) fn allocate(&self, tier: Tier, bytes: &Bytes) -> Result<u64> {
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

    /// Overwrite the block at `offset` in place (repair of a corrupt block): the object,
    /// or its entry in the pack (read-modify-write of the whole pack).
    pub(super) fn rewrite(&self, tier: Tier, offset: u64, src: &[u8]) -> Result<()> {
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
        // The block may still be in flight (written, not yet synced; in a pack not yet
        // sealed): finish every upload first, so the repaired object is not overwritten by
        // the original upload afterwards and reads do not keep serving the old bytes.
        tensorvault_store::BlockIO::sync(self)?;
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
}
