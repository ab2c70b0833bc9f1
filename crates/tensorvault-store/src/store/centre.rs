//! Centred embedding tensors in the engine (`crate::centre`): writing a tensor's side
//! record at put, loading and checking it for a block's read or migration.

use tensorvault_core::checksum::crc32c;

use crate::block_io::BlockIO;
use crate::centre::{parse_side, Centre, MeanAcc, CENTRE_BLOCK_INDEX};
use crate::clock::Clock;
use crate::codec;
use crate::error::{Result, StoreErr};
use crate::index::BlockIndex;
use crate::meta_log::layout::{C_CENTRE, C_NDIM};
use crate::meta_log::MetaLog;
use crate::types::{BlockKey, BlockMeta, DType, Tier, MAX_NDIM};

use super::{BlockInfo, Prepared, TensorStore};

/// The key of tensor `id`'s side record.
#[must_use]
pub(crate) fn side_key(id: u128) -> BlockKey {
    BlockKey::new(id, CENTRE_BLOCK_INDEX)
}

impl<C: Clock, B: BlockIO, M: MetaLog> TensorStore<C, B, M> {
    /// Whether `key` is a side record of this collection (never a data block).
    pub(crate) fn is_side_key(&self, key: &BlockKey) -> bool {
        self.geo.centre && key.block_index == CENTRE_BLOCK_INDEX
    }

    /// Compute the column mean of `data` (rows of `d` values of `info.dtype`) and write it
    /// as tensor `id`'s side record (raw f32 at Tier0, replacing any earlier one), before
    /// any of the tensor's blocks. `None` when a value is not finite: the tensor is then
    /// stored uncentred.
    pub(crate) fn put_side_record(
        &self,
        id: u128,
        info: &BlockInfo<'_>,
        data: &[u8],
        d: usize,
    ) -> Result<Option<Centre>> {
        let mut acc = MeanAcc::new(d);
        let step = self.geo.block_elems as usize * info.dtype.size();
        let mut vals = Vec::new();
        for chunk in data.chunks(step) {
            vals.clear();
            codec::to_f32(info.dtype, chunk, &mut vals)?;
            acc.push(&vals);
        }
        let Some(centre) = acc.finish() else {
            return Ok(None);
        };
        let mut shape = [0u32; MAX_NDIM];
        shape[..info.shape.len()].copy_from_slice(info.shape);
        let bytes = centre.payload();
        let side = Prepared {
            key: side_key(id),
            tier: Tier::Tier0,
            enc: codec::Encoded {
                bits: 32,
                scale: 0.0,
                bytes,
            },
            dtype: DType::F32,
            shape,
            ndim: info.shape.len() as u8,
            lineage_parent: info.lineage_parent,
            reconstruct: info.reconstruct,
            kind: info.kind,
            centre: Some(centre.fp),
        };
        debug_assert_eq!(crc32c(&side.enc.bytes), centre.fp);
        self.write_prepared(vec![side])?;
        Ok(Some(centre))
    }

    /// The mean row a read of `meta` must add back: `None` for a block that is not
    /// centred or sits at Tier0 (its payload holds the original values).
    ///
    /// # Errors
    /// As [`TensorStore::load_centre`].
    pub(crate) fn centre_of(&self, idx: &BlockIndex, meta: &BlockMeta) -> Result<Option<Centre>> {
        if meta.centre.is_none() || !meta.tier.is_quantized() {
            return Ok(None);
        }
        self.load_centre(idx, meta).map(Some)
    }

    /// The side record of a centred block's tensor, read (checksum verified) and checked
    /// against the block (`crate::centre::parse_side`). `idx` is the caller's index guard
    /// (the side record's slot cannot be freed under it).
    ///
    /// # Errors
    /// [`StoreErr::BadCentre`] `centre` in a collection without flags bit 5;
    /// [`StoreErr::CentreMismatch`] (no side record, or another mean);
    /// [`StoreErr::BadCentre`]; the side record's read errors ([`StoreErr::Corruption`],
    /// [`StoreErr::Io`]).
    pub(crate) fn load_centre(&self, idx: &BlockIndex, meta: &BlockMeta) -> Result<Centre> {
        let id = meta.key.tensor_id;
        let tensor = format!("{id:032x}");
        if !self.geo.centre {
            // Only a crafted record gets here: without bit 5, index 2^32 - 1 is an
            // ordinary block, never a mean row.
            return Err(StoreErr::BadCentre {
                tensor,
                field: "centre",
                offset: C_CENTRE as u64,
                reason: format!(
                    "block {} is centred in a collection without flags bit 5",
                    meta.key.block_index
                ),
            });
        }
        let Some(side) = idx.get(&side_key(id)) else {
            return Err(StoreErr::CentreMismatch {
                tensor,
                block: meta.key.block_index,
                expected: meta.centre.unwrap_or(0),
                found: None,
            });
        };
        let d = match meta.shape() {
            [_, d] => *d as usize,
            other => {
                return Err(StoreErr::BadCentre {
                    tensor,
                    field: "shape",
                    offset: C_NDIM as u64,
                    reason: format!(
                        "block {} of shape {other:?} is centred (only 2-D tensors are)",
                        meta.key.block_index
                    ),
                })
            }
        };
        let mut payload = Vec::new();
        self.read_raw_verified(&side, &mut payload)?;
        parse_side(&tensor, &side, &payload, meta, d)
    }

    /// Put the tensor's name into a centring error that names it by id.
    pub(crate) fn name_centre_err(e: StoreErr, name: &str) -> StoreErr {
        match e {
            StoreErr::CentreMismatch {
                block,
                expected,
                found,
                ..
            } => StoreErr::CentreMismatch {
                tensor: name.to_owned(),
                block,
                expected,
                found,
            },
            StoreErr::BadCentre {
                field,
                offset,
                reason,
                ..
            } => StoreErr::BadCentre {
                tensor: name.to_owned(),
                field,
                offset,
                reason,
            },
            other => other,
        }
    }
}
