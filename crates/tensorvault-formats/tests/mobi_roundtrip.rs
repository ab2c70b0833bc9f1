//! MOBI round trips: the fixture models, quantization on write, gzip, loaders, and
//! property tests over random models (every v2 section: per-axis parameters, symbolic
//! dimensions, value names, aligned payloads). The golden files: `mobi_golden.rs`.

use proptest::prelude::*;
use std::collections::BTreeMap;

use tensorvault_formats::mobi::{
    choose_quantization, layout, models, validate, ConstantTensor, DataType, Dim, Header, IoSpec,
    Metadata, Model, Operator, OperatorType, ParamValue, QuantTarget, Quantization, TensorQuant,
    WriteOptions,
};

fn opts(quantize: Option<QuantTarget>, gzip: bool) -> WriteOptions {
    WriteOptions { quantize, gzip }
}

#[test]
fn fixture_models_have_the_stated_parameter_counts() {
    let l = models::lenet5(1).unwrap();
    let c = models::cifar10_cnn(1).unwrap();
    assert_eq!(l.parameter_count(), models::LENET5_PARAMS);
    assert_eq!(c.parameter_count(), models::CIFAR10_PARAMS);
    // Deterministic weights.
    assert_eq!(l, models::lenet5(1).unwrap());
    assert_ne!(l, models::lenet5(2).unwrap());
}

#[test]
fn f32_round_trip_is_exact_and_sizes_meet_the_targets() {
    for m in [models::lenet5(7).unwrap(), models::cifar10_cnn(7).unwrap()] {
        let f32_bytes = m.to_bytes().unwrap();
        assert_eq!(Model::from_bytes(&f32_bytes).unwrap(), m);
        assert!(validate(&f32_bytes).is_ok());
        let raw = m.parameter_count() * 4;
        for (target, max_ratio) in [
            (QuantTarget::Int8, 0.30),
            (QuantTarget::Int8PerTensor, 0.30),
            (QuantTarget::Int16, 0.55),
            (QuantTarget::Fp16, 0.51),
        ] {
            let q = m.to_bytes_with(&opts(Some(target), false)).unwrap();
            let ratio = q.len() as f64 / f32_bytes.len() as f64;
            assert!(ratio <= max_ratio, "{target:?}: {ratio}");
            let back = Model::from_bytes(&q).unwrap();
            let h = Header::parse(&q).unwrap();
            assert_eq!(h.flags & 1 != 0, target != QuantTarget::Fp16);
            assert_eq!(h.flags & 2 != 0, target == QuantTarget::Fp16);
            for (a, b) in m.tensors.iter().zip(&back.tensors) {
                let plan = choose_quantization(a.dtype, &a.shape, target);
                let (x, y) = (a.to_f32().unwrap(), b.to_f32().unwrap());
                let tol = match (plan, &b.quant) {
                    (TensorQuant::Keep, _) => 0.0,
                    (TensorQuant::Fp16, _) => 1e-3,
                    (_, Some(q)) => q.scale_range().1 / 2.0 + 1e-6,
                    (_, None) => panic!("{target:?}: tensor {} lost its parameters", b.id),
                };
                match plan {
                    TensorQuant::Keep => assert_eq!(b.dtype, DataType::F32),
                    TensorQuant::PerChannelInt8 { .. } => assert_eq!(b.quant_kind(), "per-axis"),
                    _ => assert_eq!(b.dtype, target.dtype()),
                }
                assert!(x.iter().zip(&y).all(|(p, q)| (p - q).abs() <= tol));
            }
        }
        assert!((f32_bytes.len() as u64) < raw + 8192);
        assert!(f32_bytes.len() < 2 << 20);
    }
}

/// Payloads of >= 1 KiB start on a 64-byte boundary of the file (so a memory map hands
/// out aligned weights), smaller ones on their element size; padding is the only cost.
#[test]
fn large_payloads_are_64_byte_aligned() {
    for target in [None, Some(QuantTarget::Fp16), Some(QuantTarget::Int8)] {
        let m = models::lenet5(5)
            .unwrap()
            .with_options(&opts(target, false))
            .unwrap();
        let bytes = m.to_bytes().unwrap();
        for t in &m.tensors {
            let at = bytes
                .windows(t.data.len())
                .position(|w| w == t.data.as_slice())
                .unwrap();
            let want = if t.data.len() as u64 >= layout::V2_ALIGN_MIN_PAYLOAD {
                1 << layout::V2_ALIGN_LOG2
            } else {
                t.dtype.size() as usize
            };
            assert_eq!(at % want, 0, "{target:?} tensor {} at {at}", t.id);
        }
    }
}

#[test]
fn gzip_round_trip_and_dequantize_on_read() {
    let m = models::lenet5(3).unwrap();
    let bytes = m
        .to_bytes_with(&opts(Some(QuantTarget::Int8), true))
        .unwrap();
    let mut back = Model::from_bytes(&bytes).unwrap();
    assert!(back.tensors.iter().all(|t| t.gzip));
    assert!(back.tensors.iter().any(|t| t.dtype == DataType::I8));
    back.dequantize().unwrap();
    assert!(back.tensors.iter().all(|t| t.dtype == DataType::F32));
    let plain = m.to_bytes_with(&opts(None, true)).unwrap();
    let mut g = Model::from_bytes(&plain).unwrap();
    g.tensors.iter_mut().for_each(|t| t.gzip = false);
    assert_eq!(g, m);
}

#[test]
fn path_stream_and_atomic_save_agree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lenet.mobi");
    let m = models::lenet5(1).unwrap();
    let size = m.save(&path, &WriteOptions::default()).unwrap();
    assert_eq!(size, std::fs::metadata(&path).unwrap().len());
    assert_eq!(Model::open(&path).unwrap(), m);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(Model::from_reader(bytes.as_slice()).unwrap(), m);
    // Only the final file remains (no temp files).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

fn arb_param() -> impl Strategy<Value = ParamValue> {
    prop_oneof![
        any::<i64>().prop_map(ParamValue::Int),
        any::<f64>()
            .prop_filter("NaN != NaN", |f| !f.is_nan())
            .prop_map(ParamValue::Float),
        "[a-z✓]{0,8}".prop_map(ParamValue::Str),
        prop::collection::vec(any::<i64>(), 0..4).prop_map(ParamValue::Ints),
        prop::collection::vec(-1e6f64..1e6, 0..4).prop_map(ParamValue::Floats),
    ]
}

fn arb_dim() -> impl Strategy<Value = Dim> {
    prop_oneof![
        (0u64..5000).prop_map(Dim::Fixed),
        Just(Dim::Fixed(1 << 20)),
        "[A-Za-z✓]{0,4}".prop_map(Dim::Symbolic),
    ]
}

prop_compose! {
    fn arb_model()(
        name in "[a-zA-Z0-9 é]{0,12}",
        fw in any::<u32>(),
        ts in any::<u64>(),
        in_shape in prop::collection::vec(arb_dim(), 0..4),
        shapes in prop::collection::vec(prop::collection::vec(1u64..5, 0..4), 0..5),
        dtypes in prop::collection::vec(0usize..8, 5),
        gz in prop::collection::vec(any::<bool>(), 5),
        per_axis in prop::collection::vec(any::<bool>(), 5),
        zero_points in prop::collection::vec(-3i32..3, 5),
        seed in any::<u8>(),
        n_ops in 0usize..4,
        params in prop::collection::vec(arb_param(), 0..3),
        names in prop::collection::vec(("[a-z/._0-9]{0,10}", any::<bool>()), 4),
        optimized in any::<bool>(),
    ) -> Model {
        let tensors: Vec<ConstantTensor> = shapes.iter().enumerate().map(|(i, s)| {
            let dtype = DataType::ALL[dtypes[i]];
            let n = s.iter().product::<u64>() * dtype.size();
            let data = (0..n).map(|k| (k as u8).wrapping_mul(seed)).collect::<Vec<u8>>();
            // Bytes are opaque to the reader: any f16/f32 payload round-trips.
            let zp = if dtype == DataType::U8 { zero_points[i].abs() } else { zero_points[i] };
            let quant = dtype.is_affine().then(|| {
                if per_axis[i] && !s.is_empty() {
                    let c = s[0] as usize;
                    Quantization::PerAxis {
                        axis: 0,
                        scales: (0..c).map(|k| 0.5 + k as f32).collect(),
                        zero_points: vec![zp; c],
                    }
                } else {
                    Quantization::PerTensor { scale: 0.125, zero_point: zp }
                }
            });
            ConstantTensor { id: 2 + i as u32, dtype, shape: s.clone(), quant, gzip: gz[i], data: data.into() }
        }).collect();
        let mut operators = Vec::new();
        let mut prev = 0u32;
        // Operators valid with one input, one output and no parameters (the op table's
        // check decides), so the generated graphs pass the reader's operator checks.
        let unary: Vec<OperatorType> = OperatorType::ALL.iter().copied().filter(|&op| {
            let o = Operator { op, inputs: vec![0], outputs: vec![1], params: vec![] };
            tensorvault_formats::mobi::ops::check_operator(0, &o, |_| None, 0, tensorvault_formats::mobi::ops::UnknownKeys::Reject).is_ok()
        }).collect();
        for k in 0..n_ops {
            let out = 100 + k as u32;
            let ps = params.iter().enumerate().map(|(j, v)| (format!("p{j}"), v.clone())).collect();
            operators.push(Operator { op: unary[k % unary.len()], inputs: vec![prev], outputs: vec![out], params: ps });
            prev = out;
        }
        operators.push(Operator { op: OperatorType::Relu, inputs: vec![prev], outputs: vec![1], params: vec![] });
        // Name some of the defined values: inputs/outputs, a constant, an intermediate.
        let candidates = [0u32, 1, 2, 100];
        let value_names: BTreeMap<u32, String> = candidates
            .iter()
            .zip(&names)
            .filter(|(&id, (_, keep))| *keep && (id < 2 || (id == 2 && !tensors.is_empty()) || (id == 100 && n_ops > 0)))
            .map(|(&id, (n, _))| (id, n.clone()))
            .collect();
        Model {
            metadata: Metadata { name, framework_version: fw, created_unix: ts },
            inputs: vec![IoSpec { name: "x".into(), dtype: DataType::F32, shape: in_shape }],
            outputs: vec![IoSpec::new("y", DataType::I8, &[])],
            tensors,
            operators,
            optimized,
            value_names,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn write_read_round_trip(m in arb_model()) {
        let bytes = m.to_bytes().unwrap();
        let back = Model::from_bytes(&bytes).unwrap();
        prop_assert_eq!(back, m);
    }

    #[test]
    fn truncation_and_bit_flips_never_panic(m in arb_model(), cut in any::<prop::sample::Index>(), bit in 0u8..8) {
        let bytes = m.to_bytes().unwrap();
        let at = cut.index(bytes.len());
        prop_assert!(Model::from_bytes(&bytes[..at]).is_err());
        let mut flipped = bytes.clone();
        flipped[at] ^= 1 << bit;
        prop_assert!(Model::from_bytes(&flipped).is_err());
        prop_assert!(!validate(&flipped).is_ok());
    }
}
