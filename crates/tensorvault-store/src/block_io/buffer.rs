//! In-memory BlockIO (owned by the BlockIO work).

/// In-memory tiers.
pub struct BufferBlockIO {}

/// Host persistence hook.
pub trait PersistHook: Send + Sync {}
