//! `tensorvault mobi convert IN.onnx OUT.mobi`: import an ONNX model (tensorvault-onnx)
//! and write it as MOBI, atomically; nothing is written when the model cannot be
//! expressed.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use indicatif::ProgressBar;
use serde_json::json;
use tensorvault_onnx::{convert_file, ImportOptions, ImportStats, OnnxError, WeightsMode};

use crate::error::CliError;
use crate::report;

/// Models with more nodes than this show a progress bar (on a terminal, without `-q` or
/// `--json`).
const PROGRESS_MIN_NODES: usize = 256;

/// How weights are stored.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Weights {
    /// Everything f32 (exact).
    F32,
    /// Large float tensors as IEEE half precision.
    Fp16,
    /// Conv / fully-connected / MatMul weights as int16; biases and small vectors f32.
    Int16,
    /// Conv / fully-connected / MatMul weights as int8, symmetric, one scale per output
    /// channel; biases and small vectors f32.
    Int8,
}

impl From<Weights> for WeightsMode {
    fn from(w: Weights) -> Self {
        match w {
            Weights::F32 => WeightsMode::F32,
            Weights::Fp16 => WeightsMode::Fp16,
            Weights::Int16 => WeightsMode::Int16,
            Weights::Int8 => WeightsMode::Int8,
        }
    }
}

/// Arguments of `mobi convert`.
#[derive(Debug, Args)]
#[command(
    after_help = "Each ONNX op is mapped with the semantics of the model's opset; \
BatchNormalization is folded into the preceding Conv, Gemm becomes FullyConnected, \
Identity/Dropout/same-type Cast, Constant and Shape of static shapes are folded away, \
auto_pad becomes explicit pads. An op MOBI cannot express is an error naming the op, \
the node and why, and no file is written. Supported ops: docs/onnx-import.md."
)]
pub struct ConvertArgs {
    /// The ONNX model (.onnx; weights must be inside the file, not external data).
    pub input: PathBuf,
    /// The MOBI file to write (atomically).
    pub output: PathBuf,
    /// How weights are stored.
    #[arg(long, value_enum, default_value = "f32")]
    pub weights: Weights,
    /// Gzip every tensor payload.
    #[arg(long)]
    pub gzip: bool,
    /// Pin every symbolic input dimension (e.g. a batch `N`) to this size. Without it,
    /// symbolic dimensions stay symbolic in the MOBI file (a graph whose constants
    /// depend on them is refused with a message asking for this option).
    #[arg(long, value_name = "N")]
    pub batch: Option<u64>,
    /// Refuse ONNX files larger than this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = tensorvault_onnx::limits::DEFAULT_MAX_MODEL_BYTES)]
    pub max_model_bytes: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn folds(s: &ImportStats) -> Vec<(&'static str, usize)> {
    vec![
        ("batchnorm_into_conv", s.folded_batchnorm),
        ("gemm_to_fully_connected", s.folded_gemm),
        ("matmul_add_to_fully_connected", s.folded_matmul_add),
        ("constant_nodes", s.constants),
        ("constant_subgraph_nodes", s.folded_constant),
        ("shape_nodes", s.folded_shape),
        ("identity_dropout_cast_removed", s.removed),
        ("softmax_coerced_to_2d", s.coerced_softmax),
    ]
}

/// Run `mobi convert`.
///
/// # Errors
/// [`CliError::Onnx`] for a model that cannot be read or expressed (nothing written).
pub fn run(a: &ConvertArgs, ctx: &report::Ctx) -> Result<i32, CliError> {
    let opts = ImportOptions {
        weights: a.weights.into(),
        pin_symbolic_dims: a.batch,
        max_model_bytes: a.max_model_bytes,
    };
    // The importer reports (nodes done, nodes total); the bar is the CLI's one kind.
    let mut bar: Option<ProgressBar> = None;
    let mut progress = |done: usize, total: usize| {
        if total < PROGRESS_MIN_NODES {
            return;
        }
        bar.get_or_insert_with(|| ctx.bar(total as u64, "converting", report::Unit::Nodes, a.json))
            .set_position(done as u64);
    };
    let result = convert_file(&a.input, &a.output, &opts, a.gzip, &mut progress);
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    // Content errors name the ONNX file; I/O and save errors name their own paths.
    let (model, stats, size) = result.map_err(|e| match e {
        e @ (OnnxError::Io { .. } | OnnxError::Save { .. }) => CliError::from(e),
        e => CliError::in_file(&a.input)(e),
    })?;
    let onnx_size = std::fs::metadata(&a.input)
        .map_err(CliError::io("stat", a.input.display()))?
        .len();
    let ratio = size as f64 / onnx_size.max(1) as f64;
    if a.json {
        let f: serde_json::Map<_, _> = folds(&stats)
            .into_iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let v = json!({
            "input": a.input.display().to_string(), "output": a.output.display().to_string(),
            "opset": stats.opset, "weights": WeightsMode::from(a.weights).name(), "gzip": a.gzip,
            "nodes_in": stats.nodes_in, "ops_out": stats.ops_out, "initializers": stats.initializers,
            "tensors": model.tensors.len(), "tensors_quantized": stats.tensors_quantized,
            "parameters": model.parameter_count(), "folded": f,
            "onnx_bytes": onnx_size, "mobi_bytes": size, "ratio": ratio,
        });
        println!("{v}");
        return Ok(0);
    }
    let folded: Vec<String> = folds(&stats)
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!(
        "{}",
        report::kv(&[
            ("wrote", a.output.display().to_string()),
            ("opset", stats.opset.to_string()),
            (
                "graph",
                format!(
                    "{} ONNX nodes -> {} MOBI operators",
                    stats.nodes_in, stats.ops_out
                )
            ),
            (
                "folded",
                if folded.is_empty() {
                    "nothing".into()
                } else {
                    folded.join(", ")
                }
            ),
            (
                "weights",
                format!(
                    "{}{} ({} tensors, {} quantized, {} parameters)",
                    WeightsMode::from(a.weights).name(),
                    if a.gzip { " + gzip" } else { "" },
                    model.tensors.len(),
                    stats.tensors_quantized,
                    model.parameter_count()
                )
            ),
            (
                "size",
                format!(
                    "{} -> {} ({:.1}% of the ONNX file)",
                    report::size(onnx_size),
                    report::size(size),
                    ratio * 100.0
                )
            ),
        ])
    );
    Ok(0)
}
