//! Shared helpers of the BlockIO tests: backends under test and payload patterns.

#![allow(dead_code)] // Each test binary uses a different subset.

use tensorvault_store::{BlockIO, BlockKey, BufferBlockIO, CollectionConfig, StoreErr};

/// A backend under test plus whatever keeps its storage alive.
pub struct Backend {
    pub name: &'static str,
    pub io: Box<dyn BlockIO>,
    pub geometry: CollectionConfig,
    /// Slots are fixed-size places in a buffer or file: freed slots are handed out
    /// again, lowest first, liveness is tracked per slot (a double free is refused) and a
    /// slot holds `slot_len` bytes whatever was written. False for the object store's
    /// immutable block objects: numbers are never reused, live blocks are counted, an
    /// object holds what was written.
    pub slot_files: bool,
    #[cfg(feature = "mmap")]
    pub dir: Option<tempfile::TempDir>,
}

/// Every backend this build has, fresh and empty, with `geometry`.
pub fn backends_with(geometry: CollectionConfig) -> Vec<Backend> {
    let buffer = Backend {
        name: "buffer",
        io: Box::new(BufferBlockIO::new(&geometry)),
        geometry,
        slot_files: true,
        #[cfg(feature = "mmap")]
        dir: None,
    };
    #[cfg(feature = "mmap")]
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let io = tensorvault_store::MmapBlockIO::open(dir.path(), &geometry).expect("open mmap");
        let mmap = Backend {
            name: "mmap",
            io: Box::new(io),
            geometry,
            slot_files: true,
            dir: Some(dir),
        };
        vec![buffer, mmap]
    }
    #[cfg(not(feature = "mmap"))]
    vec![buffer]
}

/// Every backend with the default geometry (16 KiB blocks).
pub fn backends() -> Vec<Backend> {
    backends_with(CollectionConfig::default())
}

/// A deterministic pseudo-random payload (SplitMix64 stream of `seed`).
pub fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A key for block `i`.
pub fn key(i: u64) -> BlockKey {
    BlockKey::new(u128::from(i) + 1, i as u32)
}

/// The bytes at `(offset, len)`, copied out through `with_block`.
pub fn read(
    io: &dyn BlockIO,
    tier: tensorvault_store::Tier,
    offset: u64,
    len: u32,
) -> Result<Vec<u8>, StoreErr> {
    let mut out = Vec::new();
    io.with_block(tier, key(0), offset, len, &mut |b| out.extend_from_slice(b))?;
    Ok(out)
}

/// The field named by an `InvalidArgument`, or a panic describing the error.
pub fn invalid_field(r: Result<impl std::fmt::Debug, StoreErr>) -> &'static str {
    match r {
        Err(StoreErr::InvalidArgument { field, .. }) => field,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}
