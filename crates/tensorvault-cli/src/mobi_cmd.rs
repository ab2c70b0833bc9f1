//! `tensorvault mobi inspect|validate|quantize|graph|example`.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use tensorvault_formats::mobi::{
    listing, models, ops, printable, shape_text, to_dot, validate, ConstantTensor, Dim, Header,
    Model, QuantTarget, Quantization, WriteOptions,
};
use tensorvault_formats::FormatError;

use crate::error::CliError;
use crate::report::{self, Table};

/// MOBI (compact mobile model files) commands.
#[derive(Debug, Subcommand)]
pub enum MobiCmd {
    /// Show the header (format version), metadata, I/O specs (symbolic dimensions by
    /// name), tensors (dtype, shape, size, quantization: per tensor, or per axis with the
    /// axis, channel count and scale range), value names, each operator's op version
    /// (the version its parameters need, and the newest this build supports) and the
    /// graph.
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
    /// Run a model on .npy inputs with the reference runtime; one .npy per output.
    Run(crate::mobi_run_cmd::RunArgs),
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
    /// int8 per output channel (symmetric, axis 0) for conv/FC weights; 1-D and small
    /// (< 1024 elements) tensors stay f32.
    Int8,
    /// int8 with one affine scale per tensor (1-D and small tensors stay f32).
    #[value(name = "int8-per-tensor")]
    Int8PerTensor,
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
pub fn run(cmd: MobiCmd, ctx: &crate::report::Ctx) -> Result<i32, CliError> {
    match cmd {
        MobiCmd::Inspect(a) => inspect(&a).map(|()| 0),
        MobiCmd::Validate(a) => validate_cmd(&a),
        MobiCmd::Quantize(a) => quantize(&a).map(|()| 0),
        MobiCmd::Graph(a) => graph(&a).map(|()| 0),
        MobiCmd::Example(a) => example(&a).map(|()| 0),
        MobiCmd::Convert(a) => crate::mobi_convert_cmd::run(&a, ctx),
        MobiCmd::Run(a) => crate::mobi_run_cmd::run(&a).map(|()| 0),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    CliError::read_regular(path)
}

fn load(path: &Path) -> Result<Model, CliError> {
    Model::open(path).map_err(CliError::in_file(path))
}

fn dims_json(dims: &[Dim]) -> serde_json::Value {
    dims.iter()
        .map(|d| match d {
            Dim::Fixed(n) => json!(n),
            Dim::Symbolic(s) => json!(s),
        })
        .collect()
}

fn quant_json(t: &ConstantTensor) -> serde_json::Value {
    match &t.quant {
        None => json!({"kind": "none"}),
        Some(Quantization::PerTensor { scale, zero_point }) => {
            json!({"kind": "per-tensor", "scale": scale, "zero_point": zero_point})
        }
        Some(
            q @ Quantization::PerAxis {
                axis, zero_points, ..
            },
        ) => {
            let (lo, hi) = q.scale_range();
            json!({"kind": "per-axis", "axis": axis, "channels": zero_points.len(),
                   "scale_min": lo, "scale_max": hi,
                   "zero_points_all_zero": zero_points.iter().all(|&z| z == 0)})
        }
    }
}

/// The quantization column of the text table.
fn quant_text(t: &ConstantTensor) -> String {
    match &t.quant {
        None => "-".into(),
        Some(Quantization::PerTensor { scale, zero_point }) => {
            format!("per-tensor scale {scale:.3e} zp {zero_point}")
        }
        Some(
            q @ Quantization::PerAxis {
                axis, zero_points, ..
            },
        ) => {
            let (lo, hi) = q.scale_range();
            format!(
                "per-axis axis {axis} x{} scale {lo:.3e}..{hi:.3e}",
                zero_points.len()
            )
        }
    }
}

fn inspect(a: &FileArgs) -> Result<(), CliError> {
    let bytes = read(&a.input)?;
    let named = CliError::in_file;
    let h = Header::parse(&bytes).map_err(|e| named(&a.input)(FormatError::from(e)))?;
    let m = Model::from_bytes(&bytes).map_err(|e| named(&a.input)(FormatError::from(e)))?;
    if a.json {
        let tensors: Vec<_> = m
            .tensors
            .iter()
            .map(|t| {
                json!({"id": t.id, "name": m.value_names.get(&t.id), "dtype": t.dtype.name(),
                       "shape": t.shape, "bytes": t.data.len(), "gzip": t.gzip,
                       "quantization": quant_json(t)})
            })
            .collect();
        let io = |v: &[tensorvault_formats::mobi::IoSpec]| -> Vec<_> {
            v.iter()
                .map(|s| json!({"name": s.name, "dtype": s.dtype.name(), "shape": dims_json(&s.shape)}))
                .collect()
        };
        let ops: Vec<_> = m.operators.iter().map(|o| json!({"op": o.op.name(),
            "op_version": ops::required_version(o), "op_version_supported": ops::spec(o.op).version,
            "inputs": o.inputs, "outputs": o.outputs,
            "params": o.params.iter().map(|(k, v)| (k.clone(), json!(v.to_string()))).collect::<serde_json::Map<_, _>>()})).collect();
        let names: serde_json::Map<_, _> = m
            .value_names
            .iter()
            .map(|(id, n)| (id.to_string(), json!(n)))
            .collect();
        let v = json!({"format_version": h.version, "version": h.version, "flags": h.flags,
            "file_size": h.total_size,
            "name": m.metadata.name, "framework_version": m.metadata.framework_version,
            "created_unix": m.metadata.created_unix, "parameters": m.parameter_count(),
            "inputs": io(&m.inputs), "outputs": io(&m.outputs), "tensors": tensors,
            "operators": ops, "value_names": names});
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
            ("value names", m.value_names.len().to_string()),
        ])
    );
    let mut io = Table::new(&["kind", "name", "dtype", "shape"]);
    for (kind, v) in [("input", &m.inputs), ("output", &m.outputs)] {
        for s in v {
            io.row(vec![
                kind.into(),
                printable(&s.name),
                s.dtype.name().into(),
                printable(&shape_text(&s.shape)),
            ]);
        }
    }
    println!("{}", io.render());
    let mut t = Table::new(&[
        "id",
        "name",
        "dtype",
        "shape",
        "bytes",
        "gzip",
        "quantization",
    ]);
    for x in &m.tensors {
        t.row(vec![
            x.id.to_string(),
            m.value_names
                .get(&x.id)
                .map_or_else(|| "-".into(), |n| printable(n)),
            x.dtype.name().into(),
            format!("{:?}", x.shape),
            report::size(x.data.len() as u64),
            x.gzip.to_string(),
            quant_text(x),
        ]);
    }
    println!("{}", t.render());
    let mut ot = Table::new(&["#", "op", "op version", "supported"]);
    for (i, o) in m.operators.iter().enumerate() {
        ot.row(vec![
            i.to_string(),
            o.op.name().into(),
            ops::required_version(o).to_string(),
            ops::spec(o.op).version.to_string(),
        ]);
    }
    println!("{}", ot.render());
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
        Target::Int8PerTensor => QuantTarget::Int8PerTensor,
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
