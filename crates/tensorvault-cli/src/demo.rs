//! `tensorvault demo`: the project's main job on an embedded default workload.
//!
//! Makes 100,000 x 768 sentence-embedding-like vectors (clustered, anisotropic,
//! L2-normalised, as real encoder outputs are), packs them as fp16, int8 and bf16, loads
//! them back, and prints sizes, compression ratios, throughput and reconstruction error.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal, Normal};
use rayon::prelude::*;
use serde_json::json;
use tensorvault_core::atomic::AtomicFile;
use tensorvault_formats::cvc::{pack, Compression, CvcReader, PackOptions};

use crate::error::CliError;
use crate::npy;
use crate::report::{self, Table};

/// Arguments of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Directory for the workload's files (created if missing).
    #[arg(default_value = "tensorvault-demo")]
    pub dir: PathBuf,
    /// Number of vectors.
    #[arg(long, default_value_t = 100_000)]
    pub rows: usize,
    /// Vector dimension.
    #[arg(long, default_value_t = 768)]
    pub dim: usize,
    /// Vectors per CVC chunk.
    #[arg(long, default_value_t = 10_000)]
    pub chunk_size: u64,
    /// Seed of the synthetic workload.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Rows generated per RNG stream (so generation is parallel and still deterministic).
const GEN_BLOCK: usize = 1024;
/// Number of topic clusters in the synthetic corpus.
const CLUSTERS: usize = 64;

/// Deterministic embedding-like vectors: cluster centre + noise, per-dimension scales
/// drawn log-normal (a few dominant dimensions, as in real encoders), L2-normalised.
fn synth_embeddings(rows: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let std_normal = Normal::new(0.0f32, 1.0).expect("valid normal");
    let scales: Vec<f32> = {
        let ln = LogNormal::new(0.0f32, 0.5).expect("valid lognormal");
        (0..dim).map(|_| ln.sample(&mut rng)).collect()
    };
    let centres: Vec<f32> = (0..CLUSTERS * dim)
        .map(|_| std_normal.sample(&mut rng))
        .collect();
    let mut out = vec![0f32; rows * dim];
    out.par_chunks_mut(GEN_BLOCK * dim)
        .enumerate()
        .for_each(|(b, block)| {
            let mut rng = ChaCha8Rng::seed_from_u64(
                seed ^ (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(b as u64 + 1)),
            );
            for row in block.chunks_mut(dim) {
                let k = rng.random_range(0..CLUSTERS);
                let c = &centres[k * dim..(k + 1) * dim];
                let mut norm = 0f32;
                for ((x, &m), &s) in row.iter_mut().zip(c).zip(&scales) {
                    *x = (m + 0.8 * std_normal.sample(&mut rng)) * s;
                    norm += *x * *x;
                }
                let inv = 1.0 / norm.sqrt().max(f32::MIN_POSITIVE);
                row.iter_mut().for_each(|x| *x *= inv);
            }
        });
    out
}

/// Reconstruction error of `got` against `want` (rows of `dim`).
struct ErrorStats {
    max_abs: f64,
    rmse: f64,
    mean_cos: f64,
}

fn error_stats(want: &[f32], got: &[f32], dim: usize) -> ErrorStats {
    let (max_abs, sq, cos) = want
        .par_chunks(dim)
        .zip(got.par_chunks(dim))
        .map(|(a, b)| {
            let (mut m, mut sq, mut dot, mut na, mut nb) = (0f64, 0f64, 0f64, 0f64, 0f64);
            for (&x, &y) in a.iter().zip(b) {
                let (x, y) = (f64::from(x), f64::from(y));
                m = m.max((x - y).abs());
                sq += (x - y) * (x - y);
                dot += x * y;
                na += x * x;
                nb += y * y;
            }
            (m, sq, dot / (na.sqrt() * nb.sqrt()).max(f64::MIN_POSITIVE))
        })
        .reduce(
            || (0.0, 0.0, 0.0),
            |a, b| (a.0.max(b.0), a.1 + b.1, a.2 + b.2),
        );
    ErrorStats {
        max_abs,
        rmse: (sq / want.len().max(1) as f64).sqrt(),
        mean_cos: cos / (want.len() / dim).max(1) as f64,
    }
}

fn step(quiet: bool, msg: &str) {
    if !quiet {
        eprintln!("[demo] {msg}");
    }
}

fn write_npy(path: &Path, values: &[f32], rows: usize, dim: usize) -> Result<(), CliError> {
    let name = path.display().to_string();
    let mut f = AtomicFile::create(path)?;
    {
        let mut w = BufWriter::with_capacity(4 << 20, &mut f);
        let header =
            npy::f32_header(&[rows as u64, dim as u64]).map_err(CliError::io("write", &name))?;
        w.write_all(&header).map_err(CliError::io("write", &name))?;
        npy::write_f32s(&mut w, values).map_err(CliError::io("write", &name))?;
        w.flush().map_err(CliError::io("write", &name))?;
    }
    f.commit()?;
    Ok(())
}

/// Run the demo.
///
/// # Errors
/// [`CliError`] for I/O problems in the demo directory or bad arguments.
pub fn run(a: &DemoArgs, quiet: bool) -> Result<(), CliError> {
    if a.rows == 0 || a.dim == 0 || a.chunk_size == 0 {
        return Err(CliError::Usage {
            arg: "--rows/--dim/--chunk-size",
            reason: "must all be at least 1".into(),
        });
    }
    let quiet = quiet || a.json;
    std::fs::create_dir_all(&a.dir).map_err(CliError::io("create directory", a.dir.display()))?;
    let (rows, dim) = (a.rows, a.dim);
    let raw_bytes = (rows * dim * 4) as u64;
    step(
        quiet,
        &format!("generating {rows} x {dim} embeddings (seed {})", a.seed),
    );
    let data = synth_embeddings(rows, dim, a.seed);
    let npy_path = a.dir.join("embeddings.npy");
    write_npy(&npy_path, &data, rows, dim)?;
    step(
        quiet,
        &format!("wrote {} ({})", npy_path.display(), report::size(raw_bytes)),
    );

    let mut table = Table::new(&[
        "format",
        "file",
        "size",
        "ratio",
        "pack MB/s",
        "load MB/s",
        "max |err|",
        "RMSE",
        "mean cos",
    ]);
    let mut results = Vec::new();
    for comp in [Compression::Fp16, Compression::Int8, Compression::Bf16] {
        let path = a.dir.join(format!("embeddings_{}.cvc", comp.name()));
        step(quiet, &format!("packing {} ...", comp.name()));
        let opts = PackOptions {
            compression: comp,
            chunk_size: a.chunk_size,
            ..PackOptions::default()
        };
        let t = Instant::now();
        let summary = pack(&path, &data, dim, &opts)?;
        let pack_s = t.elapsed().as_secs_f64();
        step(quiet, &format!("loading {} ...", comp.name()));
        let t = Instant::now();
        let reader = CvcReader::open_mmap(&path)?;
        let back = reader.load_all()?;
        let load_s = t.elapsed().as_secs_f64();
        let back = back
            .as_slice::<f32>()
            .map_err(tensorvault_formats::FormatError::from)?;
        let err = error_stats(&data, back, dim);
        let t = Instant::now();
        let mid = rows as u64 / 2;
        let part = reader.load_rows(mid..(mid + 100).min(rows as u64))?;
        let range_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let ok = reader.verify()?.is_ok();
        let verify_ms = t.elapsed().as_secs_f64() * 1e3;
        let ratio = raw_bytes as f64 / summary.bytes as f64;
        let (pack_mbs, load_mbs) = (
            raw_bytes as f64 / pack_s / 1e6,
            raw_bytes as f64 / load_s / 1e6,
        );
        table.row(vec![
            comp.name().to_owned(),
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            report::size(summary.bytes),
            format!("{ratio:.2}x"),
            format!("{pack_mbs:.0}"),
            format!("{load_mbs:.0}"),
            format!("{:.2e}", err.max_abs),
            format!("{:.2e}", err.rmse),
            format!("{:.6}", err.mean_cos),
        ]);
        results.push(json!({
            "compression": comp.name(), "path": path.display().to_string(), "bytes": summary.bytes,
            "chunks": summary.chunks, "ratio_vs_f32": ratio, "pack_seconds": pack_s, "load_seconds": load_s,
            "pack_mb_per_s": pack_mbs, "load_mb_per_s": load_mbs, "max_abs_error": err.max_abs,
            "rmse": err.rmse, "mean_cosine": err.mean_cos, "range_load_100_rows_ms": range_ms,
            "range_rows": part.shape().dims()[0], "verify_ms": verify_ms, "verified": ok,
        }));
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"dir": a.dir.display().to_string(), "rows": rows, "dimension": dim,
                "f32_bytes": raw_bytes, "chunk_size": a.chunk_size, "threads": rayon::current_num_threads(),
                "results": results}))
            .expect("JSON values serialize")
        );
        return Ok(());
    }
    println!(
        "tensorvault demo: {rows} x {dim} f32 embeddings ({}) in {}, chunks of {} vectors, {} threads\n",
        report::size(raw_bytes),
        a.dir.display(),
        a.chunk_size,
        rayon::current_num_threads()
    );
    print!("{}", table.render());
    println!(
        "\nMB/s = MB of f32 vectors per second (pack includes fsync; load decodes the whole file)."
    );
    for r in &results {
        println!(
            "{:>5}: 100-row range load {:.2} ms (reads 1 chunk), CRC verify {:.0} ms: {}",
            r["compression"].as_str().unwrap_or_default(),
            r["range_load_100_rows_ms"].as_f64().unwrap_or_default(),
            r["verify_ms"].as_f64().unwrap_or_default(),
            if r["verified"].as_bool() == Some(true) {
                "ok"
            } else {
                "CORRUPT"
            }
        );
    }
    Ok(())
}
