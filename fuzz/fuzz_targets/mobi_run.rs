//! Fuzz the MOBI runtime: any file the reader accepts must prepare and run (on small
//! inputs shaped after its I/O specs) without panicking or allocating past the
//! session's element limit; errors are fine.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_formats::mobi::{read_with, DataType, ReadOptions};
use tensorvault_mobi_runtime::{Limits, Session, Tensor};

/// Most elements of one fuzz input tensor and of any value inside the graph.
const MAX_ELEMENTS: u64 = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let opts = ReadOptions {
        max_tensor_bytes: 1 << 22,
        max_inflated_bytes: 1 << 24,
        ..ReadOptions::default()
    };
    let Ok((_, model)) = read_with(data, &opts) else {
        return;
    };
    let limits = Limits {
        max_elements: MAX_ELEMENTS,
        ..Limits::default()
    };
    let Ok(session) = Session::with_limits(&model, limits) else {
        return;
    };
    let mut feeds = Vec::new();
    for spec in &model.inputs {
        // Fixed dimensions as declared (the batch axis capped at 64), symbolic ones 2.
        let shape: Vec<usize> = spec
            .shape
            .iter()
            .enumerate()
            .map(|(i, d)| match d.fixed() {
                Some(n) if i == 0 => n.min(64) as usize,
                Some(n) => n.min(MAX_ELEMENTS + 1) as usize,
                None => 2,
            })
            .collect();
        let n = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64));
        if n.is_none_or(|n| n > MAX_ELEMENTS) {
            return; // the declared shape is too big for a tiny run
        }
        let n = n.unwrap_or(0);
        let t = match spec.dtype {
            DataType::I64 | DataType::I32 => {
                Tensor::i64(shape, (0..n as i64).map(|i| i % 3 - 1).collect())
            }
            _ => Tensor::f32(shape, (0..n).map(|i| (i % 7) as f32 - 3.0).collect()),
        };
        let Ok(t) = t else { return };
        feeds.push((spec.name.as_str(), t));
    }
    let _ = session.run(&feeds);
});
