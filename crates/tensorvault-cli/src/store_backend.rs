//! Where a store lives: the [`Backend`] trait the store subcommands are written against
//! (store_ops.rs, store_maintain_cmd.rs), and its local-directory implementation
//! [`Local`]. The object-store implementation (feature `s3`) is in store_s3_cmd.rs.
//!
//! Both backends open the same generic [`TensorStore`], so every subcommand is one
//! generic function; a backend only says how to open a collection, how to list the
//! collections under its root and which extra figures it has for `stats`.

use std::path::PathBuf;

use tensorvault_store::fs::{list_collections, SHARED_LOCK_WAIT};
use tensorvault_store::{
    BlockIO, DirStore, DirStoreBuilder, FileMetaLog, MetaLog, MmapBlockIO, OpenMode, StoreConfig,
    StoreErr, SystemClock, TensorStore,
};

use crate::error::CliError;

/// The store type a backend opens.
pub type Store<B> = TensorStore<SystemClock, <B as Backend>::Io, <B as Backend>::Log>;

/// How a subcommand uses a collection it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Writes, creating the collection (with the configuration's geometry) if missing:
    /// `put`.
    Create,
    /// Writes to an existing collection: `migrate`, `rm`, `compact`, `maintain`.
    Write,
    /// Reads whose access statistics are kept: `get` (a local store logs them on close;
    /// an object store opened read-only keeps them in memory).
    Read,
    /// Inspection while other readers may hold the collection too, nothing written; a
    /// writer in another process is waited for (saying so on stderr): `verify`, which
    /// needs blocks that do not move while it reads them.
    Inspect,
    /// The index as of the open, without any lock (never waits for a writer), nothing
    /// written: `ls`, `stats`, `maintain --dry-run`.
    Snapshot,
}

/// Backend-specific figures of one open collection, shown by `stats`.
#[derive(Debug, Default)]
pub struct Extra {
    /// Appended to the collection's line of the text output.
    pub text: String,
    /// Added to the collection's `stats` object of the JSON output.
    pub json: serde_json::Map<String, serde_json::Value>,
}

/// A place holding store collections under one root.
pub trait Backend {
    /// The block backend of its stores.
    type Io: BlockIO;
    /// The metadata log of its stores.
    type Log: MetaLog;
    /// What the metadata log is called in messages.
    const LOG_NAME: &'static str;
    /// Whether the root is a local directory (the metrics and report commands read its
    /// files themselves).
    const LOCAL: bool;

    /// Open `tenant/collection` for `mode`.
    ///
    /// # Errors
    /// The store's open errors (a missing collection unless `mode` is
    /// [`Mode::Create`]); I/O errors preparing the root.
    fn open(
        &self,
        tenant: &str,
        collection: &str,
        cfg: StoreConfig,
        mode: Mode,
    ) -> Result<Store<Self>, CliError>;

    /// Every `(tenant, collection)` under the root, sorted.
    ///
    /// # Errors
    /// I/O errors listing the root.
    fn collections(&self) -> Result<Vec<(String, String)>, CliError>;

    /// Figures only this backend has about an open collection (none by default).
    fn extra(&self, _store: &Store<Self>) -> Extra {
        Extra::default()
    }

    /// The named collection, or every collection under the root.
    ///
    /// # Errors
    /// As [`Backend::collections`].
    fn collections_or(
        &self,
        one: Option<(String, String)>,
    ) -> Result<Vec<(String, String)>, CliError> {
        match one {
            Some(p) => Ok(vec![p]),
            None => self.collections(),
        }
    }
}

/// Collections in a local directory `ROOT/<tenant>/<collection>/` (memory-mapped tier
/// files and a `meta.log`, locked per collection).
#[derive(Debug)]
pub struct Local {
    /// The store root directory.
    pub root: PathBuf,
}

impl Backend for Local {
    type Io = MmapBlockIO;
    type Log = FileMetaLog;
    const LOG_NAME: &'static str = "meta.log";
    const LOCAL: bool = true;

    fn open(
        &self,
        tenant: &str,
        collection: &str,
        cfg: StoreConfig,
        mode: Mode,
    ) -> Result<DirStore, CliError> {
        let root = &self.root;
        let open = |mode| {
            DirStoreBuilder::new(root, tenant, collection)
                .config(cfg.clone())
                .mode(mode)
                .open()
        };
        Ok(match mode {
            Mode::Create => {
                std::fs::create_dir_all(root)
                    .map_err(CliError::io("create directory", root.display()))?;
                open(OpenMode::Create)?
            }
            Mode::Write | Mode::Read => open(OpenMode::Write)?,
            // Waits for a writer in another process to finish (saying so first), never
            // writes.
            Mode::Inspect => match open(OpenMode::Shared {
                wait: std::time::Duration::ZERO,
            }) {
                Err(StoreErr::Locked { held, .. }) => {
                    eprintln!(
                        "waiting up to {} s for {tenant}/{collection}: it is {held}",
                        SHARED_LOCK_WAIT.as_secs()
                    );
                    open(OpenMode::Shared {
                        wait: SHARED_LOCK_WAIT,
                    })?
                }
                other => other?,
            },
            Mode::Snapshot => open(OpenMode::Snapshot)?,
        })
    }

    fn collections(&self) -> Result<Vec<(String, String)>, CliError> {
        Ok(list_collections(&self.root)?)
    }
}
