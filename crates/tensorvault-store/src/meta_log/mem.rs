//! In-memory MetaLog (owned by the MetaLog work).

/// In-memory log.
#[derive(Debug)]
pub struct MemMetaLog {}
