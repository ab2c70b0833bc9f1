//! What a prefix cache reads through: a lock-free snapshot of the model's collection
//! ([`DirStore::open_dir_snapshot`]) and the table of complete chunks it holds, reopened
//! when the collection's logs changed since (a writer in any process committed).

use std::collections::HashMap;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use super::super::chain::{chunk_name, parse_chunk_name};
use crate::clock::Clock;
use crate::error::{Result, StoreErr};
use crate::fs::{DirStore, META_LOG, NAMES_LOG};
use crate::store::TensorStore;
use crate::types::DType;

/// A clock shared by every store a prefix cache opens (its snapshots and the writer it
/// opens for each commit); dereferences to the caller's clock.
#[derive(Debug)]
pub struct SharedClock<C>(Arc<C>);

impl<C> SharedClock<C> {
    pub(super) fn new(c: C) -> Self {
        Self(Arc::new(c))
    }
}

impl<C> Clone for SharedClock<C> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<C: Clock> Clock for SharedClock<C> {
    fn now_ticks(&self) -> u64 {
        self.0.now_ticks()
    }
}

impl<C> Deref for SharedClock<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.0
    }
}

/// A stored chunk: its parent's id and its store tensor.
#[derive(Clone, Copy, Debug)]
pub(super) struct Chunk {
    pub parent: u128,
    pub tensor_id: u128,
}

/// Identity and length of the collection's two logs: any commit, compaction or access
/// flush of a writer changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stamp([u64; 4]);

impl Stamp {
    /// The stamp of collection directory `dir` now.
    pub(super) fn of(dir: &Path) -> Result<Self> {
        let mut s = [0u64; 4];
        for (i, name) in [META_LOG, NAMES_LOG].into_iter().enumerate() {
            let p = dir.join(name);
            match std::fs::symlink_metadata(&p) {
                Ok(m) => {
                    #[cfg(unix)]
                    {
                        use std::os::unix::fs::MetadataExt;
                        s[2 * i] = m.ino();
                    }
                    s[2 * i + 1] = m.len();
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreErr::io("stat", &p, e)),
            }
        }
        Ok(Self(s))
    }
}

/// A snapshot of the collection and its complete chunks.
pub(super) struct View<C: Clock> {
    pub store: Arc<DirStore<SharedClock<C>>>,
    pub table: HashMap<u128, Chunk>,
    /// The logs' stamp taken before the snapshot was opened.
    pub stamp: Stamp,
}

/// What a chunk tensor must look like to count: its shape and block count.
#[derive(Clone, Copy, Debug)]
pub(super) struct ChunkForm {
    pub shape: [u32; 5],
    pub blocks: u32,
}

/// The complete chunks of `store` (right dtype, shape and every block present), and the
/// tensor ids of incomplete ones (blocks a killed writer left, or a writer in progress).
pub(super) fn chunk_table<C: Clock, B: crate::block_io::BlockIO, M: crate::meta_log::MetaLog>(
    store: &TensorStore<C, B, M>,
    form: ChunkForm,
) -> Result<(HashMap<u128, Chunk>, Vec<u128>)> {
    let mut table = HashMap::new();
    let mut stale = Vec::new();
    for t in store.tensors()? {
        let Some((id, parent)) = t.name.as_deref().and_then(parse_chunk_name) else {
            continue;
        };
        if t.tensor_id != store.tensor_id_of(&chunk_name(id, parent)) {
            continue;
        }
        let complete = t.dtype == DType::F16
            && t.shape == form.shape
            && t.blocks == u64::from(form.blocks)
            && t.expected_blocks == t.blocks;
        if complete {
            table.insert(
                id,
                Chunk {
                    parent,
                    tensor_id: t.tensor_id,
                },
            );
        } else {
            stale.push(t.tensor_id);
        }
    }
    Ok((table, stale))
}
