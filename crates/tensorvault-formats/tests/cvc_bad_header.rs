//! Crafted bad inputs, part 1: the prefix and the JSON header. Every kind of malformed
//! CVC header the reader must refuse, built from a valid file by corrupting specific bytes,
//! written to a real file and opened with `CvcReader::open` (and `open_mmap` /
//! `from_source`, which must agree). Every test asserts the exact `FormatError` variant
//! and its key fields. Part 2 (`cvc_bad_layout.rs`) covers frames, payloads and writers.
//!
//! This test binary installs a counting global allocator so that the "absurd sizes" test
//! can prove that no huge allocation happens before the error.

#[macro_use]
mod common;
use common::*;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

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
        for hl in [file_len as u32 - len_off as u32 - 3, 60_000_000] {
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
    // Overlapping and repeated sections (issue 16: a 274 KB file made a section load write
    // 512 MB by listing the same rows again and again).
    for (start, end) in [(0, 10), (3, 10), (0, 3)] {
        let b = with_json(&sections_fixture(), |v| {
            let mut s = v["sections"][0].clone();
            s["start_index"] = json!(start);
            s["end_index"] = json!(end);
            v["sections"].as_array_mut().unwrap().push(s);
        });
        assert_err!(
            reject(&b),
            FormatError::InvalidField { field, reason, .. }
                if field.ends_with(".start_index") && reason.contains("overlaps")
        );
    }
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
    for name in ["zstd", "lossless", "FP16", "int3", ""] {
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

fn sections_fixture() -> Vec<u8> {
    fixture_bytes("i_sections_int8.cvc")
}
