//! Whole tensors over blocks: split on put, join on get, listing.

use std::collections::BTreeMap;
use tensorvault_core::progress::{self, ProgressFn};

use crate::block_io::BlockIO;
use crate::catalog::validate_tensor_name;
use crate::clock::Clock;
use crate::config::Durability;
use crate::error::{Result, StoreErr};
use crate::meta_log::MetaLog;
use crate::tensor::{numel, StoredTensor, TensorInfo, MAX_UPFRONT_BYTES};
use crate::types::{tensor_id, BlockKey, BlockMeta, DType, Tier};

use super::{BlockInfo, TensorStore};

/// Blocks encoded and written per batch by `put_tensor` (bounds its memory).
const PUT_BATCH_BLOCKS: usize = 512;

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// The id of the tensor called `name` in this collection (no lineage parent).
    #[must_use]
    pub fn tensor_id_of(&self, name: &str) -> u128 {
        tensor_id(&self.tenant, &self.collection, name, 0)
    }

    /// Blocks a tensor of `shape` occupies.
    fn blocks_for(&self, shape: &[u32]) -> Result<u64> {
        let n = numel(shape).ok_or_else(|| StoreErr::InvalidArgument {
            field: "shape",
            reason: format!("{shape:?} has more than 2^64 elements"),
        })?;
        Ok(n.div_ceil(u64::from(self.geo.block_elems)))
    }

    /// Store a whole tensor: `data` holds its elements (little-endian `dtype`, row-major),
    /// split into blocks of `block_elems` elements, all written to `tier`. Blocks of an
    /// earlier, longer version of the tensor are deleted. Each block is atomic; the tensor
    /// as a whole is not (a crash mid-put can leave a mix of old and new blocks, which
    /// `get_tensor` reports as inconsistent).
    ///
    /// # Errors
    /// [`StoreErr::InvalidName`]; [`StoreErr::InvalidArgument`] if `data` does not match
    /// `shape`; the errors of [`TensorStore::put_block`].
    pub fn put_tensor(
        &self,
        name: &str,
        dtype: DType,
        shape: &[u32],
        data: &[u8],
        tier: Tier,
    ) -> Result<TensorInfo> {
        self.put_tensor_with(name, &BlockInfo::new(dtype, shape), data, tier)
    }

    /// [`TensorStore::put_tensor`] with lineage and reconstruction policy.
    ///
    /// # Errors
    /// As [`TensorStore::put_tensor`].
    pub fn put_tensor_with(
        &self,
        name: &str,
        info: &BlockInfo<'_>,
        data: &[u8],
        tier: Tier,
    ) -> Result<TensorInfo> {
        self.put_tensor_progress(name, info, data, tier, None)
    }

    /// [`TensorStore::put_tensor_with`] reporting `(bytes of data encoded and written,
    /// data.len())` to `progress` after each batch of blocks (the workspace's progress
    /// layer, `tensorvault_core::progress`).
    ///
    /// # Errors
    /// As [`TensorStore::put_tensor`].
    pub fn put_tensor_progress(
        &self,
        name: &str,
        info: &BlockInfo<'_>,
        data: &[u8],
        tier: Tier,
        progress: Option<&ProgressFn>,
    ) -> Result<TensorInfo> {
        validate_tensor_name(name)?;
        if !crate::types::STORE_DTYPES.contains(&info.dtype) {
            return Err(StoreErr::UnsupportedDType { dtype: info.dtype });
        }
        let n = numel(info.shape).unwrap_or(u64::MAX);
        let want = n.saturating_mul(info.dtype.size() as u64);
        if n == 0 || want != data.len() as u64 {
            return Err(StoreErr::InvalidArgument {
                field: "data",
                reason: format!(
                    "{} bytes for a {} tensor of shape {:?} (needs {want}, non-empty)",
                    data.len(),
                    info.dtype,
                    info.shape
                ),
            });
        }
        let id = tensor_id(&self.tenant, &self.collection, name, info.lineage_parent);
        let nblocks = self.blocks_for(info.shape)?;
        if nblocks > u64::from(u32::MAX) {
            return Err(StoreErr::InvalidArgument {
                field: "shape",
                reason: format!("{nblocks} blocks exceed the 2^32 block indices of a tensor"),
            });
        }
        let old_blocks = match self.meta(&BlockKey::new(id, 0))? {
            Some(m) => self.blocks_for(m.shape())?,
            None => 0,
        };
        {
            let mut w = self.lock_writer()?;
            w.catalog
                .insert(id, name, self.cfg.durability == Durability::EveryWrite)?;
        }
        // A centred tensor's mean row is written first: a crash before its blocks leaves
        // blocks of the earlier version whose fingerprint no longer matches, which reads
        // refuse (docs/formats/store.md, "Centred embedding tensors").
        let centre = match crate::centre::centred_width(
            &self.geo,
            info.dtype,
            info.shape,
            info.kind,
            info.reconstruct,
        ) {
            Some(d) => self.put_side_record(id, info, data, d)?,
            None => None,
        };
        let step = self.geo.block_elems as usize * info.dtype.size();
        let mut batch = Vec::with_capacity(PUT_BATCH_BLOCKS);
        let total = data.len() as u64;
        for (i, chunk) in data.chunks(step).enumerate() {
            let key = BlockKey::new(id, i as u32);
            batch.push(self.prepare_centred(key, tier, info, chunk, centre.as_ref())?);
            if batch.len() == PUT_BATCH_BLOCKS {
                self.write_prepared(std::mem::take(&mut batch))?;
                let done = ((i + 1) * step).min(data.len()) as u64;
                progress::report(progress, done, total);
            }
        }
        self.write_prepared(batch)?;
        progress::report(progress, total, total);
        let mut stale: Vec<BlockKey> = (nblocks..old_blocks)
            .map(|i| BlockKey::new(id, i as u32))
            .collect();
        if self.geo.centre && centre.is_none() {
            // An earlier, centred version's side record (no orphan).
            stale.push(super::centre::side_key(id));
        }
        if !stale.is_empty() {
            self.delete_blocks(&stale)?;
        }
        self.tensor_info(id)?.ok_or(StoreErr::TensorNotFound {
            name: name.to_owned(),
        })
    }

    /// Read a whole tensor by name (no lineage parent).
    ///
    /// # Errors
    /// [`StoreErr::TensorNotFound`] when the tensor has no block;
    /// [`StoreErr::TensorIncomplete`] when some of its blocks (block 0 included) are missing;
    /// [`StoreErr::InvalidArgument`] if blocks disagree on dtype/shape; the errors of
    /// [`TensorStore::get_block`].
    pub fn get_tensor(&self, name: &str) -> Result<StoredTensor> {
        let id = self.tensor_id_of(name);
        self.get_tensor_by_id(id).map_err(|e| match e {
            StoreErr::TensorNotFound { .. } => StoreErr::TensorNotFound {
                name: name.to_owned(),
            },
            other => Self::name_centre_err(other, name),
        })
    }

    /// Read a whole tensor by id.
    ///
    /// # Errors
    /// As [`TensorStore::get_tensor`].
    pub fn get_tensor_by_id(&self, id: u128) -> Result<StoredTensor> {
        let Some(first) = self.meta(&BlockKey::new(id, 0))? else {
            // Without block 0 the tensor may still have blocks (block 0's record was
            // unusable or its slot lost): `tensors()` lists it as incomplete, so reading it
            // says incomplete too, never "not found" (docs/formats/store.md, "Records
            // replay cannot use").
            return Err(match self.tensor_info(id)? {
                Some(info) => StoreErr::TensorIncomplete {
                    name: info.name.unwrap_or_else(|| format!("{id:032x}")),
                    present: info.blocks,
                    expected: info.expected_blocks.max(info.blocks + 1),
                },
                None => StoreErr::TensorNotFound {
                    name: format!("{id:032x}"),
                },
            });
        };
        let shape = first.shape().to_vec();
        let n = numel(&shape).unwrap_or(u64::MAX);
        let nblocks = self.blocks_for(&shape)?;
        let size = first.dtype.size();
        let total = usize::try_from(n.saturating_mul(size as u64)).map_err(|_| {
            StoreErr::InvalidArgument {
                field: "shape",
                reason: format!("{shape:?} does not fit in memory"),
            }
        })?;
        // The shape is what a log record says; only blocks that really exist may size the
        // output. Every block must be present before anything is allocated.
        let info = self.tensor_info(id)?.ok_or(StoreErr::TensorNotFound {
            name: format!("{id:032x}"),
        })?;
        if info.blocks < nblocks {
            return Err(StoreErr::TensorIncomplete {
                name: info.name.unwrap_or_else(|| format!("{id:032x}")),
                present: info.blocks,
                expected: nblocks,
            });
        }
        let mut data = Vec::with_capacity(total.min(MAX_UPFRONT_BYTES));
        let mut buf = Vec::new();
        let block_bytes = self.geo.block_elems as usize * size;
        for i in 0..nblocks {
            let key = BlockKey::new(id, i as u32);
            let m = self.get_block(&key, &mut buf)?;
            if m.centre != first.centre {
                // Blocks of two versions of a centred tensor (a put interrupted after its
                // side record), whatever tier they sit in.
                return Err(StoreErr::CentreMismatch {
                    tensor: format!("{id:032x}"),
                    block: key.block_index,
                    expected: m.centre.unwrap_or(0),
                    found: first.centre,
                });
            }
            let want = block_bytes.min(total - data.len());
            if m.dtype != first.dtype || m.shape() != shape.as_slice() || buf.len() != want {
                return Err(StoreErr::InvalidArgument {
                    field: "tensor",
                    reason: format!(
                        "block {key} ({} {:?}, {} bytes) disagrees with block 0 ({} {shape:?}, expected {want} bytes): \
                         a put was interrupted",
                        m.dtype,
                        m.shape(),
                        buf.len(),
                        first.dtype
                    ),
                });
            }
            data.extend_from_slice(&buf);
        }
        Ok(StoredTensor { info, data })
    }

    /// Delete every block of the tensor `name`; returns how many blocks existed.
    ///
    /// # Errors
    /// [`StoreErr::Io`].
    pub fn delete_tensor(&self, name: &str) -> Result<usize> {
        let keys = self.keys_of(self.tensor_id_of(name))?;
        self.delete_blocks(&keys)
    }

    /// Move every block of the tensor `name` to `tier`; returns how many moved.
    ///
    /// # Errors
    /// [`StoreErr::TensorNotFound`]; the errors of [`TensorStore::migrate_block`].
    pub fn migrate_tensor(&self, name: &str, tier: Tier) -> Result<usize> {
        let keys = self.keys_of(self.tensor_id_of(name))?;
        if keys.is_empty() {
            return Err(StoreErr::TensorNotFound {
                name: name.to_owned(),
            });
        }
        self.migrate_blocks(&keys, tier)
    }

    fn keys_of(&self, id: u128) -> Result<Vec<BlockKey>> {
        let idx = self.read_index()?;
        let mut keys: Vec<BlockKey> = idx
            .placements()
            .map(|(k, _, _)| k)
            .filter(|k| k.tensor_id == id)
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// `side_bytes`: the payload of the tensor's side record (a centred tensor's mean row),
    /// counted in `stored_bytes` but not in the blocks.
    fn summarize(
        &self,
        id: u128,
        metas: &[BlockMeta],
        name: Option<String>,
        side_bytes: u64,
    ) -> TensorInfo {
        let first = metas
            .iter()
            .find(|m| m.key.block_index == 0)
            .unwrap_or(&metas[0]);
        let shape = first.shape().to_vec();
        let mut tier_blocks = [0u64; 4];
        let mut stored = side_bytes;
        for m in metas {
            tier_blocks[m.tier.index()] += 1;
            stored += u64::from(m.data_len);
        }
        TensorInfo {
            name,
            tensor_id: id,
            dtype: first.dtype,
            expected_blocks: self.blocks_for(&shape).unwrap_or(u64::MAX),
            raw_bytes: numel(&shape)
                .unwrap_or(u64::MAX)
                .saturating_mul(first.dtype.size() as u64),
            shape,
            blocks: metas.len() as u64,
            tier_blocks,
            stored_bytes: stored,
        }
    }

    fn tensor_info(&self, id: u128) -> Result<Option<TensorInfo>> {
        let mut side_bytes = 0;
        let metas: Vec<BlockMeta> = {
            let idx = self.read_index()?;
            if self.geo.centre {
                side_bytes = idx
                    .get(&super::centre::side_key(id))
                    .map_or(0, |m| u64::from(m.data_len));
            }
            match idx.get(&BlockKey::new(id, 0)) {
                // The shape in block 0 says which blocks the tensor has: look those up
                // rather than scan the whole index (put_tensor calls this every time).
                // A shape that claims more blocks than the whole index holds cannot be
                // complete: scan instead, so the work is bounded by the index, not by
                // what a record claims.
                Some(first) if self.blocks_for(first.shape())? <= idx.len() as u64 => {
                    let n = self.blocks_for(first.shape())?;
                    (0..n)
                        .filter_map(|i| u32::try_from(i).ok())
                        .filter_map(|i| idx.get(&BlockKey::new(id, i)))
                        .collect()
                }
                _ => idx
                    .iter()
                    .filter(|m| m.key.tensor_id == id && !self.is_side_key(&m.key))
                    .collect(),
            }
        };
        if metas.is_empty() {
            return Ok(None);
        }
        let name = self
            .lock_writer_for_read()?
            .catalog
            .name(id)
            .map(str::to_owned);
        Ok(Some(self.summarize(id, &metas, name, side_bytes)))
    }

    /// Every tensor with at least one block, sorted by name (unnamed ones last, by id).
    ///
    /// # Errors
    /// Only if a thread panicked while holding a store lock.
    pub fn tensors(&self) -> Result<Vec<TensorInfo>> {
        let mut by_id: BTreeMap<u128, Vec<BlockMeta>> = BTreeMap::new();
        let mut side_bytes: BTreeMap<u128, u64> = BTreeMap::new();
        for m in self.read_index()?.iter() {
            if self.is_side_key(&m.key) {
                side_bytes.insert(m.key.tensor_id, u64::from(m.data_len));
            } else {
                by_id.entry(m.key.tensor_id).or_default().push(m);
            }
        }
        let w = self
            .writer
            .lock()
            .map_err(|_| StoreErr::Poisoned { lock: "store" })?;
        let mut out: Vec<TensorInfo> = by_id
            .iter()
            .map(|(id, metas)| {
                let side = side_bytes.get(id).copied().unwrap_or(0);
                self.summarize(*id, metas, w.catalog.name(*id).map(str::to_owned), side)
            })
            .collect();
        drop(w);
        out.sort_by(|a, b| match (&a.name, &b.name) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.tensor_id.cmp(&b.tensor_id),
        });
        Ok(out)
    }
}
