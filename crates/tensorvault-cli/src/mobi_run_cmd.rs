//! `tensorvault mobi run`: run a MOBI model on `.npy` inputs with the reference runtime
//! and write one `.npy` per graph output.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use serde_json::json;
use tensorvault_formats::mobi::{printable, Model};
use tensorvault_mobi_runtime::{Data, Session, Tensor};

use crate::error::CliError;
use crate::npy;
use crate::npy_header::read_header;

/// Arguments of `mobi run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The .mobi model.
    pub model: PathBuf,
    /// An input array: `NAME=PATH.npy`, or just `PATH.npy` for a one-input model
    /// (repeatable). float32/float64/float16 arrays feed f32 inputs, integer (8 to 64
    /// bits, signed or not) and bool arrays i64 inputs (booleans as 0/1); the first axis
    /// (batch) may differ from the model's declared shape. Every model input needs one
    /// (a missing one is named); a model without inputs takes none.
    #[arg(long = "input")]
    pub inputs: Vec<String>,
    /// Directory for the outputs (created if missing): `<output name>.npy` per graph
    /// output, the name made safe for the file system (characters other than letters,
    /// digits, `.`, `_`, `-` become `_`).
    #[arg(long)]
    pub output_dir: PathBuf,
    /// Print JSON (outputs with shapes and files, timings).
    #[arg(long)]
    pub json: bool,
}

/// Read a C-order `.npy` array as a runtime tensor.
fn read_npy(path: &Path) -> Result<Tensor, CliError> {
    let name = path.display().to_string();
    let bad = |reason: String| CliError::Npy {
        path: name.clone(),
        reason,
    };
    let mut file = File::open(path).map_err(CliError::io("open", &name))?;
    let header = read_header(&mut file, &name)?;
    if header.fortran_order {
        return Err(bad(
            "Fortran-order arrays are not supported; save with np.ascontiguousarray".into(),
        ));
    }
    let descr = header.descr.replace('=', "<");
    let size: u64 = match descr.as_str() {
        "|b1" | "|i1" | "|u1" => 1,
        "<f4" | "<i4" | "<u4" => 4,
        "<f8" | "<i8" | "<u8" => 8,
        "<f2" | "<i2" | "<u2" => 2,
        other => {
            return Err(bad(format!(
                "dtype {other} is not a float (16/32/64), integer (8-64 bits) or bool type"
            )))
        }
    };
    let shape = header.shape.clone();
    let len = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .and_then(|n| n.checked_mul(size))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
    let file_len = file.metadata().map_err(CliError::io("stat", &name))?.len();
    if header.data_offset.checked_add(len) != Some(file_len) {
        return Err(bad(format!(
            "shape {shape:?} needs {len} data bytes after offset {}, the file has {file_len} bytes",
            header.data_offset
        )));
    }
    // Bounded by the bytes really on disk (checked above).
    let mut raw = Vec::new();
    file.take(len)
        .read_to_end(&mut raw)
        .map_err(CliError::io("read", &name))?;
    let dims: Vec<usize> = shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| bad(format!("dimension {d} too large"))))
        .collect::<Result<_, _>>()?;
    let data = match descr.as_str() {
        "<f4" => Data::F32(
            raw.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        "<f8" => Data::F32(
            raw.chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
                .collect(),
        ),
        "<f2" => Data::F32(
            raw.chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
        ),
        "|b1" => Data::I64(raw.iter().map(|&b| i64::from(b != 0)).collect()),
        "|i1" => Data::I64(raw.iter().map(|&b| i64::from(b as i8)).collect()),
        "|u1" => Data::I64(raw.iter().map(|&b| i64::from(b)).collect()),
        "<i2" => Data::I64(
            raw.chunks_exact(2)
                .map(|c| i64::from(i16::from_le_bytes([c[0], c[1]])))
                .collect(),
        ),
        "<u2" => Data::I64(
            raw.chunks_exact(2)
                .map(|c| i64::from(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
        ),
        "<u4" => Data::I64(
            raw.chunks_exact(4)
                .map(|c| i64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
        ),
        // uint64 values above i64::MAX wrap (the runtime computes in i64).
        "<u8" => Data::I64(
            raw.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as i64)
                .collect(),
        ),
        "<i8" => Data::I64(
            raw.chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
        ),
        _ => Data::I64(
            raw.chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
        ),
    };
    Ok(Tensor { shape: dims, data })
}

/// Write a tensor as `.npy` (f32 as `<f4`, i64 as `<i8`), atomically.
fn write_npy(path: &Path, t: &Tensor) -> Result<(), CliError> {
    use npyz::WriterBuilder;
    let name = path.display().to_string();
    let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
    let mut bytes = match &t.data {
        // (A session never returns `Data::Packed`: it holds only weights no output is.)
        f @ (Data::F32(_) | Data::SharedF32(_) | Data::Packed(_)) => {
            let v = f.as_f32().unwrap_or_default();
            let mut b = npy::f32_header(&shape).map_err(CliError::io("encode header", &name))?;
            npy::write_f32s(&mut b, v).map_err(CliError::io("encode", &name))?;
            b
        }
        Data::I64(v) => {
            let mut b = Vec::new();
            let w = npyz::WriteOptions::<i64>::new()
                .dtype(npyz::DType::Plain(
                    "<i8".parse().expect("valid type string"),
                ))
                .shape(&shape)
                .writer(&mut b)
                .begin_nd()
                .map_err(CliError::io("encode header", &name))?;
            drop(w);
            b.extend(v.iter().flat_map(|x| x.to_le_bytes()));
            b
        }
    };
    bytes.shrink_to_fit();
    tensorvault_core::atomic::write_atomic(path, &bytes)?;
    Ok(())
}

/// A file name for an output name: no path separators, no `..`, nothing hidden.
fn file_stem(name: &str, j: usize, used: &mut HashSet<String>) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        s = format!("output_{j}{s}");
    }
    while !used.insert(s.clone()) {
        s = format!("{s}_{j}");
    }
    s
}

/// Match `--input` arguments to the model's inputs.
fn feeds(model: &Model, args: &[String]) -> Result<Vec<(String, PathBuf)>, CliError> {
    let names: Vec<&str> = model.inputs.iter().map(|s| s.name.as_str()).collect();
    let mut out = Vec::new();
    for a in args {
        match a.split_once('=') {
            Some((n, p)) if names.contains(&n) => out.push((n.to_string(), PathBuf::from(p))),
            _ if names.len() == 1 => out.push((names[0].to_string(), PathBuf::from(a))),
            _ => {
                return Err(CliError::Usage {
                    arg: "--input",
                    reason: format!(
                        "{a:?}: use NAME=PATH.npy with NAME one of the model's inputs {:?}",
                        names.iter().map(|n| printable(n)).collect::<Vec<_>>()
                    ),
                })
            }
        }
    }
    Ok(out)
}

/// `mobi run`.
///
/// # Errors
/// A model that does not read or prepare, an input that does not read or fit
/// (missing/unknown name, dtype, shape), a shape problem inside the graph (naming the
/// operator and value), or an output that cannot be written.
pub fn run(a: &RunArgs) -> Result<(), CliError> {
    let t0 = Instant::now();
    let model = Model::open(&a.model).map_err(CliError::in_file(&a.model))?;
    let session = Session::new(&model)?;
    let t_load = t0.elapsed();
    let (names, paths): (Vec<String>, Vec<PathBuf>) = feeds(&model, &a.inputs)?.into_iter().unzip();
    let mut refs: Vec<(&str, Tensor)> = Vec::with_capacity(names.len());
    for (name, path) in names.iter().zip(&paths) {
        refs.push((name.as_str(), read_npy(path)?));
    }
    let t1 = Instant::now();
    let outputs = session.run(&refs)?;
    let t_run = t1.elapsed();
    std::fs::create_dir_all(&a.output_dir)
        .map_err(CliError::io("create", a.output_dir.display()))?;
    let mut used = HashSet::new();
    let mut rows = Vec::new();
    for (j, (name, t)) in outputs.iter().enumerate() {
        let path = a
            .output_dir
            .join(format!("{}.npy", file_stem(name, j, &mut used)));
        write_npy(&path, t)?;
        rows.push((name, path, t));
    }
    if a.json {
        let outs: Vec<_> = rows
            .iter()
            .map(|(n, p, t)| json!({"name": n, "file": p.display().to_string(), "shape": t.shape, "dtype": t.dtype_name()}))
            .collect();
        let doc = json!({
            "model": a.model.display().to_string(),
            "outputs": outs,
            "load_ms": t_load.as_secs_f64() * 1e3,
            "run_ms": t_run.as_secs_f64() * 1e3,
        });
        println!("{doc}");
    } else {
        for (n, p, t) in &rows {
            println!(
                "{} {:?} {} -> {}",
                printable(n),
                t.shape,
                t.dtype_name(),
                p.display()
            );
        }
        println!(
            "ran {} operators in {:.2} ms (prepared in {:.2} ms)",
            model.operators.len(),
            t_run.as_secs_f64() * 1e3,
            t_load.as_secs_f64() * 1e3
        );
    }
    Ok(())
}
