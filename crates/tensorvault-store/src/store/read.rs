//! The read path: index lookup, slot read, CRC32C check, decode, access tracking.

use std::sync::atomic::Ordering;

use tensorvault_core::checksum::crc32c;

use crate::block_io::BlockIO;
use crate::centre::Centre;
use crate::clock::Clock;
use crate::codec;
use crate::error::{Result, StoreErr};
use crate::meta_log::MetaLog;
use crate::types::{BlockKey, BlockMeta};

use super::TensorStore;

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// Read and verify the stored payload of `meta`, then call `f` with it.
    fn with_verified<R>(&self, meta: &BlockMeta, f: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        let mut f = Some(f);
        let mut out: Option<Result<R>> = None;
        self.io.with_block(
            meta.tier,
            meta.key,
            meta.data_offset,
            meta.data_len,
            &mut |b| {
                let actual = crc32c(b);
                out = Some(if actual != meta.checksum {
                    Err(StoreErr::Corruption {
                        key: meta.key,
                        tier: meta.tier,
                        offset: meta.data_offset,
                        expected: meta.checksum,
                        actual,
                    })
                } else if let Some(f) = f.take() {
                    f(b)
                } else {
                    Err(StoreErr::InvalidArgument {
                        field: "block_io",
                        reason: "with_block called its callback twice".into(),
                    })
                });
            },
        )?;
        let r = out.unwrap_or_else(|| {
            Err(StoreErr::InvalidArgument {
                field: "block_io",
                reason: "with_block never called its callback".into(),
            })
        });
        if matches!(r, Err(StoreErr::Corruption { .. })) {
            self.counters
                .checksum_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(key = %meta.key, tier = %meta.tier, offset = meta.data_offset, "CHECKSUM_MISMATCH");
        }
        r
    }

    /// Decode a verified quantized payload into little-endian element bytes of the
    /// block's dtype.
    fn decode_quantized(
        &self,
        meta: &BlockMeta,
        payload: &[u8],
        out: &mut Vec<u8>,
        centre: Option<&Centre>,
    ) -> Result<()> {
        out.clear();
        let mut vals = Vec::new();
        codec::decode_quantized(payload, self.geo.block_elems as usize, &mut vals).map_err(
            |source| StoreErr::Decode {
                key: meta.key,
                tier: meta.tier,
                source,
            },
        )?;
        if let Some(c) = centre {
            let start = u64::from(meta.key.block_index) * u64::from(self.geo.block_elems);
            if let Err(i) = c.add(&mut vals, start) {
                // Only a crafted side record or block gets here (writers keep both
                // within 2^125 and 2^126): never return a non-finite value.
                let col = c.column(start, i);
                return Err(StoreErr::BadCentre {
                    tensor: format!("{:032x}", meta.key.tensor_id),
                    field: "mean",
                    offset: (col * crate::centre::MEAN_ELEM_BYTES) as u64,
                    reason: format!(
                        "value {col} plus the decoding of block {} value {i} leaves the f32 range",
                        meta.key.block_index
                    ),
                });
            }
        }
        codec::from_f32(meta.dtype, &vals, out)?;
        Ok(())
    }

    /// Verified, decoded element bytes of a block, without access tracking. A quantized
    /// block of a centred tensor decodes to its values less the mean row here: readers
    /// of such blocks use [`TensorStore::read_elements_centred`].
    pub(crate) fn read_elements(&self, meta: &BlockMeta, out: &mut Vec<u8>) -> Result<()> {
        self.read_elements_centred(meta, out, None)
    }

    /// [`TensorStore::read_elements`] adding `centre`'s mean row to a quantized block's
    /// decoded values (Tier0 payloads hold the original values and are returned as
    /// stored).
    pub(crate) fn read_elements_centred(
        &self,
        meta: &BlockMeta,
        out: &mut Vec<u8>,
        centre: Option<&Centre>,
    ) -> Result<()> {
        if meta.tier.is_quantized() {
            return self.with_verified(meta, |b| self.decode_quantized(meta, b, out, centre));
        }
        self.read_raw_verified(meta, out)
    }

    /// A raw (Tier0) payload: one pass over the mapped slot copies it into `out`, then the
    /// CRC32C is computed over the copy, which is hot in L1 (a 16 KiB block fits): the
    /// slot's bytes come from memory once, and the checksum covers exactly the bytes
    /// returned. On a mismatch `out` is cleared.
    pub(super) fn read_raw_verified(&self, meta: &BlockMeta, out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        let mut called = false;
        self.io.with_block(
            meta.tier,
            meta.key,
            meta.data_offset,
            meta.data_len,
            &mut |b| {
                if !called {
                    out.extend_from_slice(b);
                    called = true;
                }
            },
        )?;
        if !called {
            return Err(StoreErr::InvalidArgument {
                field: "block_io",
                reason: "with_block never called its callback".into(),
            });
        }
        let actual = crc32c(out);
        if actual != meta.checksum {
            out.clear();
            self.counters
                .checksum_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(key = %meta.key, tier = %meta.tier, offset = meta.data_offset, "CHECKSUM_MISMATCH");
            return Err(StoreErr::Corruption {
                key: meta.key,
                tier: meta.tier,
                offset: meta.data_offset,
                expected: meta.checksum,
                actual,
            });
        }
        if !out.len().is_multiple_of(meta.dtype.size()) {
            let input = out.len();
            out.clear();
            return Err(StoreErr::Decode {
                key: meta.key,
                tier: meta.tier,
                source: tensorvault_quant::QuantError::LengthMismatch {
                    what: "raw block (not a whole number of elements)",
                    input,
                    output: input / meta.dtype.size() * meta.dtype.size(),
                },
            });
        }
        Ok(())
    }

    /// Read one block: verify its CRC32C, decode it to little-endian elements of its
    /// dtype (dequantizing quantized tiers) into `out` (replaced), record the access.
    /// Returns the block's metadata as of the read. A `Delta` / `Factor` block whose
    /// checksum fails is rebuilt from its lineage and repaired in place (see
    /// `src/reconstruct.rs`); the metadata returned is then the repaired one.
    ///
    /// # Errors
    /// [`StoreErr::NotFound`]; [`StoreErr::Corruption`] (checksum mismatch, and no
    /// usable lineage); [`StoreErr::LineageTooDeep`] / [`StoreErr::LineageCycle`];
    /// [`StoreErr::Decode`]; [`StoreErr::Io`].
    pub fn get_block(&self, key: &BlockKey, out: &mut Vec<u8>) -> Result<BlockMeta> {
        let (meta, read) = {
            let idx = self.read_index()?;
            let meta = idx.get(key).ok_or(StoreErr::NotFound {
                key: *key,
                tier: None,
            })?;
            let centre = self.centre_of(&idx, &meta);
            let read = centre.and_then(|c| self.read_elements_centred(&meta, out, c.as_ref()));
            (meta, read)
        };
        let meta = match read {
            Ok(()) => meta,
            // Rehydrate from the lineage and repair the slot (src/reconstruct.rs).
            Err(e @ StoreErr::Corruption { .. }) => self.heal_block(&meta, e, out)?,
            Err(e) => return Err(e),
        };
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_read
            .fetch_add(u64::from(meta.data_len), Ordering::Relaxed);
        self.note_access(key)?;
        Ok(meta)
    }

    /// Read one block's stored payload (the raw slot bytes, checksum verified) without
    /// decoding it; records the access.
    ///
    /// # Errors
    /// As [`TensorStore::get_block`].
    pub fn get_payload(&self, key: &BlockKey, out: &mut Vec<u8>) -> Result<BlockMeta> {
        let meta = {
            let idx = self.read_index()?;
            let meta = idx.get(key).ok_or(StoreErr::NotFound {
                key: *key,
                tier: None,
            })?;
            self.with_verified(&meta, |b| {
                out.clear();
                out.extend_from_slice(b);
                Ok(())
            })?;
            meta
        };
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        self.note_access(key)?;
        Ok(meta)
    }
}
