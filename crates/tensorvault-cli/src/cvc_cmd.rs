//! `tensorvault cvc pack|load|inspect|verify`.

use std::io::{BufWriter, Write};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Value};
use tensorvault_core::atomic::AtomicFile;
use tensorvault_formats::cvc::{Compression, CvcReader, CvcWriter, Framing, PackOptions};

use crate::cvc_quality;
use crate::error::CliError;
use crate::npy::{self, NpyInput};
use crate::report::{self, Table};

/// CVC (compressed vector collection) commands.
#[derive(Debug, Subcommand)]
pub enum CvcCmd {
    /// Pack a 2-D float .npy array (vectors x dimension) into a .cvc file.
    Pack(PackArgs),
    /// Decode a .cvc file (all of it, a row range, or filtered chunks) into a float32 .npy.
    Load(LoadArgs),
    /// Show a .cvc file's header and chunk table without decoding any payload.
    Inspect(InspectArgs),
    /// Check a .cvc file's structure and every chunk's CRC-32.
    Verify(VerifyArgs),
}

/// Compression choices on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CompressionArg {
    /// IEEE half precision, 2 bytes per value (~2x smaller than f32).
    Fp16,
    /// Affine uint8 with per-chunk min/scale, 1 byte per value (~4x smaller).
    Int8,
    /// bfloat16, 2 bytes per value (tensorvault extension; decompressed cannot read it).
    Bf16,
    /// 4-bit codes, per-chunk column normalisation and a min/step per row, ~4.1 bits per
    /// value (~7.8x smaller; tensorvault extension; decompressed cannot read it).
    Int4,
}

impl From<CompressionArg> for Compression {
    fn from(c: CompressionArg) -> Self {
        match c {
            CompressionArg::Fp16 => Compression::Fp16,
            CompressionArg::Int8 => Compression::Int8,
            CompressionArg::Bf16 => Compression::Bf16,
            CompressionArg::Int4 => Compression::Int4,
        }
    }
}

/// File framing on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// v1.0: version field and per-chunk CRC-32 (what decompressed 2.x writes).
    V1,
    /// Legacy v0: the seed's layout, no version and no CRC (decompressed 0.1.0).
    V0,
}

/// Arguments of `cvc pack`.
#[derive(Debug, Args)]
pub struct PackArgs {
    /// Input .npy (float32, float64 or float16; shape vectors x dimension; memory-mapped).
    pub input: PathBuf,
    /// Output .cvc (written atomically: nothing appears unless the whole file is written).
    pub output: PathBuf,
    /// How chunks are stored.
    #[arg(long, value_enum, default_value = "fp16")]
    pub compression: CompressionArg,
    /// Vectors per chunk (the unit of streaming, partial loads, CRC checks and, for
    /// int8, of one value range). Default: 4 MiB of f32 input per chunk (1,365 rows of
    /// 768), at most 100,000 rows; give 100000 for the same bytes as decompressed's
    /// default.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub chunk_size: Option<u64>,
    /// Skip reading the file back to measure the reconstruction error (max |err|, RMSE,
    /// min cosine), which otherwise costs one more pass over the data.
    #[arg(long)]
    pub no_error: bool,
    /// File framing.
    #[arg(long, value_enum, default_value = "v1")]
    pub format: FormatArg,
    /// Align every chunk to a 4096-byte page (decompressed's mmap_optimized).
    #[arg(long)]
    pub mmap_optimized: bool,
    /// Write decompressed's exact bytes: leave out the header checksum
    /// (`tensorvault_header_crc32c`) that v1.0 files get by default.
    #[arg(long)]
    pub reference_exact: bool,
    /// Print a JSON summary instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `cvc load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Input .cvc.
    pub input: PathBuf,
    /// Output .npy (float32, shape rows x dimension; written atomically), or `-` for
    /// standard output (e.g. to pipe into another program).
    pub output: PathBuf,
    /// Only rows A:B (half-open, like a Python slice; A or B may be omitted).
    #[arg(long, value_name = "A:B", conflicts_with_all = ["chunks", "section", "metadata"])]
    pub rows: Option<String>,
    /// Only these chunks, comma-separated (e.g. 0,2,5), concatenated in that order.
    #[arg(long, value_name = "I,J,..", conflicts_with_all = ["section", "metadata"])]
    pub chunks: Option<String>,
    /// Only the rows of sections whose metadata KEY equals VALUE (VALUE parsed as JSON, else a string).
    #[arg(long, value_name = "KEY=VALUE", conflicts_with = "metadata")]
    pub section: Option<String>,
    /// Only the chunks whose metadata KEY equals VALUE.
    #[arg(long, value_name = "KEY=VALUE")]
    pub metadata: Option<String>,
    /// Skip CRC verification of the chunks read.
    #[arg(long)]
    pub no_verify: bool,
    /// Print a JSON summary instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `cvc inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The .cvc file.
    pub input: PathBuf,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `cvc verify`. Exit status: 0 all checks passed, 1 a chunk's CRC-32 failed,
/// 2 the file could not be checked (unreadable, or its structure is invalid).
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The .cvc file.
    pub input: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Run a `cvc` subcommand; `quiet` hides progress bars.
///
/// # Errors
/// Any [`CliError`]; the caller prints it on one line and exits with code 2.
pub fn run(cmd: CvcCmd, quiet: bool) -> Result<i32, CliError> {
    match cmd {
        CvcCmd::Pack(a) => pack(&a, quiet).map(|()| 0),
        CvcCmd::Load(a) => load(&a, quiet).map(|()| 0),
        CvcCmd::Inspect(a) => inspect(&a).map(|()| 0),
        CvcCmd::Verify(a) => verify(&a),
    }
}

fn pack(a: &PackArgs, quiet: bool) -> Result<(), CliError> {
    let input = NpyInput::open(&a.input)?;
    let start = Instant::now();
    let pb = report::bar(input.rows, "packing", quiet || a.json);
    let pbc = pb.clone();
    let chunk_size = a
        .chunk_size
        .unwrap_or_else(|| cvc_quality::chunk_rows(input.dim));
    let opts = PackOptions {
        compression: a.compression.into(),
        chunk_size,
        framing: match a.format {
            FormatArg::V1 => Framing::V1,
            FormatArg::V0 => Framing::V0,
        },
        mmap_optimized: a.mmap_optimized,
        reference_exact: a.reference_exact,
        progress: Some(Arc::new(move |done, _| pbc.set_position(done))),
        ..PackOptions::default()
    };
    let mut w = CvcWriter::create(&a.output, input.dim as usize, opts)?;
    // Feed whole chunks so f32 input goes from the map to the encoder without a copy.
    let batch = chunk_size.max(1);
    let mut buf = Vec::new();
    let mut r = 0;
    while r < input.rows {
        let hi = (r + batch).min(input.rows);
        w.write_rows(input.rows_f32(r, hi, &mut buf))?;
        input.release(hi);
        r = hi;
    }
    let s = w.finish()?;
    pb.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let in_bytes = input.rows * input.dim * 4;
    let err = if a.no_error {
        None
    } else {
        let pb = report::bar(input.rows, "measuring error", quiet || a.json);
        let e = cvc_quality::measure(&input, &a.output, |done| pb.set_position(done))?;
        pb.finish_and_clear();
        Some(e)
    };
    if a.json {
        let mut v = json!({"input": input.path(), "output": a.output.display().to_string(), "rows": s.rows,
               "dimension": input.dim, "chunks": s.chunks, "chunk_size": chunk_size, "bytes": s.bytes,
               "compression": Compression::from(a.compression).name(),
               "ratio_vs_f32": in_bytes as f64 / s.bytes as f64, "seconds": secs});
        if let Some(e) = err {
            v["max_abs_error"] = json!(e.max_abs);
            v["rmse"] = json!(e.rmse);
            v["min_cosine"] = json!(e.min_cosine);
        }
        println!("{v}");
    } else {
        let error = err.map(|e| {
            (
                "error",
                format!(
                    "max |err| {:.3e}, RMSE {:.3e}, min cosine {:.6}",
                    e.max_abs, e.rmse, e.min_cosine
                ),
            )
        });
        print!(
            "{}",
            report::kv(
                &[
                    (
                        "packed",
                        format!("{} x {} -> {}", s.rows, input.dim, a.output.display())
                    ),
                    (
                        "compression",
                        Compression::from(a.compression).name().to_owned()
                    ),
                    ("chunks", format!("{} of {chunk_size} rows", s.chunks)),
                    (
                        "size",
                        format!(
                            "{} ({:.2}x smaller than f32)",
                            report::size(s.bytes),
                            in_bytes as f64 / s.bytes as f64
                        )
                    ),
                    (
                        "time",
                        format!(
                            "{secs:.2} s ({:.0} MB/s of f32 input)",
                            in_bytes as f64 / secs / 1e6
                        )
                    ),
                ]
                .into_iter()
                .chain(error)
                .collect::<Vec<_>>()
            )
        );
    }
    Ok(())
}

fn parse_rows(s: &str, n: u64) -> Result<Range<u64>, CliError> {
    let bad = |reason: String| CliError::Usage {
        arg: "--rows",
        reason,
    };
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| bad(format!("{s:?} is not A:B")))?;
    let num = |t: &str, default: u64| -> Result<u64, CliError> {
        if t.trim().is_empty() {
            Ok(default)
        } else {
            t.trim()
                .parse()
                .map_err(|_| bad(format!("{t:?} is not a row number")))
        }
    };
    let (a, b) = (num(a, 0)?, num(b, n)?);
    if a > b || b > n {
        return Err(bad(format!("{a}:{b} is not within 0:{n}")));
    }
    Ok(a..b)
}

fn parse_kv(s: &str, arg: &'static str) -> Result<(String, Value), CliError> {
    let (k, v) = s.split_once('=').ok_or_else(|| CliError::Usage {
        arg,
        reason: format!("{s:?} is not KEY=VALUE"),
    })?;
    let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
    Ok((k.to_owned(), value))
}

/// Values decoded per batch by `cvc load` (16 MiB of f32): large enough for both cores
/// (eight ~1 MiB pieces of fp16), small enough that memory stays a few MiB.
const LOAD_BATCH: usize = 4 << 20;

fn load(a: &LoadArgs, quiet: bool) -> Result<(), CliError> {
    let reader = CvcReader::open(&a.input)
        .map_err(CliError::in_file(&a.input))?
        .with_checksums(!a.no_verify);
    let n = reader.num_vectors();
    let dim = reader.dimension();
    let segs: Vec<(usize, Range<u64>)> = if let Some(r) = &a.rows {
        reader.segments_for_rows(&[parse_rows(r, n)?])
    } else if let Some(c) = &a.chunks {
        let idx = c
            .split(',')
            .map(|t| {
                t.trim().parse::<usize>().map_err(|_| CliError::Usage {
                    arg: "--chunks",
                    reason: format!("{t:?} is not a chunk index"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let chunks = reader.chunks();
        idx.iter()
            .map(|&i| {
                chunks
                    .get(i)
                    .map(|c| (i, 0..c.rows))
                    .ok_or_else(|| CliError::Usage {
                        arg: "--chunks",
                        reason: format!("chunk {i} does not exist (the file has {})", chunks.len()),
                    })
            })
            .collect::<Result<_, _>>()?
    } else if let Some(s) = &a.section {
        let (k, v) = parse_kv(s, "--section")?;
        reader.segments_for_rows(&reader.section_rows(&k, &v))
    } else if let Some(m) = &a.metadata {
        let (k, v) = parse_kv(m, "--metadata")?;
        let chunks = reader.chunks();
        reader
            .chunks_where_metadata(&k, &v)
            .into_iter()
            .map(|i| (i, 0..chunks[i].rows))
            .collect()
    } else {
        reader
            .chunks()
            .iter()
            .map(|c| (c.index, 0..c.rows))
            .collect()
    };
    let rows: u64 = segs.iter().map(|(_, r)| r.end - r.start).sum();
    let start = Instant::now();
    let pb = report::bar(rows, "loading", quiet || a.json);
    let to_stdout = a.output.as_os_str() == "-";
    let out_name = if to_stdout {
        "standard output".to_owned()
    } else {
        a.output.display().to_string()
    };
    let mut out = if to_stdout {
        None
    } else {
        Some(AtomicFile::create(&a.output)?)
    };
    {
        let stdout = std::io::stdout();
        let mut w: BufWriter<Box<dyn Write + '_>> = BufWriter::with_capacity(
            4 << 20,
            match out.as_mut() {
                Some(f) => Box::new(f),
                None => Box::new(stdout.lock()),
            },
        );
        let header = npy::f32_header(&[rows, dim]).map_err(CliError::io("write", &out_name))?;
        w.write_all(&header)
            .map_err(CliError::io("write", &out_name))?;
        // Decoded in parallel batches of at most LOAD_BATCH values with storage reading
        // ahead across batches: memory stays bounded whatever the file size, and a file
        // that is not in the page cache streams at the speed of the disk.
        let mut done = 0;
        reader.stream_segments(&segs, LOAD_BATCH, |values: &[f32]| {
            npy::write_f32s(&mut w, values).map_err(CliError::io("write", &out_name))?;
            done += values.len() as u64 / dim.max(1);
            pb.set_position(done);
            Ok::<(), CliError>(())
        })?;
        w.flush().map_err(CliError::io("write", &out_name))?;
    }
    if let Some(out) = out {
        out.commit()?;
    }
    pb.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let out_bytes = rows * dim * 4;
    // With the array on standard output, the summary goes to standard error.
    let summary = if a.json {
        format!(
            "{}\n",
            json!({"input": a.input.display().to_string(), "output": out_name, "rows": rows, "dimension": dim,
                   "chunks_read": segs.len(), "bytes_out": out_bytes, "seconds": secs, "verified": !a.no_verify})
        )
    } else {
        report::kv(&[
            ("loaded", format!("{rows} x {dim} -> {out_name}")),
            (
                "chunks read",
                format!("{} of {}", segs.len(), reader.chunks().len()),
            ),
            (
                "crc",
                if a.no_verify {
                    "skipped".into()
                } else {
                    "verified".into()
                },
            ),
            (
                "time",
                format!(
                    "{secs:.2} s ({:.0} MB/s of f32 output)",
                    out_bytes as f64 / secs / 1e6
                ),
            ),
        ])
    };
    if to_stdout {
        eprint!("{summary}");
    } else {
        print!("{summary}");
    }
    Ok(())
}

/// Smallest and largest int4 column scale.
fn scale_range(scales: &[f32]) -> (f32, f32) {
    scales
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &s| {
            (a.min(s), b.max(s))
        })
}

fn chunk_json(reader: &CvcReader) -> Vec<Value> {
    let h = reader.header();
    reader
        .chunks()
        .iter()
        .zip(&h.chunks)
        .map(|(l, c)| {
            let mut v = json!({"index": l.index, "rows": l.rows, "row_start": l.row_start,
                "compression": c.compression.name(), "frame_offset": l.frame_offset,
                "payload_offset": l.payload_offset, "payload_bytes": l.payload_len});
            if let Some(crc) = l.crc {
                v["crc32"] = json!(format!("{crc:08x}"));
            }
            if let Some(p) = c.int8 {
                v["min"] = json!(p.min);
                v["scale"] = json!(p.scale);
            }
            if let Some(cols) = &c.int4 {
                let (lo, hi) = scale_range(cols.scale());
                v["col_scale_min"] = json!(lo);
                v["col_scale_max"] = json!(hi);
            }
            if let Some(m) = &c.metadata {
                v["metadata"] = m.clone();
            }
            v
        })
        .collect()
}

fn inspect(a: &InspectArgs) -> Result<(), CliError> {
    let reader = CvcReader::open(&a.input).map_err(CliError::in_file(&a.input))?;
    let h = reader.header();
    if a.json {
        let sections: Vec<Value> = h
            .sections
            .iter()
            .map(|s| json!({"start_index": s.start_index, "end_index": s.end_index, "metadata": s.metadata}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "file": a.input.display().to_string(), "format": h.framing.name(), "version": [h.version.0, h.version.1],
                "file_size": reader.file_len(), "header_len": reader.header_len(),
                "num_vectors": h.num_vectors, "dimension": h.dimension, "compression": h.compression.name(),
                "mmap_optimized": h.mmap_optimized, "num_chunks": h.chunks.len(),
                "sections": sections, "chunks": chunk_json(&reader)}))
            .expect("JSON values serialize")
        );
        return Ok(());
    }
    let raw = h.num_vectors * h.dimension * 4;
    print!(
        "{}",
        report::kv(&[
            ("file", a.input.display().to_string()),
            (
                "format",
                format!(
                    "CVC {} ({})",
                    h.framing.name(),
                    if h.framing == Framing::V1 {
                        "per-chunk CRC-32"
                    } else {
                        "no checksums"
                    }
                )
            ),
            ("vectors", format!("{} x {}", h.num_vectors, h.dimension)),
            ("compression", h.compression.name().to_owned()),
            (
                "size",
                format!(
                    "{} (f32 would be {}, ratio {:.2}x)",
                    report::size(reader.file_len()),
                    report::size(raw),
                    raw as f64 / reader.file_len().max(1) as f64
                )
            ),
            ("header", format!("{} bytes of JSON", reader.header_len())),
            ("mmap_optimized", h.mmap_optimized.to_string()),
            ("chunks", h.chunks.len().to_string()),
        ])
    );
    for s in &h.sections {
        println!(
            "section       rows {}..{}  {}",
            s.start_index, s.end_index, s.metadata
        );
    }
    let mut t = Table::new(&[
        "chunk",
        "rows",
        "first row",
        "comp",
        "offset",
        "payload",
        "crc32",
        "min / scale",
        "metadata",
    ]);
    for (l, c) in reader.chunks().iter().zip(&h.chunks) {
        t.row(vec![
            l.index.to_string(),
            l.rows.to_string(),
            l.row_start.to_string(),
            c.compression.name().to_owned(),
            l.frame_offset.to_string(),
            report::size(l.payload_len),
            l.crc.map_or_else(|| "-".to_owned(), |c| format!("{c:08x}")),
            match (&c.int8, &c.int4) {
                (Some(p), _) => format!("{:.6} / {:.3e}", p.min, p.scale),
                (_, Some(cols)) => {
                    let (lo, hi) = scale_range(cols.scale());
                    format!("col scales {lo:.3e}..{hi:.3e}")
                }
                _ => "-".to_owned(),
            },
            c.metadata
                .as_ref()
                .map_or_else(|| "-".to_owned(), Value::to_string),
        ]);
    }
    print!("\n{}", t.render());
    Ok(())
}

fn verify(a: &VerifyArgs) -> Result<i32, CliError> {
    let reader = match CvcReader::open(&a.input) {
        Ok(r) => r,
        // The file was read and its header is damaged: a verify finding, exit 1.
        Err(e @ tensorvault_formats::FormatError::ChecksumMismatch { .. }) => {
            if a.json {
                println!(
                    "{}",
                    json!({"file": a.input.display().to_string(), "valid": false,
                           "header_checksum": "mismatch", "error": e.to_string()})
                );
            } else {
                eprintln!("CORRUPT header: {e}");
            }
            return Ok(1);
        }
        Err(e) => return Err(CliError::in_file(&a.input)(e)),
    };
    let sealed = reader.header().header_crc;
    let start = Instant::now();
    let rep = reader.verify()?;
    let secs = start.elapsed().as_secs_f64();
    if a.json {
        let corrupt: Vec<Value> = rep
            .corrupt
            .iter()
            .map(|c| json!({"chunk": c.index, "rows": [c.rows.start, c.rows.end], "payload_offset": c.payload_offset,
                            "stored_crc32": format!("{:08x}", c.stored), "computed_crc32": format!("{:08x}", c.computed)}))
            .collect();
        println!(
            "{}",
            json!({"file": a.input.display().to_string(), "valid": rep.is_ok(), "format": rep.framing.name(),
                   "chunks": rep.chunks, "checksummed": rep.checksummed, "bytes": rep.bytes,
                   "header_checksum": if sealed { "ok" } else { "none" },
                   "corrupt_chunks": corrupt, "seconds": secs})
        );
    } else if rep.is_ok() {
        let how = if rep.checksummed == 0 {
            "structure checked; legacy v0 file has no checksums".to_owned()
        } else if sealed {
            format!(
                "header checksum and {} chunk CRC-32 checks passed",
                rep.checksummed
            )
        } else {
            format!(
                "{} CRC-32 checks passed; they cover chunk payloads only: this header has no \
                 checksum (written by decompressed, or with --reference-exact)",
                rep.checksummed
            )
        };
        println!(
            "OK  {}: {} chunks, {} ({how}) in {:.2} s",
            a.input.display(),
            rep.chunks,
            report::size(rep.bytes),
            secs
        );
    } else {
        for c in &rep.corrupt {
            eprintln!(
                "CORRUPT chunk {} (rows {}..{}, payload at offset {}): stored crc32 {:08x}, computed {:08x}",
                c.index, c.rows.start, c.rows.end, c.payload_offset, c.stored, c.computed
            );
        }
    }
    // 1 like every other verify command: the file was read and is damaged (2 stays for
    // errors that stop the check itself).
    Ok(if rep.is_ok() { 0 } else { 1 })
}
