//! File MetaLog (owned by the MetaLog work).

/// File-backed log.
#[derive(Debug)]
pub struct FileMetaLog {}
