//! The store's BlockIO conformance suite (`tensorvault-store/tests/blockio_suite`, the same
//! file the buffer and mmap backends run) against `ObjectBlockIO`, one object per block and
//! packed, on an in-process object store.

mod blockio_common;
#[path = "../../tensorvault-store/tests/blockio_suite/mod.rs"]
mod blockio_suite;
