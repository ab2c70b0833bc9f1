//! Builders for opening a store: [`StoreBuilder`] for any backend pair (memory buffers, an
//! object store, ...) instead of [`TensorStore::open`]'s seven arguments, and
//! [`DirStoreBuilder`] for a collection directory, where one [`OpenMode`] picks between
//! the writer, the shared reader and the lock-free snapshot.
//!
//! ```
//! use tensorvault_store::{BufferBlockIO, CollectionConfig, DType, ManualClock, MemMetaLog,
//!     StoreBuilder, StoreConfig, Tier};
//! let geo = CollectionConfig::with_block_elems(256);
//! let store = StoreBuilder::new("acme", "emb", BufferBlockIO::new(&geo), MemMetaLog::new(geo))
//!     .clock(ManualClock::new(1))
//!     .config(StoreConfig::default())
//!     .open()?;
//! store.put_tensor("x", DType::F32, &[2], &[0u8; 8], Tier::Tier0)?;
//! # Ok::<(), tensorvault_store::StoreErr>(())
//! ```

use crate::block_io::BlockIO;
use crate::catalog::Catalog;
use crate::clock::{Clock, SystemClock};
use crate::config::StoreConfig;
use crate::error::Result;
use crate::meta_log::MetaLog;
use crate::store::TensorStore;

/// Opens a [`TensorStore`] over a block backend and a MetaLog: defaults are the system
/// clock, an in-memory name catalog and [`StoreConfig::default`].
#[must_use = "a builder does nothing until open()"]
pub struct StoreBuilder<C, B, M> {
    tenant: String,
    collection: String,
    clock: C,
    io: B,
    log: M,
    catalog: Option<Catalog>,
    cfg: StoreConfig,
}

impl<B: BlockIO, M: MetaLog> StoreBuilder<SystemClock, B, M> {
    /// A builder for `tenant/collection` over `io` and `log` (`io` built with
    /// `log.collection()`'s geometry).
    pub fn new(tenant: &str, collection: &str, io: B, log: M) -> Self {
        Self {
            tenant: tenant.to_owned(),
            collection: collection.to_owned(),
            clock: SystemClock::new(),
            io,
            log,
            catalog: None,
            cfg: StoreConfig::default(),
        }
    }
}

impl<C: Clock, B: BlockIO, M: MetaLog> StoreBuilder<C, B, M> {
    /// Use `clock` (e.g. a `ManualClock` for deterministic tiering).
    pub fn clock<C2: Clock>(self, clock: C2) -> StoreBuilder<C2, B, M> {
        StoreBuilder {
            tenant: self.tenant,
            collection: self.collection,
            clock,
            io: self.io,
            log: self.log,
            catalog: self.catalog,
            cfg: self.cfg,
        }
    }

    /// Keep tensor names in `catalog` (default: in memory).
    pub fn catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// Runtime options.
    pub fn config(mut self, cfg: StoreConfig) -> Self {
        self.cfg = cfg;
        self
    }

    /// Replay the log and open the store ([`TensorStore::open`]).
    ///
    /// # Errors
    /// As [`TensorStore::open`].
    pub fn open(self) -> Result<TensorStore<C, B, M>> {
        let catalog = self.catalog.unwrap_or_else(Catalog::in_memory);
        TensorStore::open(
            &self.tenant,
            &self.collection,
            self.clock,
            self.io,
            self.log,
            catalog,
            self.cfg,
        )
    }
}

#[cfg(feature = "mmap")]
pub use dir::{DirStoreBuilder, OpenMode};

#[cfg(feature = "mmap")]
mod dir {
    use std::path::{Path, PathBuf};

    use crate::block_io::MmapBlockIO;
    use crate::clock::{Clock, SystemClock};
    use crate::config::StoreConfig;
    use crate::error::Result;
    use crate::meta_log::FileMetaLog;
    use crate::store::TensorStore;

    /// How a collection directory is opened.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub enum OpenMode {
        /// The one writer, creating the collection if it does not exist.
        #[default]
        Create,
        /// The one writer of an existing collection.
        Write,
        /// A reader sharing the collection with other readers, waiting up to
        /// `wait` for a writer to finish ([`TensorStore::open_dir_shared_waiting`]).
        Shared {
            /// Longest wait for a writer.
            wait: std::time::Duration,
        },
        /// A lock-free read-only snapshot ([`TensorStore::open_dir_snapshot`]).
        Snapshot,
    }

    /// Opens a collection directory `<root>/<tenant>/<collection>` (see
    /// [`OpenMode`]); defaults: the system clock, [`StoreConfig::default`],
    /// [`OpenMode::Create`].
    ///
    /// ```no_run
    /// use tensorvault_store::{DirStoreBuilder, OpenMode};
    /// let reader = DirStoreBuilder::new("store", "acme", "emb").mode(OpenMode::Snapshot).open()?;
    /// # Ok::<(), tensorvault_store::StoreErr>(())
    /// ```
    #[must_use = "a builder does nothing until open()"]
    pub struct DirStoreBuilder<C = SystemClock> {
        root: PathBuf,
        tenant: String,
        collection: String,
        clock: C,
        cfg: StoreConfig,
        mode: OpenMode,
    }

    impl DirStoreBuilder<SystemClock> {
        /// A builder for `<root>/<tenant>/<collection>`.
        pub fn new(root: impl AsRef<Path>, tenant: &str, collection: &str) -> Self {
            Self {
                root: root.as_ref().to_path_buf(),
                tenant: tenant.to_owned(),
                collection: collection.to_owned(),
                clock: SystemClock::new(),
                cfg: StoreConfig::default(),
                mode: OpenMode::Create,
            }
        }
    }

    impl<C: Clock> DirStoreBuilder<C> {
        /// Use `clock`.
        pub fn clock<C2: Clock>(self, clock: C2) -> DirStoreBuilder<C2> {
            DirStoreBuilder {
                root: self.root,
                tenant: self.tenant,
                collection: self.collection,
                clock,
                cfg: self.cfg,
                mode: self.mode,
            }
        }

        /// Runtime options (and, for [`OpenMode::Create`], a new collection's geometry).
        pub fn config(mut self, cfg: StoreConfig) -> Self {
            self.cfg = cfg;
            self
        }

        /// How to open it.
        pub fn mode(mut self, mode: OpenMode) -> Self {
            self.mode = mode;
            self
        }

        /// Open the collection.
        ///
        /// # Errors
        /// As [`TensorStore::open_dir`], [`TensorStore::open_dir_shared_waiting`] or
        /// [`TensorStore::open_dir_snapshot`], by mode.
        pub fn open(self) -> Result<TensorStore<C, MmapBlockIO, FileMetaLog>> {
            let (root, t, c) = (&self.root, &self.tenant, &self.collection);
            match self.mode {
                OpenMode::Create => TensorStore::open_dir(root, t, c, self.clock, self.cfg, true),
                OpenMode::Write => TensorStore::open_dir(root, t, c, self.clock, self.cfg, false),
                OpenMode::Shared { wait } => {
                    TensorStore::open_dir_shared_waiting(root, t, c, self.clock, self.cfg, wait)
                }
                OpenMode::Snapshot => {
                    TensorStore::open_dir_snapshot(root, t, c, self.clock, self.cfg)
                }
            }
        }
    }
}
