//! Crafted bad inputs: every kind of malformed CVC file the reader must refuse, each one
//! built from a valid file by corrupting specific bytes, written to a real file and
//! opened with `CvcReader::open` (and `open_mmap` / `from_source`, which must agree).
//! Every test asserts the exact `FormatError` variant and its key fields.
//!
//! The writer's own input checks are at the end: bad values and options are refused with
//! typed errors, and a failed write leaves nothing behind.
//!
//! This test binary installs a counting global allocator so that the "absurd sizes" test
//! can prove that no huge allocation happens before the error.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tensorvault_formats::cvc::{
    pack, pack_to_vec, Compression, CorruptChunk, CvcReader, CvcWriter, FileSource, Framing,
    PackOptions, SectionSpec,
};
use tensorvault_formats::FormatError;
use tensorvault_quant::QuantError;

// ---------------------------------------------------------------------------------------
// A counting allocator: per-thread live/peak bytes while a measurement is running, and the
// largest single request the whole process ever made.

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

static LARGEST_EVER: AtomicUsize = AtomicUsize::new(0);

fn note_alloc(size: usize) {
    LARGEST_EVER.fetch_max(size, Ordering::Relaxed);
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add(size as isize);
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
        let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
    });
}

fn note_free(size: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(size as isize)));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// bookkeeping only touches const-initialised thread-locals without destructors (no
// allocation, no re-entrancy) and an atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_alloc(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract; forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_alloc(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note_free(layout.size());
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation of this
        // allocator is `System`'s).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_free(layout.size());
        note_alloc(new_size);
        // SAFETY: as for `dealloc`; the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Run `f` and return its result with the peak bytes live on this thread during the call
/// (relative to its start), the largest single allocation on this thread, and the time.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize, usize, Duration) {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    LARGEST.with(|l| l.set(0));
    let start = Instant::now();
    let out = f();
    let elapsed = start.elapsed();
    let peak = PEAK.with(Cell::get).max(0) as usize;
    let largest = LARGEST.with(Cell::get);
    (out, peak, largest, elapsed)
}

// ---------------------------------------------------------------------------------------
// Building crafted files.

macro_rules! assert_err {
    ($e:expr, $pat:pat $(if $guard:expr)?) => {{
        let e = $e;
        assert!(matches!(&e, $pat $(if $guard)?), "unexpected error: {e:?}");
    }};
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/cvc")
        .join(name)
}

fn fixture_bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap()
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// A file split into framing, JSON header and everything after it.
struct Parts {
    framing: Framing,
    json: Vec<u8>,
    rest: Vec<u8>,
}

fn split(bytes: &[u8]) -> Parts {
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
fn assemble(framing: Framing, json: &[u8], rest: &[u8]) -> Vec<u8> {
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
fn with_raw_json(bytes: &[u8], json: &str) -> Vec<u8> {
    let p = split(bytes);
    assemble(p.framing, json.as_bytes(), &p.rest)
}

/// Edit the parsed JSON header, keeping the frames.
fn with_json(bytes: &[u8], f: impl FnOnce(&mut Value)) -> Vec<u8> {
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
struct Frame {
    offset: u64,
    payload: u64,
    len: u64,
}

fn frames(bytes: &[u8]) -> Vec<Frame> {
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
fn reject(bytes: &[u8]) -> FormatError {
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
fn accept(bytes: &[u8]) -> (CvcReader<FileSource>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.cvc");
    std::fs::write(&path, bytes).unwrap();
    let r = CvcReader::open(&path).unwrap_or_else(|e| panic!("must open: {e}"));
    (r, dir)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn load_bits<S: tensorvault_formats::cvc::ReadAt>(r: &CvcReader<S>) -> Vec<u32> {
    bits(r.load_all().unwrap().as_slice::<f32>().unwrap())
}

/// 10 rows x 8 dims, three v1.0 chunks: fp16 (4 rows), int8 (4 rows), fp16 (2 rows).
const MIXED: &str = "d_mixed_fp16_int8.cvc";
/// 10 rows x 3 dims, one v1.0 fp16 chunk.
const TINY: &str = "c_tiny_fp16.cvc";
/// 10 rows x 3 dims, three legacy v0 int8 chunks.
const LEGACY_INT8: &str = "e_legacy_v010_int8_cs4.cvc";
/// 10 rows x 3 dims, three legacy v0 fp16 chunks.
const LEGACY_FP16: &str = "e_legacy_v010_fp16_cs4.cvc";

// ---------------------------------------------------------------------------------------
// Prefix: magic, version, header length.

#[test]
fn bad_magic_is_refused() {
    let good = fixture_bytes(TINY);
    for magic in [*b"XVCF", *b"cvcf", *b"GGUF", [0, 0, 0, 0]] {
        let mut b = good.clone();
        b[..4].copy_from_slice(&magic);
        assert_err!(
            reject(&b),
            FormatError::BadMagic { expected: b"CVCF", found, .. } if found[..] == magic[..]
        );
    }
    // One wrong byte at the end of the magic.
    let mut b = good.clone();
    b[3] = b'G';
    assert_err!(reject(&b), FormatError::BadMagic { found, .. } if found == b"CVCG");
}

#[test]
fn empty_and_short_files_are_refused() {
    for (name, json_off) in [(TINY, 12u64), (LEGACY_FP16, 8)] {
        let good = fixture_bytes(name);
        let header_len = u64::from(u32_at(&good, json_off as usize - 4));
        for n in 0..=13usize {
            let e = reject(&good[..n]);
            let n64 = n as u64;
            if n < 4 {
                assert_err!(e, FormatError::BadMagic { found, .. } if found[..] == good[..n]);
            } else if n64 > json_off {
                // The JSON opens where the framing expects it: the header length is checked.
                assert_err!(
                    e,
                    FormatError::Truncated { offset, end, file_len, .. }
                        if *offset == json_off && *end == json_off + header_len && *file_len == n64
                );
            } else {
                assert_err!(
                    e,
                    FormatError::Truncated { what, offset: 0, end: 13, file_len, .. }
                        if what.contains("prefix") && *file_len == n64
                );
            }
        }
    }
}

#[test]
fn major_version_3_is_refused() {
    let good = fixture_bytes(TINY);
    for (major, minor) in [(3u16, 0u16), (3, 7), (0, 0), (11, 0), (u16::MAX, 1)] {
        let mut b = good.clone();
        b[4..6].copy_from_slice(&major.to_le_bytes());
        b[6..8].copy_from_slice(&minor.to_le_bytes());
        assert_eq!(b[12], b'{', "the JSON is still at offset 12");
        assert_err!(
            reject(&b),
            FormatError::UnsupportedVersion { major: m, minor: n, offset: 4, reason, .. }
                if *m == u32::from(major) && *n == u32::from(minor) && reason.contains("unknown major")
        );
    }
}

#[test]
fn major_version_3_is_refused_when_byte_8_is_also_a_brace() {
    // Regression: a header of 123 bytes puts '{' (0x7b) at offset 8 as well as 12, and
    // the reader used to fall back to the legacy v0 framing and report InvalidJson at 9.
    let good = fixture_bytes(TINY);
    let p = split(&good);
    let mut json = p.json.clone();
    while json.len() < 123 {
        json.insert(json.len() - 1, b' ');
    }
    let mut b = assemble(p.framing, &json, &p.rest);
    assert_eq!((b[8], b[12]), (b'{', b'{'));
    accept(&b); // as v1.0 it is a valid file
    for (major, minor) in [(3u16, 0u16), (10, 100), (2, 0)] {
        b[4..6].copy_from_slice(&major.to_le_bytes());
        b[6..8].copy_from_slice(&minor.to_le_bytes());
        assert_err!(
            reject(&b),
            FormatError::UnsupportedVersion { major: m, minor: n, offset: 4, .. }
                if *m == u32::from(major) && *n == u32::from(minor)
        );
    }
}

#[test]
fn major_version_2_columnar_is_refused() {
    let mut b = fixture_bytes(TINY);
    b[4..6].copy_from_slice(&2u16.to_le_bytes());
    assert_err!(
        reject(&b),
        FormatError::UnsupportedVersion { major: 2, minor: 0, offset: 4, reason, .. }
            if reason.contains("columnar")
    );
    // Any minor.
    b[6..8].copy_from_slice(&5u16.to_le_bytes());
    assert_err!(
        reject(&b),
        FormatError::UnsupportedVersion {
            major: 2,
            minor: 5,
            offset: 4,
            ..
        }
    );
}

#[test]
fn header_len_past_end_of_file_is_truncated() {
    for (name, len_off) in [(TINY, 8usize), (LEGACY_INT8, 4)] {
        let good = fixture_bytes(name);
        let file_len = good.len() as u64;
        let json_off = len_off as u64 + 4;
        // Just past the end, far past the end (but under the limit).
        for hl in [file_len as u32 - len_off as u32 - 3, 100_000_000] {
            let mut b = good.clone();
            put_u32(&mut b, len_off, hl);
            assert_err!(
                reject(&b),
                FormatError::Truncated { what, offset, end, file_len: fl, .. }
                    if what.contains("JSON header") && *offset == json_off
                        && *end == json_off + u64::from(hl) && *fl == file_len
            );
        }
        // Over the documented limit: refused before anything is compared with the file.
        let mut b = good.clone();
        put_u32(&mut b, len_off, u32::MAX);
        assert_err!(
            reject(&b),
            FormatError::InvalidField { field, offset, .. }
                if field == "header_len" && *offset == len_off as u64
        );
    }
}

// ---------------------------------------------------------------------------------------
// The JSON header.

#[test]
fn invalid_json_is_refused() {
    let good = fixture_bytes(TINY);
    // A syntax error at a known position: the offset is the file offset of the bad byte.
    let text = r#"{"chunks":[{"compression":"fp16","rows":10}],"dimension":3,,"num_vectors":10}"#;
    let bad_at = 12 + text.find(",,").unwrap() as u64 + 1;
    assert_err!(
        reject(&with_raw_json(&good, text)),
        FormatError::InvalidJson { offset, .. } if *offset == bad_at
    );
    // Python's NaN literal is not JSON.
    let text = r#"{"chunks":[{"compression":"fp16","rows":10}],"compression":"fp16","dimension":NaN,"num_vectors":10}"#;
    let bad_at = 12 + text.find("NaN").unwrap() as u64;
    assert_err!(
        reject(&with_raw_json(&good, text)),
        FormatError::InvalidJson { offset, .. } if *offset == bad_at
    );
    // Unterminated object (the header ends early), invalid UTF-8, trailing characters.
    for text in [
        &br#"{"chunks":[{"compression":"fp16","rows":10}],"#[..],
        &b"{\"chunks\xff\":[]}"[..],
        &br#"{"chunks":[],"compression":"fp16","dimension":3,"num_vectors":0} x"#[..],
    ] {
        let p = split(&good);
        assert_err!(
            reject(&assemble(p.framing, text, &p.rest)),
            FormatError::InvalidJson { offset, .. } if *offset >= 12 && *offset <= 12 + text.len() as u64
        );
    }
    // No JSON object at either offset.
    let mut b = good.clone();
    b[12] = b'[';
    assert_err!(reject(&b), FormatError::InvalidJson { offset: 8, .. });
}

#[test]
fn missing_required_keys_are_named() {
    let good = fixture_bytes(MIXED);
    let remove = |path: &[&str], key: &str| {
        let (path, key) = (path.to_vec(), key.to_owned());
        with_json(&good, move |v| {
            let mut obj = v;
            for p in path {
                obj = match p.parse::<usize>() {
                    Ok(i) => &mut obj[i],
                    Err(_) => &mut obj[p],
                };
            }
            assert!(obj.as_object_mut().unwrap().remove(&key).is_some(), "{key}");
        })
    };
    let cases: &[(&[&str], &str, &str)] = &[
        (&[], "num_vectors", "num_vectors"),
        (&[], "dimension", "dimension"),
        (&[], "compression", "compression"),
        (&[], "chunks", "chunks"),
        (&["chunks", "0"], "rows", "chunks[0].rows"),
        (&["chunks", "2"], "rows", "chunks[2].rows"),
        (&["chunks", "1"], "min", "chunks[1].min"),
        (&["chunks", "1"], "scale", "chunks[1].scale"),
    ];
    for &(path, key, want) in cases {
        assert_err!(
            reject(&remove(path, key)),
            FormatError::MissingField { field, offset: 12, .. } if field == want
        );
    }
    // The same in a legacy v0 file (JSON at offset 8), in its last chunk.
    let v0 = with_json(&fixture_bytes(LEGACY_INT8), |v| {
        v["chunks"][2].as_object_mut().unwrap().remove("min");
    });
    assert_err!(
        reject(&v0),
        FormatError::MissingField { field, offset: 8, .. } if field == "chunks[2].min"
    );
    // Control: a chunk's own "compression" is optional (it defaults to the file's).
    let (r, _dir) = accept(&remove(&["chunks", "0"], "compression"));
    assert_eq!(load_bits(&r), load_bits(&accept(&good).0));
}

/// An edit of a parsed JSON header.
type Edit = Box<dyn Fn(&mut Value)>;

#[test]
fn mistyped_header_fields_are_refused() {
    let good = fixture_bytes(MIXED);
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|v| v["chunks"][0]["rows"] = json!(-4)),
            "chunks[0].rows",
        ),
        (
            Box::new(|v| v["chunks"][1]["rows"] = json!(4.0)),
            "chunks[1].rows",
        ),
        (
            Box::new(|v| v["chunks"][1]["rows"] = json!("4")),
            "chunks[1].rows",
        ),
        (Box::new(|v| v["dimension"] = json!(8.0)), "dimension"),
        (Box::new(|v| v["dimension"] = json!(0)), "dimension"),
        (Box::new(|v| v["num_vectors"] = json!(null)), "num_vectors"),
        (Box::new(|v| v["chunks"] = json!({})), "chunks"),
        (Box::new(|v| v["chunks"][2] = json!(2)), "chunks[2]"),
        (
            Box::new(|v| v["mmap_optimized"] = json!("yes")),
            "mmap_optimized",
        ),
        (
            Box::new(|v| v["chunks"][1]["min"] = json!("-2.0")),
            "chunks[1].min",
        ),
        (
            Box::new(|v| v["chunks"][1]["scale"] = json!(null)),
            "chunks[1].scale",
        ),
        (
            Box::new(|v| v["chunks"][0]["file_offset"] = json!(-1)),
            "chunks[0].file_offset",
        ),
    ];
    for (edit, want) in cases {
        assert_err!(
            reject(&with_json(&good, edit)),
            FormatError::InvalidField { field, offset: 12, .. } if field == want
        );
    }
    // Rows whose sum overflows u64.
    let b = with_json(&good, |v| {
        v["chunks"][0]["rows"] = json!(u64::MAX);
    });
    assert_err!(
        reject(&b),
        FormatError::InvalidField { field, reason, .. }
            if field == "chunks[1].rows" && reason.contains("overflows")
    );
    // A section past the last vector, and a reversed section.
    let sections = fixture_bytes("i_sections_int8.cvc");
    for (end, reason_part) in [(11, "past num_vectors"), (2, "before start_index")] {
        let b = with_json(&sections, |v| v["sections"][1]["end_index"] = json!(end));
        assert_err!(
            reject(&b),
            FormatError::InvalidField { field, reason, .. }
                if field == "sections[1].end_index" && reason.contains(reason_part)
        );
    }
}

#[test]
fn absurd_num_vectors_and_dimension_fail_fast_without_huge_allocation() {
    const HUGE: u64 = 1_000_000_000_000;
    const SMALL: usize = 1 << 20;
    // Calibrate: the meter sees a 4 MiB allocation made on this thread.
    let (_, peak, largest, _) = measured(|| std::hint::black_box(vec![1u8; 4 << 20]).len());
    assert!(
        peak >= 4 << 20 && largest >= 4 << 20,
        "allocation meter is broken"
    );

    let good = fixture_bytes(TINY);
    let json_end = 12 + u64::from(u32_at(&good, 8));
    let check = |b: Vec<u8>| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absurd.cvc");
        std::fs::write(&path, &b).unwrap();
        let (res, peak, largest, elapsed) = measured(|| {
            let file = CvcReader::open(&path).map(|_| ());
            let mem = CvcReader::from_source(b, "absurd").map(|_| ());
            (file, mem)
        });
        assert!(
            peak < SMALL && largest < SMALL,
            "peak {peak} B, largest {largest} B"
        );
        assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
        let (file, mem) = res;
        assert_eq!(format!("{file:?}"), format!("{mem:?}"));
        file.expect_err("absurd sizes must be refused")
    };

    // num_vectors alone: the chunk rows do not add up.
    let b = with_json(&good, |v| v["num_vectors"] = json!(HUGE));
    assert_err!(
        check(b),
        FormatError::CountMismatch {
            expected: HUGE,
            found: 10,
            ..
        }
    );
    let b = with_json(&good, |v| v["num_vectors"] = json!(u64::MAX));
    assert_err!(
        check(b),
        FormatError::CountMismatch {
            expected: u64::MAX,
            found: 10,
            ..
        }
    );
    // num_vectors and the chunk's rows: the payload would be 6e12 bytes.
    let b = with_json(&good, |v| {
        v["num_vectors"] = json!(HUGE);
        v["chunks"][0]["rows"] = json!(HUGE);
    });
    let fl = b.len() as u64;
    let je = 12 + u64::from(u32_at(&b, 8));
    assert_err!(
        check(b),
        FormatError::Truncated { what, offset, end, file_len, .. }
            if what.contains("chunk 0") && *offset == je && *end == je + 8 + HUGE * 3 * 2 && *file_len == fl
    );
    // dimension: 10 rows x 1e12 dims.
    let b = with_json(&good, |v| v["dimension"] = json!(HUGE));
    let je = 12 + u64::from(u32_at(&b, 8));
    assert_err!(
        check(b),
        FormatError::Truncated { offset, end, .. } if *offset == je && *end == je + 8 + 10 * HUGE * 2
    );
    // Both: rows x dimension overflows u64.
    let b = with_json(&good, |v| {
        v["num_vectors"] = json!(HUGE);
        v["dimension"] = json!(HUGE);
        v["chunks"][0]["rows"] = json!(HUGE);
    });
    assert_err!(
        check(b),
        FormatError::InvalidField { field, reason, .. }
            if field == "chunks[0].rows" && reason.contains("overflows")
    );

    // A legal but absurd header: 0 vectors of 1e12 dims and no chunks. It opens, and a
    // load allocates nothing.
    let b = with_raw_json(
        &good[..json_end as usize],
        r#"{"chunks":[],"compression":"fp16","dimension":1000000000000,"num_vectors":0}"#,
    );
    let (r, peak, largest, _) = measured(|| {
        let r = CvcReader::from_source(b, "empty").unwrap();
        let t = r.load_all().unwrap();
        assert_eq!(t.shape().dims(), &[0, HUGE as usize]);
        assert_eq!(
            r.load_rows(0..0).unwrap().shape().dims(),
            &[0, HUGE as usize]
        );
        assert_eq!(r.iter_chunks().count(), 0);
        assert!(r.verify().unwrap().is_ok());
        r
    });
    assert!(
        peak < SMALL && largest < SMALL,
        "peak {peak} B, largest {largest} B"
    );
    assert_err!(
        r.load_rows(0..1).unwrap_err(),
        FormatError::InvalidArgument { name: "rows", .. }
    );
    // No thread of this test binary ever asked for more than 64 MiB at once.
    assert!(LARGEST_EVER.load(Ordering::Relaxed) < 64 << 20);
}

#[test]
fn unknown_compression_is_refused() {
    let good = fixture_bytes(MIXED);
    for name in ["zstd", "lossless", "FP16", "int4", ""] {
        let b = with_json(&good, |v| v["compression"] = json!(name));
        assert_err!(
            reject(&b),
            FormatError::UnsupportedCompression { field, value, .. } if field == "compression" && value == name
        );
        let b = with_json(&good, |v| v["chunks"][1]["compression"] = json!(name));
        assert_err!(
            reject(&b),
            FormatError::UnsupportedCompression { field, value, .. }
                if field == "chunks[1].compression" && value == name
        );
    }
    // Not a string at all.
    let b = with_json(&good, |v| v["chunks"][2]["compression"] = json!(16));
    assert_err!(
        reject(&b),
        FormatError::InvalidField { field, offset: 12, .. } if field == "chunks[2].compression"
    );
    // Legacy v0, file level.
    let b = with_json(&fixture_bytes(LEGACY_FP16), |v| {
        v["compression"] = json!("lossless")
    });
    assert_err!(
        reject(&b),
        FormatError::UnsupportedCompression { field, value, .. } if field == "compression" && value == "lossless"
    );
}

#[test]
fn non_finite_int8_parameters_are_refused() {
    let good = fixture_bytes(MIXED);
    // 1e39 and 3.5e38 are finite doubles that overflow f32; 1e300 too.
    for (key, value) in [
        ("min", 1e39),
        ("min", -1e39),
        ("min", 1e300),
        ("scale", 1e300),
        ("scale", 3.5e38),
        ("scale", -1e39),
    ] {
        let b = with_json(&good, |v| v["chunks"][1][key] = json!(value));
        let want = format!("chunks[1].{key}");
        assert_err!(
            reject(&b),
            FormatError::InvalidField { field, offset: 12, reason, .. }
                if *field == want && reason.contains("not a finite f32")
        );
    }
    // Legacy v0 (f64 scale), last chunk.
    let b = with_json(&fixture_bytes(LEGACY_INT8), |v| {
        v["chunks"][2]["scale"] = json!(1e39)
    });
    assert_err!(
        reject(&b),
        FormatError::InvalidField { field, offset: 8, .. } if field == "chunks[2].scale"
    );
    // Control: the largest finite f32 is accepted, and min/scale on an fp16 chunk are
    // ignored whatever they hold.
    let b = with_json(&good, |v| {
        v["chunks"][1]["scale"] = json!(f64::from(f32::MAX))
    });
    accept(&b);
    let b = with_json(&good, |v| {
        v["chunks"][0]["min"] = json!(1e300);
        v["chunks"][0]["scale"] = json!(1e300);
    });
    assert_eq!(load_bits(&accept(&b).0), load_bits(&accept(&good).0));
}

// ---------------------------------------------------------------------------------------
// Chunk frames against the header and the file.

#[test]
fn more_frames_than_listed_chunks_is_trailing_bytes() {
    let good = fixture_bytes(MIXED);
    let b = with_json(&good, |v| {
        v["chunks"].as_array_mut().unwrap().pop();
        v["num_vectors"] = json!(8);
    });
    let f = frames(&b);
    assert_eq!(f.len(), 3);
    assert_err!(
        reject(&b),
        FormatError::TrailingBytes { offset, count, .. } if *offset == f[2].offset && *count == 8 + 2 * 8 * 2
    );
    // Header with no chunks at all, frames still there.
    let b = with_json(&good, |v| {
        v["chunks"] = json!([]);
        v["num_vectors"] = json!(0);
    });
    let f = frames(&b);
    assert_err!(
        reject(&b),
        FormatError::TrailingBytes { offset, count, .. }
            if *offset == f[0].offset && *count == b.len() as u64 - f[0].offset
    );
}

#[test]
fn fewer_frames_than_listed_chunks_is_truncated() {
    let good = fixture_bytes(MIXED);
    // The header lists a fourth chunk (1 fp16 row) that is not there.
    let b = with_json(&good, |v| {
        v["chunks"]
            .as_array_mut()
            .unwrap()
            .push(json!({"compression": "fp16", "rows": 1}));
        v["num_vectors"] = json!(11);
    });
    let len = b.len() as u64;
    assert_err!(
        reject(&b),
        FormatError::Truncated { what, offset, end, file_len, .. }
            if what.contains("chunk 3") && *offset == len && *end == len + 8 + 16 && *file_len == len
    );
    // A zero-row chunk still needs its frame prefix.
    let b = with_json(&good, |v| {
        v["chunks"]
            .as_array_mut()
            .unwrap()
            .push(json!({"compression": "fp16", "rows": 0}));
    });
    let len = b.len() as u64;
    assert_err!(
        reject(&b),
        FormatError::Truncated { what, offset, end, .. }
            if what.contains("chunk 3") && *offset == len && *end == len + 8
    );
}

#[test]
fn truncation_exactly_at_a_chunk_boundary() {
    for name in [MIXED, LEGACY_INT8] {
        let good = fixture_bytes(name);
        let prefix = if split(&good).framing == Framing::V1 {
            8
        } else {
            4
        };
        for (i, f) in frames(&good).iter().enumerate() {
            let cut = f.offset as usize;
            assert_err!(
                reject(&good[..cut]),
                FormatError::Truncated { what, offset, end, file_len, .. }
                    if what.contains(&format!("chunk {i} ")) && *offset == f.offset
                        && *end == f.offset + prefix + f.len && *file_len == f.offset
            );
        }
    }
}

#[test]
fn every_proper_prefix_of_a_file_is_truncated() {
    for name in [
        TINY,
        MIXED,
        LEGACY_INT8,
        LEGACY_FP16,
        "f_int8_edge_cs4.cvc",
        "i_sections_int8.cvc",
    ] {
        let good = fixture_bytes(name);
        accept(&good);
        for n in 0..good.len() {
            let e = CvcReader::from_source(good[..n].to_vec(), name).unwrap_err();
            if n < 4 {
                assert_err!(e, FormatError::BadMagic { .. });
            } else {
                assert_err!(e, FormatError::Truncated { file_len, .. } if *file_len == n as u64);
            }
        }
    }
    // Inside a frame prefix and inside a payload, through a real file.
    let good = fixture_bytes(MIXED);
    let f = frames(&good)[1];
    for cut in [f.offset + 3, f.offset + 7, f.payload + 5] {
        assert_err!(
            reject(&good[..cut as usize]),
            FormatError::Truncated { what, offset, file_len, .. }
                if what.contains("chunk 1 ") && *offset == f.offset && *file_len == cut
        );
    }
}

#[test]
fn chunk_rows_past_end_of_file_is_truncated() {
    let good = fixture_bytes(MIXED);
    // The last chunk claims one more row than its frame holds.
    let b = with_json(&good, |v| {
        v["chunks"][2]["rows"] = json!(3);
        v["num_vectors"] = json!(11);
    });
    let f = frames(&b)[2];
    assert_err!(
        reject(&b),
        FormatError::Truncated { what, offset, end, file_len, .. }
            if what.contains("chunk 2") && *offset == f.offset && *end == f.payload + 3 * 8 * 2
                && *file_len == b.len() as u64
    );
    // The last frame's stored length points past the end of the file.
    let mut b = good.clone();
    let f = frames(&good)[2];
    put_u32(&mut b, f.offset as usize, 1000);
    assert_err!(
        reject(&b),
        FormatError::LengthMismatch { what, offset, expected: 32, found: 1000, .. }
            if what.contains("chunk 2") && *offset == f.offset
    );
}

#[test]
fn stored_payload_length_different_from_rows_x_dim_x_width() {
    let good = fixture_bytes(MIXED);
    let f = frames(&good);
    // The stored u32 length is one byte short.
    let mut b = good.clone();
    put_u32(&mut b, f[0].offset as usize, 63);
    assert_err!(
        reject(&b),
        FormatError::LengthMismatch { offset, expected: 64, found: 63, .. } if *offset == f[0].offset
    );
    // The header's dimension is wrong: chunk 0 should hold 4 x 4 x 2 bytes.
    let b = with_json(&good, |v| v["dimension"] = json!(4));
    let f = frames(&b);
    assert_err!(
        reject(&b),
        FormatError::LengthMismatch { what, offset, expected: 32, found: 64, .. }
            if what.contains("chunk 0") && *offset == f[0].offset
    );
    // The header's compression for chunk 1 has the wrong width (fp16 instead of int8).
    let b = with_json(&good, |v| v["chunks"][1]["compression"] = json!("fp16"));
    let f = frames(&b);
    assert_err!(
        reject(&b),
        FormatError::LengthMismatch { what, offset, expected: 64, found: 32, .. }
            if what.contains("chunk 1") && *offset == f[1].offset
    );
    // Legacy v0: a length field that is off by one.
    let good = fixture_bytes(LEGACY_FP16);
    let f = frames(&good);
    let mut b = good.clone();
    put_u32(&mut b, f[1].offset as usize, 25);
    assert_err!(
        reject(&b),
        FormatError::LengthMismatch { offset, expected: 24, found: 25, .. } if *offset == f[1].offset
    );
}

#[test]
fn rows_sum_different_from_num_vectors() {
    let good = fixture_bytes(MIXED);
    for (nv, found) in [(9u64, 10u64), (11, 10), (0, 10)] {
        let b = with_json(&good, |v| v["num_vectors"] = json!(nv));
        assert_err!(
            reject(&b),
            FormatError::CountMismatch { what, expected, found: f, .. }
                if what.contains("num_vectors") && *expected == nv && *f == found
        );
    }
    // A chunk with fewer rows, num_vectors unchanged.
    let b = with_json(&good, |v| v["chunks"][0]["rows"] = json!(3));
    assert_err!(
        reject(&b),
        FormatError::CountMismatch {
            expected: 10,
            found: 9,
            ..
        }
    );
}

#[test]
fn file_offset_outside_the_file() {
    let good = fixture_bytes(TINY);
    let set = |off: u64| with_json(&good, move |v| v["chunks"][0]["file_offset"] = json!(off));
    // File offsets of three digits keep the file length fixed: find it first.
    let len = set(100).len() as u64;
    assert!((100..1000).contains(&len));
    let json_end = 12 + u64::from(u32_at(&set(100), 8));
    for off in [len, len + 1, 999] {
        assert_err!(
            reject(&set(off)),
            FormatError::InvalidField { field, offset: 12, reason, .. }
                if field == "chunks[0].file_offset" && reason.contains("outside")
        );
    }
    // Much larger (the file grows by the extra digits, still far outside).
    assert_err!(
        reject(&set(u64::MAX)),
        FormatError::InvalidField { field, .. } if field == "chunks[0].file_offset"
    );
    // Inside the file, but the frame does not fit.
    assert_err!(
        reject(&set(len - 1)),
        FormatError::Truncated { what, offset, .. } if what.contains("chunk 0") && *offset == len - 1
    );
    // Control: the offset where the frame really is.
    let (r, _dir) = accept(&set(json_end));
    assert_eq!(r.chunks()[0].frame_offset, json_end);
    assert_eq!(load_bits(&r), load_bits(&accept(&good).0));
}

#[test]
fn file_offset_overlapping_the_header() {
    let good = fixture_bytes(TINY);
    let set = |off: u64| with_json(&good, move |v| v["chunks"][0]["file_offset"] = json!(off));
    let json_end = 12 + u64::from(u32_at(&set(100), 8));
    for off in [0, 4, 12, 100, json_end - 1] {
        assert_err!(
            reject(&set(off)),
            FormatError::InvalidField { field, offset: 12, reason, .. }
                if field == "chunks[0].file_offset" && reason.contains("overlaps")
        );
    }
    // A chunk whose frame overlaps the previous chunk's.
    let mixed = fixture_bytes(MIXED);
    let set1 = |off: u64| with_json(&mixed, move |v| v["chunks"][1]["file_offset"] = json!(off));
    let f = frames(&set1(100));
    assert_err!(
        reject(&set1(f[1].offset - 1)),
        FormatError::InvalidField { field, reason, .. }
            if field == "chunks[1].file_offset" && reason.contains("overlaps")
    );
    accept(&set1(f[1].offset));
}

#[test]
fn trailing_garbage_is_refused() {
    for (name, extra) in [
        (TINY, &b"garbage"[..]),
        (LEGACY_INT8, &b"\0"[..]),
        ("j_mmap_optimized_fp16.cvc", &[0u8; 4096][..]),
        (MIXED, &b"CVCF"[..]),
    ] {
        let mut b = fixture_bytes(name);
        let len = b.len() as u64;
        b.extend_from_slice(extra);
        assert_err!(
            reject(&b),
            FormatError::TrailingBytes { offset, count, .. } if *offset == len && *count == extra.len() as u64
        );
    }
}

// ---------------------------------------------------------------------------------------
// Checksums.

#[test]
fn crc_mismatch_names_the_chunk_and_other_chunks_still_load() {
    let values: Vec<f32> = (0..80).map(|i| (i as f32 - 40.0) * 0.37).collect();
    let opts = PackOptions {
        chunk_size: 4,
        ..Default::default()
    };
    let good = pack_to_vec(&values, 8, &opts).unwrap();
    let f = frames(&good);
    assert_eq!(f.len(), 3);
    let stored = u32_at(&good, f[1].offset as usize + 4);
    let (ok, _dir0) = accept(&good);
    let want = load_bits(&ok);

    // One flipped bit in chunk 1's payload.
    let mut bad = good.clone();
    bad[f[1].payload as usize + 10] ^= 0x04;
    let computed = crc32fast::hash(&bad[f[1].payload as usize..(f[1].payload + f[1].len) as usize]);
    assert_ne!(stored, computed);
    let (r, _dir) = accept(&bad);
    let mem = CvcReader::from_source(bad.clone(), "mem").unwrap();
    let is_chunk1 = |e: &FormatError| {
        matches!(e, FormatError::ChecksumMismatch { what, offset, stored: s, computed: c, .. }
            if what == "chunk 1 payload" && *offset == f[1].payload
                && *s == u64::from(stored) && *c == u64::from(computed))
    };
    for e in [r.load_all().unwrap_err(), mem.load_all().unwrap_err()] {
        assert!(is_chunk1(&e), "{e:?}");
    }
    // verify() reports exactly that chunk.
    let report = r.verify().unwrap();
    assert_eq!((report.chunks, report.checksummed), (3, 3));
    assert_eq!(
        report.corrupt,
        vec![CorruptChunk {
            index: 1,
            rows: 4..8,
            payload_offset: f[1].payload,
            stored,
            computed
        }]
    );
    assert_eq!(mem.verify().unwrap(), report);
    // Rows in the other chunks still load, bit-exactly.
    let row = 8; // values per row
    for range in [0..4u64, 8..10, 0..2, 9..10] {
        let got = r.load_rows(range.clone()).unwrap();
        let (a, b) = (range.start as usize * row, range.end as usize * row);
        assert_eq!(
            bits(got.as_slice::<f32>().unwrap()),
            want[a..b],
            "{range:?}"
        );
    }
    assert_eq!(r.load_chunks(&[2, 0]).unwrap().shape().dims(), &[6, 8]);
    // Any row of chunk 1, even a partial range, is refused.
    for range in [4..5u64, 3..5, 7..9, 0..10] {
        let e = r.load_rows(range.clone()).unwrap_err();
        assert!(is_chunk1(&e), "{range:?}: {e:?}");
    }
    let items: Vec<_> = r.iter_chunks().collect();
    assert!(items[0].is_ok() && items[2].is_ok());
    assert!(is_chunk1(items[1].as_ref().unwrap_err()));
    // With checksums off, the flipped bit decodes: exactly one value differs.
    let unchecked = load_bits(&r.with_checksums(false));
    let diffs: Vec<usize> = (0..want.len())
        .filter(|&i| want[i] != unchecked[i])
        .collect();
    assert_eq!(diffs, vec![4 * row + 5]);

    // A flipped bit in the stored CRC itself.
    let mut bad = good.clone();
    bad[f[2].offset as usize + 4] ^= 0x80;
    let (r, _dir2) = accept(&bad);
    assert_err!(
        r.load_all().unwrap_err(),
        FormatError::ChecksumMismatch { what, offset, stored: s, .. }
            if what == "chunk 2 payload" && *offset == f[2].payload
                && *s == u64::from(u32_at(&bad, f[2].offset as usize + 4))
    );
    assert_eq!(
        r.verify()
            .unwrap()
            .corrupt
            .iter()
            .map(|c| c.index)
            .collect::<Vec<_>>(),
        vec![2]
    );
    assert!(r.load_rows(0..8).is_ok());
}

#[test]
fn legacy_v0_files_have_no_checksum_to_fail() {
    // Documents the limitation: the legacy framing has no CRC, so a flipped payload bit
    // is not detected.
    let good = fixture_bytes(LEGACY_FP16);
    let f = frames(&good);
    let mut b = good.clone();
    b[f[1].payload as usize] ^= 0x01;
    let (r, _dir) = accept(&b);
    assert_ne!(load_bits(&r), load_bits(&accept(&good).0));
    let report = r.verify().unwrap();
    assert!(report.is_ok());
    assert_eq!((report.chunks, report.checksummed), (3, 0));
}

// ---------------------------------------------------------------------------------------
// Writer-side bad input.

fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32).sin() * 3.0).collect()
}

fn int8_cs4(framing: Framing) -> PackOptions {
    PackOptions {
        compression: Compression::Int8,
        chunk_size: 4,
        framing,
        ..Default::default()
    }
}

#[test]
fn nan_in_an_int8_chunk_is_a_codec_error_naming_the_index() {
    for framing in [Framing::V1, Framing::V0] {
        let opts = int8_cs4(framing);
        // Row 5, column 2 is in chunk 1 (rows 4..8) at index (5 - 4) * 3 + 2 = 5.
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut v = ramp(30);
            v[5 * 3 + 2] = bad;
            assert_err!(
                pack_to_vec(&v, 3, &opts).unwrap_err(),
                FormatError::Codec { context, source: QuantError::NonFinite { index: 5, .. } }
                    if context == "chunk 1 (rows 4..8)"
            );
        }
        // In the last, partial chunk (rows 8..10).
        let mut v = ramp(30);
        v[9 * 3] = f32::NAN;
        assert_err!(
            pack_to_vec(&v, 3, &opts).unwrap_err(),
            FormatError::Codec { context, source: QuantError::NonFinite { index: 3, .. } }
                if context == "chunk 2 (rows 8..10)"
        );
        // The streaming writer reports the same error when the chunk is encoded.
        let dir = tempfile::tempdir().unwrap();
        let mut w = CvcWriter::create(dir.path().join("s.cvc"), 3, opts.clone()).unwrap();
        w.write_rows(&v[..12]).unwrap();
        w.write_rows(&v[12..27]).unwrap();
        w.write_rows(&v[27..]).unwrap();
        assert_err!(
            w.finish().unwrap_err(),
            FormatError::Codec { context, source: QuantError::NonFinite { index: 3, .. } }
                if context == "chunk 2 (rows 8..10)"
        );
    }
    // Control: NaN is representable in fp16, so an fp16 chunk takes it.
    let mut v = ramp(30);
    v[7] = f32::NAN;
    assert!(pack_to_vec(
        &v,
        3,
        &PackOptions {
            chunk_size: 4,
            ..Default::default()
        }
    )
    .is_ok());
}

#[test]
fn chunk_metadata_and_compression_lists_must_match_the_chunk_count() {
    let v = ramp(30); // 10 rows of 3 -> 3 chunks of 4, 4, 2
    for n in [0usize, 2, 4] {
        let opts = PackOptions {
            chunk_size: 4,
            chunk_metadata: Some(vec![json!({"k": 1}); n]),
            ..Default::default()
        };
        assert_err!(
            pack_to_vec(&v, 3, &opts).unwrap_err(),
            FormatError::InvalidArgument {
                name: "chunk_metadata",
                ..
            }
        );
        let opts = PackOptions {
            chunk_size: 4,
            chunk_compression: Some(vec![Compression::Int8; n]),
            ..Default::default()
        };
        assert_err!(
            pack_to_vec(&v, 3, &opts).unwrap_err(),
            FormatError::InvalidArgument {
                name: "chunk_compression",
                ..
            }
        );
    }
    // Control: exactly three entries.
    let opts = PackOptions {
        chunk_size: 4,
        chunk_metadata: Some(vec![json!(1), json!(2), json!(3)]),
        ..Default::default()
    };
    assert!(pack_to_vec(&v, 3, &opts).is_ok());
    // Sections that do not add up to the rows.
    let opts = PackOptions {
        sections: Some(vec![SectionSpec {
            rows: 4,
            metadata: json!({}),
        }]),
        ..Default::default()
    };
    assert_err!(
        pack_to_vec(&v, 3, &opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "sections",
            ..
        }
    );
}

#[test]
fn values_must_be_a_whole_number_of_rows() {
    let opts = PackOptions::default();
    assert_err!(
        pack_to_vec(&ramp(10), 3, &opts).unwrap_err(),
        FormatError::InvalidArgument { name: "vectors", reason } if reason.contains("10 values")
    );
    assert_err!(
        pack_to_vec(&ramp(10), 0, &opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "dimension",
            ..
        }
    );
    let dir = tempfile::tempdir().unwrap();
    let mut w = CvcWriter::create(dir.path().join("w.cvc"), 3, opts.clone()).unwrap();
    assert_err!(
        w.write_rows(&ramp(4)).unwrap_err(),
        FormatError::InvalidArgument {
            name: "vectors",
            ..
        }
    );
    assert_err!(
        w.write_chunk(&ramp(5), None, None).unwrap_err(),
        FormatError::InvalidArgument {
            name: "vectors",
            ..
        }
    );
    assert_err!(
        CvcWriter::create(dir.path().join("z.cvc"), 0, opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "dimension",
            ..
        }
    );
}

#[test]
fn chunk_size_zero_is_refused() {
    let opts = PackOptions {
        chunk_size: 0,
        ..Default::default()
    };
    assert_err!(
        pack_to_vec(&ramp(9), 3, &opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "chunk_size",
            ..
        }
    );
    // Even with no rows at all.
    assert_err!(
        pack_to_vec(&[], 3, &opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "chunk_size",
            ..
        }
    );
    let dir = tempfile::tempdir().unwrap();
    assert_err!(
        CvcWriter::create(dir.path().join("w.cvc"), 3, opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "chunk_size",
            ..
        }
    );
    assert_eq!(listing(dir.path()), Vec::<String>::new());
}

#[test]
fn mmap_optimized_with_v0_framing_is_refused() {
    let opts = PackOptions {
        mmap_optimized: true,
        framing: Framing::V0,
        ..Default::default()
    };
    assert_err!(
        pack_to_vec(&ramp(9), 3, &opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "mmap_optimized",
            ..
        }
    );
    let dir = tempfile::tempdir().unwrap();
    assert_err!(
        CvcWriter::create(dir.path().join("w.cvc"), 3, opts).unwrap_err(),
        FormatError::InvalidArgument {
            name: "mmap_optimized",
            ..
        }
    );
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn failed_pack_leaves_no_file_and_keeps_an_existing_destination() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out.cvc");
    let mut nan = ramp(30);
    nan[20] = f32::NAN;
    let failing: Vec<(Vec<f32>, PackOptions)> = vec![
        (nan.clone(), int8_cs4(Framing::V1)),
        (
            ramp(30),
            PackOptions {
                chunk_size: 0,
                ..Default::default()
            },
        ),
        (ramp(31), PackOptions::default()),
        (
            ramp(30),
            PackOptions {
                chunk_size: 4,
                chunk_metadata: Some(vec![json!(1)]),
                ..Default::default()
            },
        ),
    ];
    // No destination yet: nothing at all is left behind.
    for (v, opts) in &failing {
        assert!(pack(&dest, v, 3, opts).is_err());
        assert_eq!(listing(dir.path()), Vec::<String>::new(), "{opts:?}");
    }
    // An existing destination is untouched.
    std::fs::write(&dest, b"precious").unwrap();
    for (v, opts) in &failing {
        assert!(pack(&dest, v, 3, opts).is_err());
        assert_eq!(listing(dir.path()), vec!["out.cvc".to_owned()]);
        assert_eq!(std::fs::read(&dest).unwrap(), b"precious");
    }
    // Control: a successful pack replaces it and leaves only it.
    pack(&dest, &ramp(30), 3, &int8_cs4(Framing::V1)).unwrap();
    assert_eq!(listing(dir.path()), vec!["out.cvc".to_owned()]);
    assert_ne!(std::fs::read(&dest).unwrap(), b"precious");
}

#[test]
fn failed_streaming_write_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out.cvc");
    std::fs::write(&dest, b"precious").unwrap();
    let mut nan = ramp(30);
    nan[20] = f32::NAN;

    // Fails in write_rows (chunk 1 fills); the writer is then dropped.
    let mut w = CvcWriter::create(&dest, 3, int8_cs4(Framing::V1)).unwrap();
    assert_eq!(
        listing(dir.path()).len(),
        2,
        "a temporary file exists while writing"
    );
    assert_err!(
        w.write_rows(&nan).unwrap_err(),
        FormatError::Codec { context, source: QuantError::NonFinite { index: 8, .. } }
            if context == "chunk 1 (rows 4..8)"
    );
    drop(w);
    assert_eq!(listing(dir.path()), vec!["out.cvc".to_owned()]);
    assert_eq!(std::fs::read(&dest).unwrap(), b"precious");

    // Fails in finish (the metadata list does not match the chunks written).
    let opts = PackOptions {
        chunk_size: 4,
        chunk_metadata: Some(vec![json!(1), json!(2), json!(3), json!(4)]),
        ..Default::default()
    };
    let mut w = CvcWriter::create(&dest, 3, opts).unwrap();
    w.write_rows(&ramp(30)).unwrap();
    assert_err!(
        w.finish().unwrap_err(),
        FormatError::InvalidArgument {
            name: "chunk_metadata",
            ..
        }
    );
    assert_eq!(listing(dir.path()), vec!["out.cvc".to_owned()]);
    assert_eq!(std::fs::read(&dest).unwrap(), b"precious");
}
