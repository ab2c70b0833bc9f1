//! Property tests: weights pass through exactly in f32 mode for any Gemm shape, and no
//! corruption of a valid model makes the importer panic.

mod common;

use common::*;
use proptest::prelude::*;
use tensorvault_formats::mobi::Model;
use tensorvault_onnx::{import, ImportOptions};

fn gemm_model(m: usize, k: usize, n: usize, w: &[f32], bias: &[f32]) -> Vec<u8> {
    model(
        13,
        vec![node(
            "Gemm",
            "fc",
            &["x", "w", "b"],
            &["y"],
            vec![attr_i("transB", 1)],
        )],
        vec![vi("x", FLOAT, &[m as i64, k as i64])],
        vec![vi("y", FLOAT, &[m as i64, n as i64])],
        vec![
            tf32("w", &[n as i64, k as i64], w),
            tf32("b", &[n as i64], bias),
        ],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn f32_weights_round_trip_exactly_through_the_mobi_file(
        m in 1usize..4, k in 1usize..9, n in 1usize..9, seed in any::<u64>()
    ) {
        let w = values(n * k, seed);
        let b = values(n, seed ^ 1);
        let imported = import(&gemm_model(m, k, n, &w, &b), &ImportOptions::default()).unwrap();
        let back = Model::from_bytes(&imported.to_bytes().unwrap()).unwrap();
        let fc = &back.operators[0];
        prop_assert_eq!(const_input(&back, fc, 1), w);
        prop_assert_eq!(const_input(&back, fc, 2), b);
        prop_assert_eq!(back.outputs[0].fixed_shape(), Some(vec![m as u64, n as u64]));
    }

    #[test]
    fn corrupted_models_give_errors_not_panics(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = gemm_model(2, 3, 4, &values(12, 1), &values(4, 2));
        for (i, v) in flips {
            let i = i.index(bytes.len());
            bytes[i] = v;
        }
        let len = cut.index(bytes.len() + 1);
        let _ = import(&bytes[..len], &ImportOptions::default());
    }
}
