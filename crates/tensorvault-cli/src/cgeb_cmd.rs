//! `tensorvault cgeb pack|inspect|get|verify`.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use serde_json::json;
use tensorvault_formats::cgeb::{
    BatchBinaryEncoder, BatchReader, BatchReaderOptions, EmbeddingBinaryCodec, FusedEmbedding,
    FusedEmbeddingRef,
};

use crate::error::CliError;
use crate::npy::NpyInput;
use crate::report::{self, Table};

/// CGEB (fused embedding records) commands.
#[derive(Debug, Subcommand)]
pub enum CgebCmd {
    /// Pack a 2-D float .npy (rows x dimension) into a batch OUT.cgeb + OUT.cgei.
    Pack(PackArgs),
    /// Show a record's header, or a batch's index summary.
    Inspect(FileArgs),
    /// Print one record of a batch (or the record in a single-record file).
    Get(GetArgs),
    /// Check every record hash, the data-file hash and 64-byte alignment of every vector.
    Verify(FileArgs),
}

/// Arguments of `cgeb pack`.
#[derive(Debug, Args)]
pub struct PackArgs {
    /// Input .npy (float16/32/64, rows x dimension).
    pub input: PathBuf,
    /// Output batch name: OUT.cgeb and OUT.cgei are written (atomically).
    pub output: PathBuf,
    /// Expert weights .npy (rows x experts); default: random softmax weights.
    #[arg(long)]
    pub weights: Option<PathBuf>,
    /// Number of experts for random weights.
    #[arg(long, default_value_t = 8)]
    pub experts: u8,
    /// Experts selected per record (the largest weights).
    #[arg(long, default_value_t = 2)]
    pub top_k: u8,
    /// Record alignment in the data file (4096 for GPU Direct Storage, or 64).
    #[arg(long, default_value_t = 4096)]
    pub alignment: u32,
    /// Store the float payload little-endian (flag LE_PAYLOAD) instead of big-endian.
    #[arg(long)]
    pub le_payload: bool,
    /// Seed for random expert weights.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// A CGEB file argument.
#[derive(Debug, Args)]
pub struct FileArgs {
    /// A batch (NAME, NAME.cgeb or NAME.cgei) or a single-record .cgeb file.
    pub input: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `cgeb get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// A batch (NAME, NAME.cgeb or NAME.cgei) or a single-record .cgeb file.
    pub input: PathBuf,
    /// Record number.
    #[arg(long, default_value_t = 0)]
    pub index: usize,
    /// Print JSON (with the whole vector).
    #[arg(long)]
    pub json: bool,
}

/// Run a `cgeb` subcommand.
///
/// # Errors
/// Any [`CliError`]; the caller prints it on one line and exits with code 2.
pub fn run(cmd: CgebCmd, ctx: &report::Ctx) -> Result<i32, CliError> {
    match cmd {
        CgebCmd::Pack(a) => pack(&a, ctx).map(|()| 0),
        CgebCmd::Inspect(a) => inspect(&a).map(|()| 0),
        CgebCmd::Get(a) => get(&a).map(|()| 0),
        CgebCmd::Verify(a) => verify(&a),
    }
}

/// Random softmax expert weights, deterministic per seed.
pub fn random_weights(rng: &mut ChaCha8Rng, experts: usize) -> Vec<f32> {
    let n = Normal::new(0.0f32, 1.0).expect("valid normal");
    let mut w: Vec<f32> = (0..experts).map(|_| n.sample(rng).exp()).collect();
    let s: f32 = w.iter().sum::<f32>().max(f32::MIN_POSITIVE);
    w.iter_mut().for_each(|x| *x /= s);
    w
}

/// Indices of the `k` largest weights, largest first.
pub fn top_k(weights: &[f32], k: usize) -> Vec<u8> {
    let mut idx: Vec<u8> = (0..weights.len()).map(|i| i as u8).collect();
    idx.sort_by(|&a, &b| weights[usize::from(b)].total_cmp(&weights[usize::from(a)]));
    idx.truncate(k);
    idx
}

fn pack(a: &PackArgs, ctx: &report::Ctx) -> Result<(), CliError> {
    let input = NpyInput::open(&a.input)?;
    let weights = a.weights.as_deref().map(NpyInput::open).transpose()?;
    let experts = match &weights {
        Some(w) if w.rows != input.rows => {
            return Err(CliError::Usage {
                arg: "--weights",
                reason: format!("{} rows, the input has {}", w.rows, input.rows),
            })
        }
        Some(w) => u8::try_from(w.dim).map_err(|_| CliError::Usage {
            arg: "--weights",
            reason: format!("{} experts, at most 255", w.dim),
        })?,
        None => a.experts,
    };
    if a.top_k > experts {
        return Err(CliError::Usage {
            arg: "--top-k",
            reason: format!("{} is more than the {experts} experts", a.top_k),
        });
    }
    let codec = EmbeddingBinaryCodec::new().with_le_payload(a.le_payload);
    let mut enc = BatchBinaryEncoder::new(codec, a.alignment)?;
    let mut rng = ChaCha8Rng::seed_from_u64(a.seed);
    let (mut buf, mut wbuf) = (Vec::new(), Vec::new());
    let pb = ctx.bar(input.rows, "encoding", report::Unit::Rows, a.json);
    for r in 0..input.rows {
        if r % 1024 == 0 {
            pb.set_position(r);
        }
        let v = input.rows_f32(r, r + 1, &mut buf).to_vec();
        let w = match &weights {
            Some(wf) => wf.rows_f32(r, r + 1, &mut wbuf).to_vec(),
            None => random_weights(&mut rng, experts.into()),
        };
        let sel = top_k(&w, a.top_k.into());
        enc.push(&FusedEmbedding::new(v, w, sel))?;
    }
    pb.set_position(input.rows);
    pb.finish_and_clear();
    let (data, index) = enc.write_gds_file(&a.output)?;
    let bytes = std::fs::metadata(&data).map(|m| m.len()).unwrap_or(0);
    if a.json {
        println!(
            "{}",
            json!({"records": enc.len(), "dimension": input.dim, "experts": experts, "top_k": a.top_k,
                   "alignment": a.alignment, "data": data.display().to_string(),
                   "index": index.display().to_string(), "bytes": bytes})
        );
    } else {
        print!(
            "{}",
            report::kv(&[
                (
                    "packed",
                    format!("{} x {} -> {}", enc.len(), input.dim, data.display())
                ),
                ("index", index.display().to_string()),
                ("experts", format!("{experts} (top {})", a.top_k)),
                ("alignment", a.alignment.to_string()),
                ("size", report::size(bytes)),
            ])
        );
    }
    Ok(())
}

/// A batch if `NAME.cgei` exists next to the input, else a single record.
fn is_batch(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "cgei") || p.with_extension("cgei").exists()
}

fn read_single(p: &Path) -> Result<Vec<u8>, CliError> {
    // `NAME` (no such file) naming a batch whose `NAME.cgeb` exists: its index is what is
    // missing, not `NAME`.
    let data = p.with_extension("cgeb");
    if !p.exists() && data.is_file() {
        return Err(CliError::MissingIndex {
            data: data.display().to_string(),
            index: p.with_extension("cgei").display().to_string(),
            reason: format!("{} names a batch: NAME.cgeb with NAME.cgei", p.display()),
        });
    }
    CliError::read_regular(p)
}

/// Bytes after the first record of a file read as a single record: `Some(message)` when
/// the file is longer than its record. That is most often a batch data file whose `.cgei`
/// index is missing; the message names the index path looked for.
fn beyond_single(p: &Path, bytes: &[u8], record_len: usize) -> Option<(String, String)> {
    (record_len != bytes.len()).then(|| {
        (
            p.with_extension("cgei").display().to_string(),
            format!(
                "{} bytes after the record that ends at offset {record_len} are not covered by \
                 any check: a batch data file needs its index",
                bytes.len() - record_len
            ),
        )
    })
}

/// A file read as one record: it must be exactly one record (see [`beyond_single`]).
fn single_record<'a>(p: &Path, bytes: &'a [u8]) -> Result<FusedEmbeddingRef<'a>, CliError> {
    let r = EmbeddingBinaryCodec::new()
        .decode_zero_copy(bytes)
        .map_err(CliError::in_file(p))?;
    match beyond_single(p, bytes, r.record_len()) {
        Some((index, reason)) => Err(CliError::MissingIndex {
            data: p.display().to_string(),
            index,
            reason,
        }),
        None => Ok(r),
    }
}

fn header_rows(r: &FusedEmbeddingRef<'_>) -> Vec<(&'static str, String)> {
    let h = r.header();
    vec![
        ("version", h.version.get().to_string()),
        ("flags", format!("{:#06x}", h.flags.get())),
        (
            "payload",
            if h.le_payload() {
                "little-endian"
            } else {
                "big-endian"
            }
            .into(),
        ),
        ("dimension", h.dimension.get().to_string()),
        ("num_experts", h.num_experts.to_string()),
        ("top_k", h.top_k.to_string()),
        ("content_hash", format!("{:#018x}", h.content_hash.get())),
        (
            "pipeline_latency_us",
            h.pipeline_latency_us.get().to_string(),
        ),
        (
            "aux",
            format!(
                "{} bytes at {} ({})",
                h.aux_data_length.get(),
                h.aux_data_offset.get(),
                r.aux_compression().name()
            ),
        ),
        ("record bytes", r.record_len().to_string()),
    ]
}

fn inspect(a: &FileArgs) -> Result<(), CliError> {
    if is_batch(&a.input) {
        let r = BatchReader::open(&a.input).map_err(CliError::in_file(&a.input))?;
        let ix = r.index();
        let first = if r.is_empty() { None } else { Some(r.get(0)?) };
        if a.json {
            println!(
                "{}",
                json!({"kind": "batch", "records": r.len(), "record_alignment": ix.record_alignment,
                       "data_file_hash": format!("{:#018x}", ix.data_file_hash), "data_bytes": r.data().len(),
                       "dimension": first.map(|f| f.header().dimension.get()),
                       "first_offsets": ix.offsets.iter().take(8).collect::<Vec<_>>()})
            );
            return Ok(());
        }
        let mut t = Table::new(&["record", "offset", "bytes", "dimension", "experts", "aux"]);
        for i in 0..r.len().min(10) {
            let rec = r.get(i)?;
            let h = rec.header();
            t.row(vec![
                i.to_string(),
                ix.offsets[i].to_string(),
                rec.record_len().to_string(),
                h.dimension.get().to_string(),
                format!("{}/{}", h.top_k, h.num_experts),
                h.aux_data_length.get().to_string(),
            ]);
        }
        print!(
            "{}",
            report::kv(&[
                (
                    "batch",
                    r.data_path()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                ),
                ("records", r.len().to_string()),
                ("alignment", ix.record_alignment.to_string()),
                (
                    "data file",
                    format!(
                        "{} (xxh3 {:#018x}, verified)",
                        report::size(r.data().len() as u64),
                        ix.data_file_hash
                    )
                ),
            ])
        );
        print!("\n{}", t.render());
        if r.len() > 10 {
            println!("... {} more", r.len() - 10);
        }
        return Ok(());
    }
    let bytes = read_single(&a.input)?;
    let r = single_record(&a.input, &bytes)?;
    let rows = header_rows(&r);
    if a.json {
        let m: serde_json::Map<_, _> = rows
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        println!("{}", serde_json::Value::Object(m));
    } else {
        print!("{}", report::kv(&rows));
    }
    Ok(())
}

fn get(a: &GetArgs) -> Result<(), CliError> {
    let single;
    let reader;
    let rec = if is_batch(&a.input) {
        reader = BatchReader::open(&a.input).map_err(CliError::in_file(&a.input))?;
        reader.get(a.index)?
    } else {
        // Without an index the file must be one record (a batch data file whose index is
        // missing is that error, naming the index path, whatever --index asks for).
        single = read_single(&a.input)?;
        let rec = single_record(&a.input, &single)?;
        if a.index != 0 {
            return Err(CliError::Usage {
                arg: "--index",
                reason: format!(
                    "{} is a single-record file (no {} next to it): it has only record 0",
                    a.input.display(),
                    a.input.with_extension("cgei").display()
                ),
            });
        }
        rec
    };
    let v = rec.vector();
    if a.json {
        println!(
            "{}",
            json!({"index": a.index, "dimension": v.len(), "vector": v.to_vec(),
                   "expert_weights": rec.expert_weights().to_vec(), "selected_experts": rec.selected_experts(),
                   "pipeline_latency_us": rec.pipeline_latency_us(),
                   "content_hash": format!("{:#018x}", rec.content_hash()),
                   "aux_bytes": rec.aux_data_stored().map_or(0, <[u8]>::len)})
        );
        return Ok(());
    }
    let head: Vec<String> = v.iter().take(8).map(|x| format!("{x:.6}")).collect();
    let mut rows = header_rows(&rec);
    rows.push((
        "vector[..8]",
        format!(
            "[{}{}]",
            head.join(", "),
            if v.len() > 8 { ", ..." } else { "" }
        ),
    ));
    rows.push((
        "expert_weights",
        format!("{:?}", rec.expert_weights().to_vec()),
    ));
    rows.push(("selected_experts", format!("{:?}", rec.selected_experts())));
    print!("{}", report::kv(&rows));
    Ok(())
}

fn verify(a: &FileArgs) -> Result<i32, CliError> {
    if !is_batch(&a.input) {
        let bytes = read_single(&a.input)?;
        let codec = EmbeddingBinaryCodec::new();
        let len = codec
            .decode_zero_copy(&bytes)
            .map_err(CliError::in_file(&a.input))?
            .record_len();
        if let Some((index, reason)) = beyond_single(&a.input, &bytes, len) {
            // A single-record file is exactly one record. Trailing bytes are most often a
            // batch data file whose .cgei index is missing: its first record is not "the
            // file", and saying "ok" would vouch for bytes nothing checked.
            let msg = CliError::MissingIndex {
                data: a.input.display().to_string(),
                index,
                reason,
            }
            .to_string();
            if a.json {
                println!("{}", json!({"kind": "record", "ok": false, "error": msg}));
            } else {
                eprintln!("FAILED {msg}");
            }
            return Ok(1);
        }
        let r = codec.decode(&bytes).map_err(CliError::in_file(&a.input))?;
        if a.json {
            println!(
                "{}",
                json!({"kind": "record", "ok": true, "dimension": r.vector.len()})
            );
        } else {
            println!("ok: 1 record, content hash verified");
        }
        return Ok(0);
    }
    let opts = BatchReaderOptions {
        verify_data_hash: false,
        verify_records: true,
    };
    let r = match BatchReader::open_with(&a.input, opts) {
        Ok(r) => r,
        // The index was read and does not match its checksum: a verify finding (exit 1).
        Err(tensorvault_formats::FormatError::Cgeb(
            e @ tensorvault_formats::cgeb::CgebError::IndexChecksumMismatch { .. },
        )) => {
            if a.json {
                println!(
                    "{}",
                    json!({"kind": "batch", "ok": false, "index_checksum": "mismatch", "error": e.to_string()})
                );
            } else {
                eprintln!("CORRUPT index: {e}");
            }
            return Ok(1);
        }
        Err(e) => return Err(CliError::in_file(&a.input)(e)),
    };
    let index_v2 = r.index().version >= 2;
    let rep = r.verify();
    if a.json {
        println!(
            "{}",
            json!({"kind": "batch", "ok": rep.is_ok(), "records": rep.records,
                   "index_checksum": if index_v2 { "ok" } else { "none (version 1 index)" },
                   "data_hash_ok": rep.stored_data_hash == rep.computed_data_hash,
                   "bad_records": rep.bad_records.iter().map(|(i, e)| json!({"record": i, "error": e})).collect::<Vec<_>>(),
                   "misaligned_vectors": rep.misaligned_vectors})
        );
    } else {
        println!(
            "index: {}",
            if index_v2 {
                "version 2, checksum ok"
            } else {
                "version 1: no checksum, its offsets are checked for order and range only"
            }
        );
        println!(
            "{} records, data file hash {}, {} bad records, {} misaligned vectors",
            rep.records,
            if rep.stored_data_hash == rep.computed_data_hash {
                "ok"
            } else {
                "MISMATCH"
            },
            rep.bad_records.len(),
            rep.misaligned_vectors.len()
        );
        for (i, e) in rep.bad_records.iter().take(20) {
            println!("record {i}: {e}");
        }
        println!("{}", if rep.is_ok() { "ok" } else { "CORRUPT" });
    }
    Ok(if rep.is_ok() { 0 } else { 1 })
}
