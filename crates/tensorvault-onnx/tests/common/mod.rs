//! ONNX models built in Rust (prost messages) for the importer's tests, plus a naive
//! NCHW convolution to check folds numerically.

#![allow(
    dead_code,
    reason = "each test file uses a different subset of the helpers"
)]

use prost::Message;
use tensorvault_formats::mobi::{Model, Operator, OperatorType};
use tensorvault_onnx::proto::attribute_proto::AttributeType as AT;
use tensorvault_onnx::proto::tensor_shape_proto::{dimension::Value as Dim, Dimension};
use tensorvault_onnx::proto::type_proto::{Tensor, Value as TV};
use tensorvault_onnx::proto::*;
use tensorvault_onnx::{import, ImportOptions};

pub const FLOAT: i32 = 1;
pub const INT64: i32 = 7;

/// An f32 tensor stored in raw_data.
pub fn tf32(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(FLOAT),
        raw_data: Some(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        ..Default::default()
    }
}

/// An i64 tensor stored in int64_data.
pub fn ti64(name: &str, dims: &[i64], v: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(INT64),
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

pub fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AT::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

pub fn attr_f(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AT::Float as i32),
        f: Some(v),
        ..Default::default()
    }
}

pub fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AT::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}

pub fn attr_s(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AT::String as i32),
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    }
}

pub fn attr_t(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AT::Tensor as i32),
        t: Some(t),
        ..Default::default()
    }
}

pub fn node(
    op: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

/// A value info; a negative dim is a symbolic `N`.
pub fn vi(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            denotation: None,
            value: Some(if d < 0 {
                Dim::DimParam("N".into())
            } else {
                Dim::DimValue(d)
            }),
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            denotation: None,
            value: Some(TV::TensorType(Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto { dim }),
            })),
        }),
        ..Default::default()
    }
}

/// A model proto with one graph.
pub fn model_proto(
    opset: i64,
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        producer_name: Some("tests".into()),
        graph: Some(GraphProto {
            name: Some("g".into()),
            node: nodes,
            input: inputs,
            output: outputs,
            initializer: inits,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Encoded model bytes.
pub fn model(
    opset: i64,
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
) -> Vec<u8> {
    model_proto(opset, nodes, inputs, outputs, inits).encode_to_vec()
}

/// Import with default options, panicking with the error text on failure.
pub fn imp(bytes: &[u8]) -> Model {
    import(bytes, &ImportOptions::default()).unwrap_or_else(|e| panic!("import failed: {e}"))
}

/// The op types of a model, in order.
pub fn ops(m: &Model) -> Vec<OperatorType> {
    m.operators.iter().map(|o| o.op).collect()
}

/// The f32 values of the constant feeding input `i` of operator `o`.
pub fn const_input(m: &Model, o: &Operator, i: usize) -> Vec<f32> {
    let t = m.tensor(o.inputs[i]).expect("constant input");
    t.to_f32().expect("decodable")
}

/// Deterministic pseudo-random values in [-1, 1).
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Naive NCHW convolution, group 1, with pads [top, left, bottom, right].
pub fn conv2d(
    x: &[f32],
    xs: [usize; 4],
    w: &[f32],
    ws: [usize; 4],
    b: &[f32],
    stride: usize,
    pads: [usize; 4],
) -> (Vec<f32>, [usize; 4]) {
    let [n, c, h, wi] = xs;
    let [m, _, kh, kw] = ws;
    let oh = (h + pads[0] + pads[2] - kh) / stride + 1;
    let ow = (wi + pads[1] + pads[3] - kw) / stride + 1;
    let mut y = vec![0f32; n * m * oh * ow];
    for ni in 0..n {
        for mi in 0..m {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = b[mi];
                    for ci in 0..c {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * stride + ky) as isize - pads[0] as isize;
                                let ix = (ox * stride + kx) as isize - pads[1] as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wi as isize {
                                    continue;
                                }
                                let xv = x[((ni * c + ci) * h + iy as usize) * wi + ix as usize];
                                acc += xv * w[((mi * c + ci) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    y[((ni * m + mi) * oh + oy) * ow + ox] = acc;
                }
            }
        }
    }
    (y, [n, m, oh, ow])
}
