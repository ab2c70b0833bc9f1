//! Test support for crafted MOBI files: a v1 encoder (the library writes v2 only, the
//! reader still reads v1, so v1 rejections are tested on v1 bytes made here) and
//! resealing after a patch.
#![allow(dead_code, reason = "each test binary uses a subset")]

use tensorvault_core::checksum::crc32;
use tensorvault_formats::mobi::{Dim, Model, ParamValue, Quantization};

/// Recompute the header and file checksums after patching (so the targeted check fires).
pub fn reseal(b: &mut [u8]) {
    b[8..12].fill(0);
    let h = crc32(&b[..32]);
    b[8..12].copy_from_slice(&h.to_le_bytes());
    let n = b.len() - 4;
    let f = crc32(&b[..n]);
    b[n..].copy_from_slice(&f.to_le_bytes());
}

fn str32(o: &mut Vec<u8>, s: &str) {
    o.extend_from_slice(&(s.len() as u32).to_le_bytes());
    o.extend_from_slice(s.as_bytes());
}

/// Encode `m` in the v1 layout (fixed-width fields; fp16 carries scale 1.0 / zero point
/// 0). Panics on what v1 cannot express (symbolic dimensions, per-axis parameters,
/// gzip done with flate2's default level like the old writer).
pub fn encode_v1(m: &Model) -> Vec<u8> {
    use std::io::Write;
    let mut o = vec![0u8; 32];
    str32(&mut o, &m.metadata.name);
    o.extend_from_slice(&m.metadata.framework_version.to_le_bytes());
    o.extend_from_slice(&m.metadata.created_unix.to_le_bytes());
    o.extend_from_slice(&(m.inputs.len() as u32).to_le_bytes());
    o.extend_from_slice(&(m.outputs.len() as u32).to_le_bytes());
    for s in m.inputs.iter().chain(&m.outputs) {
        str32(&mut o, &s.name);
        o.extend_from_slice(&(s.shape.len() as u16).to_le_bytes());
        o.extend_from_slice(&u16::from(s.dtype.code()).to_le_bytes());
        for d in &s.shape {
            let Dim::Fixed(n) = d else {
                panic!("v1 has no symbolic dimensions")
            };
            o.extend_from_slice(&n.to_le_bytes());
        }
    }
    let tensor_offset = o.len() as u32;
    o.extend_from_slice(&(m.tensors.len() as u32).to_le_bytes());
    let (mut quantized, mut fp16) = (false, false);
    for t in &m.tensors {
        o.extend_from_slice(&t.id.to_le_bytes());
        let raw = u16::from(t.dtype.code()) | if t.gzip { 1 << 15 } else { 0 };
        o.extend_from_slice(&raw.to_le_bytes());
        o.extend_from_slice(&(t.shape.len() as u16).to_le_bytes());
        t.shape
            .iter()
            .for_each(|d| o.extend_from_slice(&d.to_le_bytes()));
        if t.dtype.has_quant_params() {
            let (s, z) = match &t.quant {
                None => (1.0f32, 0i32),
                Some(Quantization::PerTensor { scale, zero_point }) => (*scale, *zero_point),
                Some(q) => panic!("v1 has no {} quantization", q.kind()),
            };
            o.extend_from_slice(&s.to_le_bytes());
            o.extend_from_slice(&z.to_le_bytes());
        }
        quantized |= t.dtype.is_affine();
        fp16 |= t.dtype.code() == 2;
        let data = if t.gzip {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(&t.data).unwrap();
            e.finish().unwrap()
        } else {
            t.data.to_vec()
        };
        o.extend_from_slice(&(data.len() as u64).to_le_bytes());
        o.extend_from_slice(&data);
    }
    let graph_offset = o.len() as u32;
    o.extend_from_slice(&(m.operators.len() as u32).to_le_bytes());
    for op in &m.operators {
        o.extend_from_slice(&op.op.code().to_le_bytes());
        o.extend_from_slice(&(op.inputs.len() as u16).to_le_bytes());
        o.extend_from_slice(&(op.outputs.len() as u16).to_le_bytes());
        o.extend_from_slice(&(op.params.len() as u16).to_le_bytes());
        op.inputs
            .iter()
            .chain(&op.outputs)
            .for_each(|id| o.extend_from_slice(&id.to_le_bytes()));
        for (k, v) in &op.params {
            o.extend_from_slice(&(k.len() as u16).to_le_bytes());
            o.extend_from_slice(k.as_bytes());
            match v {
                ParamValue::Int(i) => {
                    o.push(1);
                    o.extend_from_slice(&i.to_le_bytes());
                }
                ParamValue::Float(f) => {
                    o.push(2);
                    o.extend_from_slice(&f.to_le_bytes());
                }
                ParamValue::Str(s) => {
                    o.push(3);
                    str32(&mut o, s);
                }
                ParamValue::Ints(a) => {
                    o.push(4);
                    o.extend_from_slice(&(a.len() as u32).to_le_bytes());
                    a.iter().for_each(|i| o.extend_from_slice(&i.to_le_bytes()));
                }
                ParamValue::Floats(a) => {
                    o.push(5);
                    o.extend_from_slice(&(a.len() as u32).to_le_bytes());
                    a.iter().for_each(|f| o.extend_from_slice(&f.to_le_bytes()));
                }
            }
        }
    }
    let total = o.len() as u32 + 4;
    let flags = u32::from(quantized) | u32::from(fp16) << 1 | u32::from(m.optimized) << 2;
    o[..4].copy_from_slice(b"MOBI");
    o[4..6].copy_from_slice(&1u16.to_le_bytes());
    o[12..16].copy_from_slice(&flags.to_le_bytes());
    o[16..20].copy_from_slice(&total.to_le_bytes());
    o[20..24].copy_from_slice(&32u32.to_le_bytes());
    o[24..28].copy_from_slice(&tensor_offset.to_le_bytes());
    o[28..32].copy_from_slice(&graph_offset.to_le_bytes());
    o.extend_from_slice(&[0; 4]);
    reseal(&mut o);
    o
}
