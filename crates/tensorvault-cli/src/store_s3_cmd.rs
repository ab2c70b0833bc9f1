//! `tensorvault store ... s3://bucket/prefix ...` (cargo feature `s3`): the store
//! commands on an S3-compatible object store (tensorvault-store-object), through the
//! [`Backend`] trait every store subcommand is written against. ROOT is the
//! `s3://bucket/prefix` URL; credentials come from the usual AWS environment variables;
//! `--endpoint` names a self-hosted S3, `--cache-dir` a local block cache.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;
use tensorvault_store::{StoreConfig, SystemClock};
use tensorvault_store_object::{
    connect_s3, list_collections, open_store, ObjectBlockIO, ObjectErr, ObjectLocation,
    ObjectMetaLog, ObjectOptions, ObjectTensorStore,
};

use crate::error::CliError;
use crate::store_backend::{Backend, Extra, Mode};

/// Options of the object-store backend (used when ROOT is an `s3://` URL).
#[derive(Debug, Args)]
pub struct S3Args {
    /// Endpoint of a self-hosted S3 (e.g. http://127.0.0.1:9000) for an s3:// ROOT.
    #[arg(long, global = true)]
    pub endpoint: Option<String>,
    /// Local block cache directory for an s3:// ROOT (bounded by --cache-mb).
    #[arg(long, global = true)]
    pub cache_dir: Option<PathBuf>,
    /// Size bound of the local block cache in MiB.
    #[arg(long, global = true, default_value_t = 1024)]
    pub cache_mb: u64,
}

fn obj(e: ObjectErr) -> CliError {
    CliError::Store(e.into_store("s3"))
}

/// Collections under an `s3://bucket/prefix` URL.
#[derive(Debug)]
pub struct ObjectRoot {
    loc: ObjectLocation,
    opts: ObjectOptions,
}

impl ObjectRoot {
    /// The object-store root `root` names, with the connection options `a`.
    ///
    /// # Errors
    /// [`CliError::Store`] for a URL that is not `s3://bucket[/prefix]`.
    pub fn new(root: &Path, a: &S3Args) -> Result<Self, CliError> {
        let url = root.to_str().unwrap_or_default();
        Ok(Self {
            loc: ObjectLocation::parse(url).map_err(obj)?,
            opts: ObjectOptions {
                endpoint: a.endpoint.clone(),
                cache_dir: a.cache_dir.clone(),
                cache_bytes: a.cache_mb.saturating_mul(1 << 20),
                ..ObjectOptions::default()
            },
        })
    }
}

impl Backend for ObjectRoot {
    type Io = ObjectBlockIO;
    type Log = ObjectMetaLog;
    const LOG_NAME: &'static str = "log";
    const LOCAL: bool = false;

    fn open(
        &self,
        tenant: &str,
        collection: &str,
        cfg: StoreConfig,
        mode: Mode,
    ) -> Result<ObjectTensorStore, CliError> {
        let opts = ObjectOptions {
            // Readers keep access statistics in memory and never write an object.
            read_only: matches!(mode, Mode::Read | Mode::Inspect | Mode::Snapshot),
            create: mode == Mode::Create,
            ..self.opts.clone()
        };
        let s3 = connect_s3(&self.loc, &opts).map_err(obj)?;
        Ok(open_store(
            s3,
            &self.loc,
            tenant,
            collection,
            SystemClock::new(),
            cfg,
            &opts,
        )?)
    }

    fn collections(&self) -> Result<Vec<(String, String)>, CliError> {
        let s3 = connect_s3(&self.loc, &self.opts).map_err(obj)?;
        list_collections(&s3, &self.loc).map_err(obj)
    }

    /// The log's sealed segments (besides its snapshot) and the GET requests the open
    /// took.
    fn extra(&self, s: &ObjectTensorStore) -> Extra {
        let segments = s.block_io().collection().manifest().segments.len();
        let gets = tensorvault_store_object::requests(s).gets;
        let mut json = serde_json::Map::new();
        json.insert("segments".into(), json!(segments));
        json.insert("open_gets".into(), json!(gets));
        Extra {
            text: format!(", log in 1 snapshot + {segments} segments, opened with {gets} GETs"),
            json,
        }
    }
}
