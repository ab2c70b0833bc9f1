//! `tensorvault mobi inspect|validate|quantize|graph|example`.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use tensorvault_formats::mobi::{
    listing, models, printable, to_dot, validate, Header, Model, QuantTarget, WriteOptions,
};
use tensorvault_formats::FormatError;

use crate::error::CliError;
use crate::report::{self, Table};

/// MOBI (compact mobile model files) commands.
#[derive(Debug, Subcommand)]
pub enum MobiCmd {
    /// Show the header, metadata, I/O specs, tensors (dtype, shape, size) and the graph.
    Inspect(FileArgs),
    /// Check everything (checksums, offsets, counts, names, ids, references) and list
    /// every problem; exit code 1 if there is any.
    Validate(FileArgs),
    /// Rewrite a model with f32 weights quantized to int8, int16 or fp16 (and gzip).
    Quantize(QuantizeArgs),
    /// Print the operator graph (Graphviz DOT with --dot, else a listing).
    Graph(GraphArgs),
    /// Write a fixture model (f32, deterministic weights).
    Example(ExampleArgs),
    /// Convert an ONNX model (.onnx) to MOBI: ops mapped per opset, BatchNorm/Gemm/
    /// constants folded, weights as f32, fp16, int16 or int8.
    Convert(crate::mobi_convert_cmd::ConvertArgs),
}

/// A MOBI file argument.
#[derive(Debug, Args)]
pub struct FileArgs {
    /// The .mobi file.
    pub input: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Quantization targets on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Target {
    /// Per-tensor affine int8.
    Int8,
    /// Per-tensor affine int16.
    Int16,
    /// IEEE half precision.
    Fp16,
}

/// Arguments of `mobi quantize`.
#[derive(Debug, Args)]
pub struct QuantizeArgs {
    /// Input .mobi.
    pub input: PathBuf,
    /// Output .mobi (written atomically).
    pub output: PathBuf,
    /// Target type for f32 weights.
    #[arg(long = "to", value_enum)]
    pub to: Target,
    /// Also gzip every tensor payload.
    #[arg(long)]
    pub gzip: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `mobi graph`.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// The .mobi file.
    pub input: PathBuf,
    /// Graphviz DOT output.
    #[arg(long)]
    pub dot: bool,
}

/// Fixture models.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Example {
    /// LeNet-5 for MNIST (61,706 parameters).
    Lenet5,
    /// The TensorFlow-tutorial CIFAR-10 CNN (122,570 parameters).
    Cifar10,
}

/// Arguments of `mobi example`.
#[derive(Debug, Args)]
pub struct ExampleArgs {
    /// Which model.
    #[arg(value_enum)]
    pub model: Example,
    /// Output .mobi.
    pub output: PathBuf,
    /// Weight seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Run a `mobi` subcommand.
///
/// # Errors
/// Any [`CliError`]; the caller prints it on one line and exits with code 2.
pub fn run(cmd: MobiCmd) -> Result<i32, CliError> {
    match cmd {
        MobiCmd::Inspect(a) => inspect(&a).map(|()| 0),
        MobiCmd::Validate(a) => validate_cmd(&a),
        MobiCmd::Quantize(a) => quantize(&a).map(|()| 0),
        MobiCmd::Graph(a) => graph(&a).map(|()| 0),
        MobiCmd::Example(a) => example(&a).map(|()| 0),
        MobiCmd::Convert(a) => crate::mobi_convert_cmd::run(&a),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(CliError::io("read", path.display()))
}

fn load(path: &Path) -> Result<Model, CliError> {
    Ok(Model::open(path)?)
}

fn inspect(a: &FileArgs) -> Result<(), CliError> {
    let bytes = read(&a.input)?;
    let h = Header::parse(&bytes).map_err(FormatError::from)?;
    let m = Model::from_bytes(&bytes).map_err(FormatError::from)?;
    let tensors: Vec<_> = m
        .tensors
        .iter()
        .map(|t| {
            json!({"id": t.id, "dtype": t.dtype.name(), "shape": t.shape, "bytes": t.data.len(),
                   "gzip": t.gzip, "scale": t.quant.map(|q| q.scale), "zero_point": t.quant.map(|q| q.zero_point)})
        })
        .collect();
    if a.json {
        let io = |v: &[tensorvault_formats::mobi::IoSpec]| -> Vec<_> {
            v.iter()
                .map(|s| json!({"name": s.name, "dtype": s.dtype.name(), "shape": s.shape}))
                .collect()
        };
        let ops: Vec<_> = m.operators.iter().map(|o| json!({"op": o.op.name(), "inputs": o.inputs, "outputs": o.outputs,
            "params": o.params.iter().map(|(k, v)| (k.clone(), json!(v.to_string()))).collect::<serde_json::Map<_, _>>()})).collect();
        let v = json!({"version": h.version, "flags": h.flags, "file_size": h.total_size,
            "name": m.metadata.name, "framework_version": m.metadata.framework_version,
            "created_unix": m.metadata.created_unix, "parameters": m.parameter_count(),
            "inputs": io(&m.inputs), "outputs": io(&m.outputs), "tensors": tensors, "operators": ops});
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(());
    }
    println!(
        "{}",
        report::kv(&[
            ("file", a.input.display().to_string()),
            ("format", format!("MOBI v{}", h.version)),
            (
                "flags",
                format!(
                    "{:#x} (quantized={} fp16={} optimized={})",
                    h.flags,
                    h.flags & 1 != 0,
                    h.flags & 2 != 0,
                    h.flags & 4 != 0
                )
            ),
            ("size", report::size(u64::from(h.total_size))),
            ("name", printable(&m.metadata.name)),
            ("framework", m.metadata.framework_version.to_string()),
            ("created", m.metadata.created_unix.to_string()),
            ("parameters", m.parameter_count().to_string()),
        ])
    );
    let mut io = Table::new(&["kind", "name", "dtype", "shape"]);
    for (kind, v) in [("input", &m.inputs), ("output", &m.outputs)] {
        for s in v {
            io.row(vec![
                kind.into(),
                printable(&s.name),
                s.dtype.name().into(),
                format!("{:?}", s.shape),
            ]);
        }
    }
    println!("{}", io.render());
    let mut t = Table::new(&[
        "id",
        "dtype",
        "shape",
        "bytes",
        "gzip",
        "scale",
        "zero_point",
    ]);
    for x in &m.tensors {
        let q = x.quant.map_or(("-".into(), "-".into()), |q| {
            (q.scale.to_string(), q.zero_point.to_string())
        });
        t.row(vec![
            x.id.to_string(),
            x.dtype.name().into(),
            format!("{:?}", x.shape),
            report::size(x.data.len() as u64),
            x.gzip.to_string(),
            q.0,
            q.1,
        ]);
    }
    println!("{}", t.render());
    print!("{}", listing(&m));
    Ok(())
}

fn validate_cmd(a: &FileArgs) -> Result<i32, CliError> {
    let bytes = read(&a.input)?;
    let r = validate(&bytes);
    if a.json {
        let problems: Vec<String> = r.problems.iter().map(ToString::to_string).collect();
        println!(
            "{}",
            json!({"file": a.input.display().to_string(), "ok": r.is_ok(), "problems": problems})
        );
    } else if r.is_ok() {
        println!("{}: OK", a.input.display());
    } else {
        println!("{}: {} problem(s)", a.input.display(), r.problems.len());
        for p in &r.problems {
            println!("  {}", printable(&p.to_string()));
        }
    }
    Ok(if r.is_ok() { 0 } else { 1 })
}

fn quantize(a: &QuantizeArgs) -> Result<(), CliError> {
    let m = load(&a.input)?;
    let before = std::fs::metadata(&a.input)
        .map_err(CliError::io("stat", a.input.display()))?
        .len();
    let target = match a.to {
        Target::Int8 => QuantTarget::Int8,
        Target::Int16 => QuantTarget::Int16,
        Target::Fp16 => QuantTarget::Fp16,
    };
    let q = m
        .with_options(&WriteOptions {
            quantize: Some(target),
            gzip: a.gzip,
        })
        .map_err(FormatError::from)?;
    let after = q.save(&a.output, &WriteOptions::default())?;
    let (mut max_abs, mut sq, mut n) = (0f64, 0f64, 0u64);
    for (x, y) in m.tensors.iter().zip(&q.tensors) {
        let (x, y) = (
            x.to_f32().map_err(FormatError::from)?,
            y.to_f32().map_err(FormatError::from)?,
        );
        for (p, r) in x.iter().zip(&y) {
            let d = f64::from(p - r).abs();
            max_abs = max_abs.max(d);
            sq += d * d;
            n += 1;
        }
    }
    let rmse = (sq / n.max(1) as f64).sqrt();
    let ratio = after as f64 / before.max(1) as f64;
    if a.json {
        println!(
            "{}",
            json!({"input": a.input.display().to_string(), "output": a.output.display().to_string(),
            "to": target.dtype().name(), "gzip": a.gzip, "bytes_before": before, "bytes_after": after,
            "ratio": ratio, "max_abs_error": max_abs, "rmse": rmse})
        );
    } else {
        println!(
            "{}",
            report::kv(&[
                ("wrote", a.output.display().to_string()),
                (
                    "to",
                    format!(
                        "{}{}",
                        target.dtype().name(),
                        if a.gzip { " + gzip" } else { "" }
                    )
                ),
                (
                    "size",
                    format!(
                        "{} -> {} ({:.1}%)",
                        report::size(before),
                        report::size(after),
                        ratio * 100.0
                    )
                ),
                (
                    "weight error",
                    format!("max |err| {max_abs:.3e}, rmse {rmse:.3e}")
                ),
            ])
        );
    }
    Ok(())
}

fn graph(a: &GraphArgs) -> Result<(), CliError> {
    let m = load(&a.input)?;
    print!("{}", if a.dot { to_dot(&m) } else { listing(&m) });
    Ok(())
}

fn example(a: &ExampleArgs) -> Result<(), CliError> {
    let m = match a.model {
        Example::Lenet5 => models::lenet5(a.seed),
        Example::Cifar10 => models::cifar10_cnn(a.seed),
    }
    .map_err(FormatError::from)?;
    let size = m.save(&a.output, &WriteOptions::default())?;
    println!(
        "wrote {} ({}, {} parameters, {})",
        a.output.display(),
        m.metadata.name,
        m.parameter_count(),
        report::size(size)
    );
    Ok(())
}
