//! The crate's typed errors. Every fallible operation of the backends reports an
//! [`ObjectErr`]; through the store's traits it travels as the typed source of a
//! [`StoreErr::Backend`] (its `path` is the object's URL), except a block whose bytes
//! fail their checksum, which is a [`StoreErr::Corruption`] like on a local disk.
//! [`object_err`] gets the typed error back.

use tensorvault_store::StoreErr;

/// What went wrong with an object. Each variant names the object (`s3://bucket/key`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectErr {
    /// An object the manifest or the MetaLog references does not exist.
    #[error("{path}: object not found")]
    NotFound {
        /// The object.
        path: String,
    },
    /// An object's bytes do not match the CRC32C in its trailer.
    #[error("{path}: crc32c {actual:#010x}, trailer says {expected:#010x}")]
    Checksum {
        /// The object.
        path: String,
        /// CRC32C recorded in the trailer.
        expected: u32,
        /// CRC32C of the bytes read.
        actual: u32,
    },
    /// An object is too short, has a bad trailer, or holds an invalid manifest/log.
    #[error("{path}: {reason}")]
    Malformed {
        /// The object.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The manifest changed since this writer read it (another writer committed first),
    /// or the collection was created concurrently. Nothing of the failed operation is
    /// visible; reopen the collection (re-read the manifest) and retry.
    #[error("{path}: conflict: the manifest changed since it was read (another writer committed); reopen and retry")]
    Conflict {
        /// The manifest object.
        path: String,
    },
    /// The object store did not answer or failed (connection refused, timeout, 5xx
    /// after retries, access denied, ...).
    #[error("{op} failed: {source}")]
    Unavailable {
        /// What was being done (`get`, `put`, `list`, ...).
        op: &'static str,
        /// The object (or prefix).
        path: String,
        /// The object_store client's error.
        source: object_store::Error,
    },
    /// The collection was opened read-only and the operation would change it.
    #[error("{op}: the collection is open read-only")]
    ReadOnly {
        /// The refused operation.
        op: &'static str,
    },
    /// A background upload task ended without reporting (it panicked or was cancelled).
    #[error("{op} {path}: the upload task failed: {source}")]
    Task {
        /// What the task was doing (`put`).
        op: &'static str,
        /// The objects it was writing (the tier's prefix).
        path: String,
        /// Why the task ended.
        source: tokio::task::JoinError,
    },
    /// A bad location, option or environment (no credentials, malformed URL, ...).
    #[error("invalid {field}: {reason}")]
    Config {
        /// The option.
        field: &'static str,
        /// Why.
        reason: String,
    },
}

impl ObjectErr {
    /// Wrap into the store's error: a [`StoreErr::Backend`] whose source is this error
    /// and whose path is the object's URL (empty for errors about no object).
    #[must_use]
    pub fn into_store(self, op: &'static str) -> StoreErr {
        let path = self.path().unwrap_or_default().to_owned();
        StoreErr::backend(op, path, self)
    }

    /// The object this error is about, if any.
    #[must_use]
    pub fn path(&self) -> Option<&str> {
        match self {
            ObjectErr::NotFound { path }
            | ObjectErr::Checksum { path, .. }
            | ObjectErr::Malformed { path, .. }
            | ObjectErr::Conflict { path }
            | ObjectErr::Unavailable { path, .. }
            | ObjectErr::Task { path, .. } => Some(path),
            ObjectErr::ReadOnly { .. } | ObjectErr::Config { .. } => None,
        }
    }

    /// Map an object_store error on `path`: not-found and precondition failures get
    /// their own variants, everything else is [`ObjectErr::Unavailable`].
    pub(crate) fn from_os(op: &'static str, path: String, e: object_store::Error) -> Self {
        match e {
            object_store::Error::NotFound { .. } => ObjectErr::NotFound { path },
            object_store::Error::Precondition { .. }
            | object_store::Error::AlreadyExists { .. } => ObjectErr::Conflict { path },
            source => ObjectErr::Unavailable { op, path, source },
        }
    }
}

/// The [`ObjectErr`] inside a store error returned by this crate's backends, if any.
#[must_use]
pub fn object_err(e: &StoreErr) -> Option<&ObjectErr> {
    e.backend_source::<ObjectErr>()
}

/// Whether `e` is a manifest [`ObjectErr::Conflict`]: the caller lost a race with another
/// writer and should reopen the collection and retry.
#[must_use]
pub fn is_conflict(e: &StoreErr) -> bool {
    matches!(object_err(e), Some(ObjectErr::Conflict { .. }))
}

pub(crate) type OResult<T> = std::result::Result<T, ObjectErr>;
