//! The tensorvault temporal tensor store on S3-compatible object storage.
//!
//! A collection lives under `<prefix>/<tenant>/<collection>/`:
//!
//! ```text
//! manifest                      JSON + trailer; replaced only by conditional puts
//! log/snap-<session>-<n>        MetaLog snapshot: a whole meta.log image
//! log/seg-<session>-<n>         sealed MetaLog segments (128-byte records)
//! names/names-<session>-<n>     the name catalog (a names.log image)
//! blocks/t<tier>/<slot:012x>    one block payload per object
//! ```
//!
//! Every object ends with a 16-byte trailer (length, CRC32C, magic `TVO1`) checked on
//! every read. [`ObjectBlockIO`] and [`ObjectMetaLog`] implement the store's `BlockIO`
//! and `MetaLog` traits, so [`ObjectTensorStore`] is the ordinary
//! [`tensorvault_store::TensorStore`] with the same API. The traits are synchronous: each
//! open collection owns a small tokio runtime and blocks on it (do not call the store
//! from inside another tokio runtime's worker thread).
//!
//! Byte layout and protocol: `docs/formats/store-object.md`. Sizing: `docs/scaling.md`.
//!
//! ```no_run
//! use tensorvault_store::{DType, StoreConfig, SystemClock, Tier};
//! use tensorvault_store_object::{connect_s3, open_store, ObjectLocation, ObjectOptions};
//!
//! let loc = ObjectLocation::parse("s3://my-bucket/stores").unwrap();
//! let opts = ObjectOptions {
//!     endpoint: Some("http://127.0.0.1:9000".into()),
//!     cache_dir: Some("/var/cache/tv".into()),
//!     create: true,
//!     ..ObjectOptions::default()
//! };
//! let s3 = connect_s3(&loc, &opts).unwrap();
//! let store = open_store(s3, &loc, "acme", "emb", SystemClock::new(),
//!     StoreConfig::default(), &opts).unwrap();
//! let data = vec![0u8; 4 * 4096];
//! store.put_tensor("w", DType::F32, &[4096], &data, Tier::Tier0).unwrap();
//! store.close().unwrap();
//! ```

mod block_io;
mod cache;
mod collection;
mod error;
pub mod frame;
pub mod manifest;
mod meta_log;
mod open;

pub use block_io::{block_key, block_location, pack_key, ObjectBlockIO};
pub use cache::{BlockCache, CacheStats};
pub use collection::{Collection, Requests, MANIFEST};
pub use error::{is_conflict, object_err, ObjectErr};
pub use meta_log::ObjectMetaLog;
pub use open::{
    connect_s3, list_collections, open_store, ObjectLocation, ObjectOptions, ObjectTensorStore,
};

/// Requests sent by `store`'s backends since it was opened.
#[must_use]
pub fn requests<C: tensorvault_store::Clock>(store: &ObjectTensorStore<C>) -> Requests {
    store.block_io().collection().requests()
}
