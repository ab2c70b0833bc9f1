//! Memory-mapped BlockIO (owned by the BlockIO work).

/// Mapped tier files.
pub struct MmapBlockIO {}
