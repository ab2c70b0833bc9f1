//! `tensorvault quant eval`: try the groupwise quantizer at several bit widths on an
//! array and print what each setting costs (bits per value, ratio vs f32) and loses
//! (RMSE, max error, SNR), with single-thread throughput, to pick a tier's settings.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use tensorvault_quant::groupwise::{Levels, QuantParams};
use tensorvault_quant::metrics::ErrorMetrics;
use tensorvault_quant::segment::{encode_tensor, Segment};

use crate::error::CliError;
use crate::npy::NpyInput;
use crate::report::{self, Table};

/// Quantization codec commands (groupwise k-bit, docs/formats/quant.md).
#[derive(Debug, Subcommand)]
pub enum QuantCmd {
    /// Quantize a 2-D float .npy at each bit width and report size, error and speed.
    Eval(EvalArgs),
}

/// Code levels on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LevelsArg {
    /// ±(2^(b-1)-1), every value within scale/2 (the default).
    Symmetric,
    /// -2^(b-1)..2^(b-1)-1 with a signed scale (gguf Q4_0 style; lower RMSE at 3-5 bits).
    Full,
}

/// Arguments of `quant eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Input .npy (float32, float64 or float16, 2-D; quantized as one flat tensor).
    pub input: PathBuf,
    /// Bit widths to try, comma-separated (each in 2..=8).
    #[arg(long, value_delimiter = ',', default_value = "3,5,7,8")]
    pub bits: Vec<u8>,
    /// Values per f16 scale (a power of two in 16..=1024); default: each width's own
    /// (3 bits: 512, 4-5: 256, 6-8: 128).
    #[arg(long)]
    pub group: Option<usize>,
    /// Code levels.
    #[arg(long, value_enum, default_value = "symmetric")]
    pub levels: LevelsArg,
    /// Print a JSON list instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Run a `quant` subcommand.
///
/// # Errors
/// Any [`CliError`]; the caller prints it on one line and exits with code 2.
pub fn run(cmd: QuantCmd) -> Result<i32, CliError> {
    match cmd {
        QuantCmd::Eval(a) => eval(&a).map(|()| 0),
    }
}

/// Median seconds of `f` over a few runs (more for small inputs).
fn time(bytes: usize, mut f: impl FnMut() -> Result<(), CliError>) -> Result<f64, CliError> {
    let reps = if bytes < (64 << 20) { 5 } else { 1 };
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = Instant::now();
        f()?;
        t.push(s.elapsed().as_secs_f64());
    }
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

struct Row {
    p: QuantParams,
    bytes: usize,
    m: ErrorMetrics,
    quant_s: f64,
    dequant_s: f64,
}

fn eval(a: &EvalArgs) -> Result<(), CliError> {
    let input = NpyInput::open(&a.input)?;
    let mut buf = Vec::new();
    let x = input.rows_f32(0, input.rows, &mut buf);
    if x.is_empty() {
        return Err(CliError::Usage {
            arg: "IN.npy",
            reason: "the array has no values".into(),
        });
    }
    let levels = match a.levels {
        LevelsArg::Symmetric => Levels::Symmetric,
        LevelsArg::Full => Levels::Full,
    };
    let f32_bytes = x.len() * 4;
    let mut rows = Vec::new();
    for &bits in &a.bits {
        let p = match a.group {
            Some(g) => QuantParams::new(bits, g)?,
            None => QuantParams::for_bits(bits)?,
        }
        .with_levels(levels);
        let mut seg = Vec::new();
        let quant_s = time(f32_bytes, || {
            seg = encode_tensor(&p, x)?.0;
            Ok(())
        })?;
        let mut y = vec![0f32; x.len()];
        let dequant_s = time(f32_bytes, || {
            Ok(Segment::parse(&seg)?.decode_frame(0, &mut y)?)
        })?;
        let m = ErrorMetrics::compare(x, &y)?;
        rows.push(Row {
            p,
            bytes: seg.len(),
            m,
            quant_s,
            dequant_s,
        });
    }
    let bpv = |r: &Row| r.bytes as f64 * 8.0 / x.len() as f64;
    let ratio = |r: &Row| f32_bytes as f64 / r.bytes as f64;
    let gbps = |s: f64| f32_bytes as f64 / s / 1e9;
    if a.json {
        let list: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({"bits": r.p.bits(), "group_size": r.p.group_size(), "levels": format!("{:?}", r.p.levels()).to_lowercase(),
                       "bits_per_value": bpv(r), "ratio": ratio(r), "bytes": r.bytes,
                       "rmse": r.m.rmse, "rel_rmse": r.m.rel_rmse, "max_abs_error": r.m.max_abs_error, "snr_db": r.m.snr_db,
                       "quant_gbps": gbps(r.quant_s), "dequant_gbps": gbps(r.dequant_s)})
            })
            .collect();
        println!("{}", serde_json::Value::Array(list));
        return Ok(());
    }
    println!(
        "{}: {} values ({} as f32), one segment per setting, single thread",
        input.path(),
        x.len(),
        report::size(f32_bytes as u64)
    );
    let mut t = Table::new(&[
        "bits",
        "group",
        "bits/value",
        "ratio",
        "RMSE",
        "rel RMSE",
        "max err",
        "SNR dB",
        "quant GB/s",
        "dequant GB/s",
    ]);
    for r in &rows {
        t.row(vec![
            r.p.bits().to_string(),
            r.p.group_size().to_string(),
            format!("{:.3}", bpv(r)),
            format!("{:.2}x", ratio(r)),
            format!("{:.4e}", r.m.rmse),
            format!("{:.4}", r.m.rel_rmse),
            format!("{:.4e}", r.m.max_abs_error),
            format!("{:.1}", r.m.snr_db),
            format!("{:.2}", gbps(r.quant_s)),
            format!("{:.2}", gbps(r.dequant_s)),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}
