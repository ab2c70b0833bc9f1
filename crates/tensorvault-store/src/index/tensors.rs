//! The index's per-tensor table: what every block of a tensor shares (its id, shape,
//! dtype, lineage parent, reconstruction policy and kind), stored once per distinct value
//! and referenced from each block's entry by a `u32`.
//!
//! The log stores these fields in every Create record, so nothing forces the blocks of one
//! tensor to agree: the table interns by value (two blocks of one tensor id with different
//! shapes get two rows), and counts references so a row is reused once no block points to
//! it.

use std::collections::HashMap;

use crate::types::{BlockMeta, DType, ReconstructPolicy, TensorKind, MAX_NDIM};

use super::FastHash;

/// The fields a block shares with the other blocks of its tensor.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct TensorAttrs {
    pub tensor_id: u128,
    pub lineage_parent: u128,
    pub shape: [u32; MAX_NDIM],
    pub shape_ndim: u8,
    pub dtype: DType,
    pub reconstruct: ReconstructPolicy,
    pub kind: TensorKind,
    /// Fingerprint of the mean row of a centred embedding block (`BlockMeta::centre`).
    pub centre: Option<u32>,
}

impl TensorAttrs {
    /// The shared part of `m`.
    pub(crate) fn of(m: &BlockMeta) -> Self {
        Self {
            tensor_id: m.key.tensor_id,
            lineage_parent: m.lineage_parent,
            shape: m.shape,
            shape_ndim: m.shape_ndim,
            dtype: m.dtype,
            reconstruct: m.reconstruct,
            kind: m.kind,
            centre: m.centre,
        }
    }
}

#[derive(Clone, Debug)]
struct Row {
    attrs: TensorAttrs,
    /// Blocks that reference the row; 0 = free (on the free list).
    refs: u32,
}

/// Interned [`TensorAttrs`] with reference counts.
#[derive(Clone, Debug, Default)]
pub(crate) struct TensorTable {
    rows: Vec<Row>,
    ids: HashMap<TensorAttrs, u32, FastHash>,
    free: Vec<u32>,
    /// The row most recently interned: consecutive blocks of one tensor (the common case
    /// in a log and in a batch) skip the hash lookup.
    last: Option<u32>,
}

impl TensorTable {
    /// The attributes of row `id`.
    pub(crate) fn get(&self, id: u32) -> &TensorAttrs {
        &self.rows[id as usize].attrs
    }

    /// Rows in use.
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether `a` is the row most recently acquired, still in use.
    pub(crate) fn is_last(&self, a: &TensorAttrs) -> bool {
        self.last
            .is_some_and(|id| self.rows[id as usize].refs > 0 && self.rows[id as usize].attrs == *a)
    }

    /// Take another reference to the row most recently acquired; `None` if it is not in
    /// use any more.
    pub(crate) fn acquire_last(&mut self) -> Option<u32> {
        let id = self.last?;
        let row = &mut self.rows[id as usize];
        (row.refs > 0).then(|| {
            row.refs += 1;
            id
        })
    }

    /// Take a reference to the row holding `a` (created if needed); returns its id.
    pub(crate) fn acquire(&mut self, a: &TensorAttrs) -> u32 {
        let id = match self.last {
            Some(id) if self.is_last(a) => id,
            _ => match self.ids.get(a) {
                Some(&id) => id,
                None => {
                    let row = Row { attrs: *a, refs: 0 };
                    let id = if let Some(id) = self.free.pop() {
                        self.rows[id as usize] = row;
                        id
                    } else {
                        // More rows than blocks is impossible, and the index holds at most
                        // u32::MAX blocks (its entries are addressed by u32).
                        let id = u32::try_from(self.rows.len()).unwrap_or(u32::MAX);
                        self.rows.push(row);
                        id
                    };
                    self.ids.insert(*a, id);
                    id
                }
            },
        };
        self.rows[id as usize].refs += 1;
        self.last = Some(id);
        id
    }

    /// Drop a reference to row `id`; the row is freed with its last reference.
    pub(crate) fn release(&mut self, id: u32) {
        let row = &mut self.rows[id as usize];
        row.refs -= 1;
        if row.refs == 0 {
            let attrs = row.attrs;
            self.ids.remove(&attrs);
            self.free.push(id);
        }
    }

    /// Reserve room for `n` more distinct rows.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.rows.reserve(n);
        self.ids.reserve(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(id: u128, rows: u32) -> TensorAttrs {
        TensorAttrs {
            tensor_id: id,
            lineage_parent: 0,
            shape: [rows, 4, 0, 0, 0, 0, 0, 0],
            shape_ndim: 2,
            dtype: DType::F32,
            reconstruct: ReconstructPolicy::None,
            kind: TensorKind::Generic,
            centre: None,
        }
    }

    #[test]
    fn interns_by_value_and_frees_with_the_last_reference() {
        let mut t = TensorTable::default();
        let a = t.acquire(&attrs(1, 8));
        assert_eq!(t.acquire(&attrs(1, 8)), a);
        let b = t.acquire(&attrs(1, 9)); // same tensor id, another shape: another row
        assert_ne!(a, b);
        assert_eq!(t.acquire(&attrs(1, 8)), a); // after another row: found by hash
        assert_eq!(t.len(), 2);
        for _ in 0..3 {
            t.release(a);
        }
        assert_eq!(t.len(), 1);
        // The freed row is reused, and the stale `last` never matches it.
        let c = t.acquire(&attrs(2, 8));
        assert_eq!(c, a);
        assert_eq!(t.get(c), &attrs(2, 8));
        assert_eq!(t.get(b), &attrs(1, 9));
    }
}
