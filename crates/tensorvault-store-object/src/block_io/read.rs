//! The read side of [`ObjectBlockIO`]: the in-flight buffer, the local cache, then one
//! ranged GET (with read-ahead into the cache for packs).

use bytes::Bytes;
use tensorvault_core::checksum::crc32c;
use tensorvault_store::{BlockKey, Result, StoreErr, Tier};

use super::ObjectBlockIO;
use crate::error::OResult;
use crate::frame;
use crate::manifest::{Layout, PACK_SLOTS};

impl ObjectBlockIO {
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

    /// [`tensorvault_store::BlockIO::with_block`]: call `f` with the `len` payload bytes
    /// of the block at `offset`, checked against the object trailer.
    pub(super) fn read_slot(
        &self,
        tier: Tier,
        key: BlockKey,
        offset: u64,
        len: u32,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<()> {
        // As every BlockIO: a bad argument is InvalidArgument naming it, a slot start
        // this backend never handed out is NotFound.
        let sl = self.slot_len[tier.index()];
        if !offset.is_multiple_of(u64::from(sl)) || offset.checked_add(u64::from(len)).is_none() {
            return Err(StoreErr::InvalidArgument {
                field: "offset",
                reason: format!("{offset} is not a slot start of {tier} ({sl}-byte slots)"),
            });
        }
        if len > sl {
            return Err(StoreErr::InvalidArgument {
                field: "len",
                reason: format!("{len} bytes, a {tier} slot holds {sl}"),
            });
        }
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
}
