//! Shared helpers for the crafted-bad-input tests: locating fixtures, taking a file apart
//! into (framing, JSON, frames) and putting it back together with a corrected header
//! length, and opening a crafted file through every reader path.
#![allow(
    dead_code,
    unused_imports,
    unused_macros,
    reason = "each test binary uses a subset of the helpers"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
pub use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
pub use std::time::{Duration, Instant};

pub use serde_json::{json, Value};
pub use tensorvault_formats::cvc::{
    pack, pack_to_vec, Compression, CorruptChunk, CvcReader, CvcWriter, FileSource, Framing,
    PackOptions, SectionSpec,
};
pub use tensorvault_formats::FormatError;
pub use tensorvault_quant::QuantError;

// ---------------------------------------------------------------------------------------
// Building crafted files.

/// Assert that an expression is an error matching a pattern, printing it otherwise.
#[macro_export]
macro_rules! assert_err {
    ($e:expr, $pat:pat $(if $guard:expr)?) => {{
        let e = $e;
        assert!(matches!(&e, $pat $(if $guard)?), "unexpected error: {e:?}");
    }};
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/cvc")
        .join(name)
}

pub fn fixture_bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap()
}

pub fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

pub fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// A file split into framing, JSON header and everything after it.
pub struct Parts {
    pub framing: Framing,
    pub json: Vec<u8>,
    pub rest: Vec<u8>,
}

pub fn split(bytes: &[u8]) -> Parts {
    assert_eq!(&bytes[..4], b"CVCF");
    let (framing, json_off) = if bytes[12] == b'{' && bytes[4..6] == [1, 0] {
        (Framing::V1, 12)
    } else {
        assert_eq!(bytes[8], b'{', "neither framing");
        (Framing::V0, 8)
    };
    let len = u32_at(bytes, json_off - 4) as usize;
    Parts {
        framing,
        json: bytes[json_off..json_off + len].to_vec(),
        rest: bytes[json_off + len..].to_vec(),
    }
}

/// Rebuild a file from its framing, a JSON header and the bytes after it (chunk frames),
/// with a correct u32 header length (v1.0: bytes 8..12; v0: bytes 4..8).
pub fn assemble(framing: Framing, json: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut out = b"CVCF".to_vec();
    if framing == Framing::V1 {
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
    }
    out.extend_from_slice(&u32::try_from(json.len()).unwrap().to_le_bytes());
    out.extend_from_slice(json);
    out.extend_from_slice(rest);
    out
}

/// Replace the JSON header with `json` (raw text), keeping the frames.
pub fn with_raw_json(bytes: &[u8], json: &str) -> Vec<u8> {
    let p = split(bytes);
    assemble(p.framing, json.as_bytes(), &p.rest)
}

/// Edit the parsed JSON header, keeping the frames.
pub fn with_json(bytes: &[u8], f: impl FnOnce(&mut Value)) -> Vec<u8> {
    let p = split(bytes);
    let mut v: Value = serde_json::from_slice(&p.json).unwrap();
    f(&mut v);
    assemble(
        p.framing,
        serde_json::to_string(&v).unwrap().as_bytes(),
        &p.rest,
    )
}

/// A chunk frame found by walking the u32 lengths (independently of the reader).
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub offset: u64,
    pub payload: u64,
    pub len: u64,
}

pub fn frames(bytes: &[u8]) -> Vec<Frame> {
    let p = split(bytes);
    let prefix = if p.framing == Framing::V1 { 8 } else { 4 };
    let mut pos = bytes.len() - p.rest.len();
    let mut out = Vec::new();
    while pos + 4 <= bytes.len() {
        let len = u32_at(bytes, pos) as u64;
        out.push(Frame {
            offset: pos as u64,
            payload: (pos + prefix) as u64,
            len,
        });
        pos += prefix + len as usize;
    }
    out
}

/// Open `bytes` as a real file (positioned reads and memory map) and from memory; all
/// must fail identically. Returns the error.
pub fn reject(bytes: &[u8]) -> FormatError {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.cvc");
    std::fs::write(&path, bytes).unwrap();
    let from_file = CvcReader::open(&path).expect_err("the crafted file must be refused");
    let from_mem = CvcReader::from_source(bytes.to_vec(), "mem").expect_err("from_source");
    assert_eq!(format!("{from_file:?}"), format!("{from_mem:?}"));
    if !bytes.is_empty() {
        // (An empty file cannot be mapped at all.)
        let mapped = CvcReader::open_mmap(&path).expect_err("open_mmap");
        assert_eq!(format!("{from_file:?}"), format!("{mapped:?}"));
    }
    from_file
}

/// Open `bytes` as a real file; it must open. The tempdir must outlive the reader.
pub fn accept(bytes: &[u8]) -> (CvcReader<FileSource>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.cvc");
    std::fs::write(&path, bytes).unwrap();
    let r = CvcReader::open(&path).unwrap_or_else(|e| panic!("must open: {e}"));
    (r, dir)
}

pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

pub fn load_bits<S: tensorvault_formats::cvc::ReadAt>(r: &CvcReader<S>) -> Vec<u32> {
    bits(r.load_all().unwrap().as_slice::<f32>().unwrap())
}

/// 10 rows x 8 dims, three v1.0 chunks: fp16 (4 rows), int8 (4 rows), fp16 (2 rows).
pub const MIXED: &str = "d_mixed_fp16_int8.cvc";
/// 10 rows x 3 dims, one v1.0 fp16 chunk.
pub const TINY: &str = "c_tiny_fp16.cvc";
/// 10 rows x 3 dims, three legacy v0 int8 chunks.
pub const LEGACY_INT8: &str = "e_legacy_v010_int8_cs4.cvc";
/// 10 rows x 3 dims, three legacy v0 fp16 chunks.
pub const LEGACY_FP16: &str = "e_legacy_v010_fp16_cs4.cvc";

// ---------------------------------------------------------------------------------------
// Prefix: magic, version, header length.
