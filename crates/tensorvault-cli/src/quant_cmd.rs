//! `tensorvault quant eval`: try the groupwise quantizer at several bit widths on an
//! array and print what each setting costs (bits per value, ratio vs f32) and loses
//! (RMSE, max error, SNR), with single-thread throughput, to pick a tier's settings.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use tensorvault_quant::groupwise::{Levels, QuantParams};
use tensorvault_quant::kind::{v2_default_group_size, v2_layout};
use tensorvault_quant::metrics::ErrorMetrics;
use tensorvault_quant::segment::{encode_tensor, Segment};
use tensorvault_quant::segment_v2::{self, Axis, SegmentV2, V2Params};

use crate::error::CliError;
use crate::npy::NpyInput;
use crate::report::{self, Table};
use crate::store_cmd::KindArg;

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
    /// Code levels (codec v1 only).
    #[arg(long, value_enum, default_value = "symmetric")]
    pub levels: LevelsArg,
    /// Evaluate codec v2 (the store's default) with the layout a quantized store tier
    /// gives this kind of tensor (rows = the array's second dimension): kv_key per
    /// channel over groups of rows, kv_value per channel at >= 5 bits and along rows
    /// below (both keeping row 0 in f16, the attention sink), weight and embedding along
    /// rows with the clip search, generic along rows. Without it: codec v1 (one
    /// symmetric f16 scale per group).
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,
    /// Print a JSON list instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Run a `quant` subcommand.
///
/// # Errors
/// Any [`CliError`]; the caller prints it on one line and exits with code 2.
pub fn run(cmd: QuantCmd, ctx: &report::Ctx) -> Result<i32, CliError> {
    match cmd {
        QuantCmd::Eval(a) => eval(&a, ctx).map(|()| 0),
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
    bits: u8,
    group: usize,
    layout: String,
    bytes: usize,
    m: ErrorMetrics,
    quant_s: f64,
    dequant_s: f64,
}

/// The v2 settings the store would use for `kind` at `bits` on rows of `width`
/// (`tensorvault_quant::kind::v2_layout`, the function the store's tiers call; row 0
/// kept as f16 for KV kinds, as in a KV tensor's first block).
fn v2_params(
    kind: KindArg,
    bits: u8,
    group: Option<usize>,
    width: usize,
) -> Result<V2Params, CliError> {
    let g = match group {
        Some(g) => u32::try_from(g).unwrap_or(u32::MAX),
        None => v2_default_group_size(bits),
    };
    let width = u32::try_from(width).ok();
    v2_layout(kind.kind(), bits, g, width, true).map_err(|e| CliError::Usage {
        arg: "--group/--bits",
        reason: e.to_string(),
    })
}

fn eval_v1(x: &[f32], bits: u8, a: &EvalArgs, levels: Levels) -> Result<Row, CliError> {
    let f32_bytes = x.len() * 4;
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
    Ok(Row {
        bits,
        group: p.group_size(),
        layout: format!("v1 {:?}", p.levels()).to_lowercase(),
        bytes: seg.len(),
        m: ErrorMetrics::compare(x, &y)?,
        quant_s,
        dequant_s,
    })
}

fn eval_v2(
    x: &[f32],
    bits: u8,
    a: &EvalArgs,
    kind: KindArg,
    width: usize,
) -> Result<Row, CliError> {
    let f32_bytes = x.len() * 4;
    let p = v2_params(kind, bits, a.group, width)?;
    let mut seg = Vec::new();
    let quant_s = time(f32_bytes, || {
        seg = segment_v2::encode(&p, x)?;
        Ok(())
    })?;
    let mut y = vec![0f32; x.len()];
    let dequant_s = time(f32_bytes, || Ok(SegmentV2::parse(&seg)?.decode(&mut y)?))?;
    let axis = match p.axis {
        Axis::Flat => "along rows",
        Axis::Columns => "per column",
    };
    let extra = [
        (p.raw_rows > 0, " + f16 row 0"),
        (p.clip_search, " + clip search"),
    ];
    let mut layout = format!("v2 {axis}");
    for (on, s) in extra {
        if on {
            layout.push_str(s);
        }
    }
    Ok(Row {
        bits,
        group: 1 << p.group_log2,
        layout,
        bytes: seg.len(),
        m: ErrorMetrics::compare(x, &y)?,
        quant_s,
        dequant_s,
    })
}

fn eval(a: &EvalArgs, ctx: &report::Ctx) -> Result<(), CliError> {
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
    let width = x.len() / usize::try_from(input.rows.max(1)).unwrap_or(usize::MAX);
    let mut rows = Vec::new();
    let pb = ctx.bar(a.bits.len() as u64, "settings", report::Unit::Steps, a.json);
    for &bits in &a.bits {
        pb.set_message(format!("{bits} bits"));
        rows.push(match a.kind {
            None => eval_v1(x, bits, a, levels)?,
            Some(kind) => eval_v2(x, bits, a, kind, width)?,
        });
        pb.inc(1);
    }
    pb.finish_and_clear();
    let bpv = |r: &Row| r.bytes as f64 * 8.0 / x.len() as f64;
    let ratio = |r: &Row| f32_bytes as f64 / r.bytes as f64;
    let gbps = |s: f64| f32_bytes as f64 / s / 1e9;
    if a.json {
        let list: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({"bits": r.bits, "group_size": r.group, "layout": r.layout,
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
        "layout",
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
            r.bits.to_string(),
            r.group.to_string(),
            r.layout.clone(),
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
