//! The BlockIO conformance suite (`blockio_suite`) against every backend of this build:
//! `BufferBlockIO` always, `MmapBlockIO` with feature `mmap`. The object-store backend runs
//! the same suite in `tensorvault-store-object/tests/blockio_conformance.rs`.

mod blockio_common;
mod blockio_suite;
