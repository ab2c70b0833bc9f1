//! Single-thread timing of the groupwise codec for `bench/quant/run.sh`: reads raw
//! little-endian f32 values, prints one JSON object per setting (median seconds over the
//! repetitions, throughput in f32 GB/s, error metrics, encoded size).
//!
//! `cargo run --release -p tensorvault-quant --example quant_bench -- FILE.f32 [REPS]`

use std::time::Instant;

use tensorvault_quant::groupwise::{decode, encode, Levels, QuantParams};
use tensorvault_quant::metrics::ErrorMetrics;
use tensorvault_quant::segment::encode_tensor;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: quant_bench FILE.f32 [REPS]")?;
    let reps: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(15);
    let bytes = std::fs::read(path)?;
    let x: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let gb = (x.len() * 4) as f64 / 1e9;
    let settings: &[(u8, usize, Levels)] = &[
        (8, 32, Levels::Symmetric),
        (8, 32, Levels::Full),
        (4, 32, Levels::Symmetric),
        (4, 32, Levels::Full),
        (8, 128, Levels::Symmetric),
        (7, 128, Levels::Symmetric),
        (5, 256, Levels::Symmetric),
        (3, 512, Levels::Symmetric),
        (3, 64, Levels::Symmetric),
        (3, 512, Levels::Full),
        (5, 256, Levels::Full),
        (7, 128, Levels::Full),
        (8, 128, Levels::Full),
    ];
    for &(bits, group, levels) in settings {
        let p = QuantParams::new(bits, group)?.with_levels(levels);
        let mut scales = vec![0u16; p.groups(x.len())];
        let mut packed = vec![0u8; p.packed_len(x.len())];
        let mut y = vec![0f32; x.len()];
        let tq = time(reps, || {
            encode(&p, std::hint::black_box(&x), &mut scales, &mut packed).unwrap();
        });
        let td = time(reps, || {
            decode(&p, std::hint::black_box(&scales), &packed, &mut y).unwrap();
        });
        let m = ErrorMetrics::compare(&x, &y)?;
        let (seg, _) = encode_tensor(&p, &x)?;
        println!(
            "{{\"impl\":\"tensorvault\",\"bits\":{bits},\"group_size\":{group},\"levels\":\"{levels:?}\",\"bits_per_value\":{},\"segment_bytes\":{},\"ratio\":{:.4},\"quant_s\":{tq:.6},\"dequant_s\":{td:.6},\"quant_gbps\":{:.3},\"dequant_gbps\":{:.3},\"rmse\":{:.7},\"max_abs_error\":{:.6},\"snr_db\":{:.3}}}",
            p.bits_per_value(),
            seg.len(),
            (x.len() * 4) as f64 / seg.len() as f64,
            gb / tq,
            gb / td,
            m.rmse,
            m.max_abs_error,
            m.snr_db
        );
    }
    Ok(())
}
