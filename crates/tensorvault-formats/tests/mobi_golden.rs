//! The golden files: `tests/fixtures/mobi/golden_v1.mobi` and `golden_v2.mobi` must
//! decode forever; the writer must reproduce golden_v2 byte for byte (regenerate only
//! on purpose: `UPDATE_FIXTURES=1 cargo test -p tensorvault-formats --test mobi_golden
//! -- --ignored`).

use std::collections::BTreeMap;

use tensorvault_formats::mobi::{
    ConstantTensor, DataType, Dim, Header, IoSpec, Metadata, Model, Operator, OperatorType,
    ParamValue, Quantization,
};

/// The model behind `tests/fixtures/mobi/golden_v1.mobi`: every data type, one gzip
/// tensor, every parameter tag, two inputs and two outputs.
fn golden_v1_model() -> Model {
    let t = |id, dtype: DataType, shape: Vec<u64>, quant, gzip, data: Vec<u8>| ConstantTensor {
        id,
        dtype,
        shape,
        quant,
        gzip,
        data: data.into(),
    };
    let q = |scale, zero_point| Some(Quantization::PerTensor { scale, zero_point });
    let spec = |name: &str, shape: Vec<u64>| IoSpec::new(name, DataType::F32, &shape);
    Model {
        metadata: Metadata {
            name: "golden-v1 ✓".into(),
            framework_version: 3,
            created_unix: 1_700_000_000,
        },
        inputs: vec![spec("a", vec![2, 2]), spec("b", vec![2, 2])],
        outputs: vec![spec("sum", vec![2, 2]), spec("prod", vec![2, 2])],
        tensors: vec![
            t(
                4,
                DataType::F32,
                vec![2, 2],
                None,
                false,
                [1.0f32, -2.0, 0.5, 4.0]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            ),
            t(
                5,
                DataType::F16,
                vec![2],
                None, // v1 stores (1.0, 0) for fp16; v2 models carry no parameters
                false,
                vec![0x00, 0x3c, 0x00, 0xc0],
            ),
            t(
                6,
                DataType::I8,
                vec![4],
                q(0.5, -3),
                true,
                vec![0x80, 0xff, 0x00, 0x7f],
            ),
            t(
                7,
                DataType::U8,
                vec![3],
                q(0.25, 10),
                false,
                vec![0, 10, 255],
            ),
            t(
                8,
                DataType::I16,
                vec![2],
                q(0.01, 0),
                false,
                vec![0x10, 0x27, 0xf0, 0xd8],
            ),
            t(
                9,
                DataType::I32,
                vec![2],
                None,
                false,
                vec![1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
            ),
            t(
                10,
                DataType::I64,
                vec![1],
                None,
                false,
                vec![2, 0, 0, 0, 0, 0, 0, 0],
            ),
            t(11, DataType::Bool, vec![2], None, false, vec![1, 0]),
        ],
        operators: vec![
            Operator {
                op: OperatorType::Add,
                inputs: vec![0, 1],
                outputs: vec![12],
                params: vec![("note".into(), ParamValue::Str("elementwise".into()))],
            },
            Operator {
                op: OperatorType::Add,
                inputs: vec![12, 4],
                outputs: vec![2],
                params: vec![("alpha".into(), ParamValue::Float(1.5))],
            },
            Operator {
                op: OperatorType::MatMul,
                inputs: vec![0, 1],
                outputs: vec![3],
                params: vec![
                    ("transpose".into(), ParamValue::Int(0)),
                    ("perm".into(), ParamValue::Ints(vec![1, 0])),
                    ("gains".into(), ParamValue::Floats(vec![0.5, -0.25])),
                    ("empty".into(), ParamValue::Ints(vec![])),
                ],
            },
        ],
        optimized: true,
        value_names: BTreeMap::new(),
    }
}

/// The model behind `tests/fixtures/mobi/golden_v2.mobi`: the v1 golden model plus
/// per-axis int8 (zero points omitted) and per-axis uint8 (zero points stored) tensors,
/// a symbolic batch dimension and an unnamed dynamic one, operator-table parameters and
/// value names.
fn golden_v2_model() -> Model {
    let mut m = golden_v1_model();
    m.metadata.name = "golden-v2 ✓".into();
    m.inputs[0].shape = vec![Dim::Symbolic("N".into()), Dim::Fixed(2)];
    m.inputs[1].shape = vec![Dim::Symbolic(String::new()), Dim::Fixed(2)];
    m.outputs[0].shape = vec![Dim::Symbolic("N".into()), Dim::Fixed(2)];
    m.tensors.push(ConstantTensor {
        id: 13,
        dtype: DataType::I8,
        shape: vec![2, 3],
        quant: Some(Quantization::PerAxis {
            axis: 0,
            scales: vec![0.5, 0.001],
            zero_points: vec![0, 0],
        }),
        gzip: false,
        data: vec![0x81, 0x00, 0x7f, 0x01, 0xff, 0x40].into(),
    });
    m.tensors.push(ConstantTensor {
        id: 14,
        dtype: DataType::U8,
        shape: vec![2, 2],
        quant: Some(Quantization::PerAxis {
            axis: 1,
            scales: vec![0.25, 2.0],
            zero_points: vec![128, 3],
        }),
        gzip: true,
        data: vec![128, 3, 255, 0].into(),
    });
    // v2 files are checked against the operator table: v1's free annotations go, and
    // the parameters are real ones (an int, a negative int, a float, an int array).
    for op in &mut m.operators {
        op.params.clear();
    }
    m.operators.push(Operator {
        op: OperatorType::Softmax,
        inputs: vec![3],
        outputs: vec![15],
        params: vec![
            ("axis".into(), ParamValue::Int(-1)),
            ("beta".into(), ParamValue::Float(0.5)),
        ],
    });
    m.operators.push(Operator {
        op: OperatorType::Transpose,
        inputs: vec![0],
        outputs: vec![16],
        params: vec![("perm".into(), ParamValue::Ints(vec![1, 0]))],
    });
    m.value_names = BTreeMap::from([(12, "block1/add:0".into()), (13, "conv.weight".into())]);
    m
}

const GOLDEN_V1: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/mobi/golden_v1.mobi"
);
const GOLDEN_V2: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/mobi/golden_v2.mobi"
);

#[test]
#[ignore = "writes the golden v2 fixture; run with UPDATE_FIXTURES=1 -- --ignored"]
fn generate_golden_v2() {
    if std::env::var("UPDATE_FIXTURES").as_deref() == Ok("1") {
        std::fs::write(GOLDEN_V2, golden_v2_model().to_bytes().unwrap()).unwrap();
    }
}

#[test]
fn golden_v1_file_still_decodes() {
    let bytes = std::fs::read(GOLDEN_V1).expect("committed fixture");
    assert_eq!(&bytes[..4], b"MOBI");
    let h = Header::parse(&bytes).unwrap();
    assert_eq!((h.version, h.flags), (1, 0b111));
    assert_eq!(Model::from_bytes(&bytes).unwrap(), golden_v1_model());
    // v1 parameters were free annotations; v2 checks them against the operator table,
    // so the v1 model is re-encoded without them.
    let mut m = golden_v1_model();
    m.operators.iter_mut().for_each(|op| op.params.clear());
    let v2 = m.to_bytes().unwrap();
    assert_eq!(Header::parse(&v2).unwrap().version, 2);
    assert_eq!(Model::from_bytes(&v2).unwrap(), m);
}

#[test]
fn golden_v2_file_still_decodes_and_the_writer_reproduces_it() {
    let bytes = std::fs::read(GOLDEN_V2).expect("committed fixture");
    let h = Header::parse(&bytes).unwrap();
    assert_eq!((h.version, h.flags), (2, 0b111));
    let m = Model::from_bytes(&bytes).unwrap();
    assert_eq!(m, golden_v2_model());
    assert_eq!(
        m.tensor(13).unwrap().to_f32().unwrap(),
        vec![-63.5, 0.0, 63.5, 0.001, -0.001, 0.064]
    );
    assert_eq!(
        m.tensor(14).unwrap().to_f32().unwrap(),
        vec![0.0, 0.0, 31.75, -6.0]
    );
    let now = golden_v2_model().to_bytes().unwrap();
    let first = now.iter().zip(&bytes).position(|(a, b)| a != b);
    assert!(
        first.is_none() && now.len() == bytes.len(),
        "first differing byte {first:?}, lengths {} vs {}",
        now.len(),
        bytes.len()
    );
}
