//! `Model::open` maps the file and shares uncompressed payloads with the map instead of
//! copying them (v2 puts payloads of >= 1 KiB at 64-byte offsets, so they are 64-byte
//! aligned in memory); gzip payloads are inflated into memory of their own; crafted
//! files opened through the map give the same typed errors as `Model::from_bytes`.

mod mobi_util;

use std::path::Path;

use mobi_util::{encode_v1, reseal};
use tensorvault_formats::mobi::{models, DataType, MobiError, Model, QuantTarget, WriteOptions};
use tensorvault_formats::FormatError;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The error of opening `bytes` from a file through the map, checked equal to the error
/// of reading them from memory.
fn open_err(dir: &Path, name: &str, bytes: &[u8]) -> MobiError {
    let want = Model::from_bytes(bytes).unwrap_err();
    match Model::open(write(dir, name, bytes)) {
        Err(FormatError::Mobi(e)) => {
            assert_eq!(e, want, "{name}: mapped and in-memory reads disagree");
            e
        }
        other => panic!("{name}: expected a MOBI error, got {other:?}"),
    }
}

#[test]
fn uncompressed_payloads_point_into_the_map_and_large_ones_are_64_byte_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let model = models::cifar10_cnn(2).unwrap();
    let p = dir.path().join("m.mobi");
    model.save(&p, &WriteOptions::default()).unwrap();
    let opened = Model::open(&p).unwrap();
    assert_eq!(opened, model, "same content as the in-memory model");
    let mut large = 0;
    for t in &opened.tensors {
        assert!(t.data.is_mapped(), "tensor {} copied", t.id);
        assert_eq!(t.data.as_ptr() as usize % 4, 0, "f32 payload alignment");
        if t.data.len() >= 1024 {
            assert_eq!(t.data.as_ptr() as usize % 64, 0, "tensor {}", t.id);
            large += 1;
        }
        // The zero-copy view works on the mapped bytes.
        assert_eq!(t.f32_view().unwrap(), t.to_f32().unwrap().as_slice());
    }
    assert!(large >= 3);
    // Mapped payloads share memory: cloning the model copies no weights.
    let c = opened.clone();
    assert_eq!(c.tensors[0].data.as_ptr(), opened.tensors[0].data.as_ptr());
}

#[test]
fn gzip_payloads_are_owned_and_quantized_ones_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let model = models::lenet5(2).unwrap();
    let p = dir.path().join("q.mobi");
    let opts = WriteOptions {
        quantize: Some(QuantTarget::Int8),
        gzip: false,
    };
    model.save(&p, &opts).unwrap();
    let q = Model::open(&p).unwrap();
    assert!(q.tensors.iter().any(|t| t.dtype == DataType::I8));
    assert!(q.tensors.iter().all(|t| t.data.is_mapped()));
    let g = dir.path().join("g.mobi");
    let opts = WriteOptions {
        quantize: None,
        gzip: true,
    };
    model.save(&g, &opts).unwrap();
    let g = Model::open(&g).unwrap();
    assert!(g.tensors.iter().all(|t| t.gzip && !t.data.is_mapped()));
    assert_eq!(
        g.tensors[0].to_f32().unwrap(),
        model.tensors[0].to_f32().unwrap()
    );
}

#[test]
fn crafted_files_through_the_map_give_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let model = models::lenet5(4).unwrap();
    let good = model.to_bytes().unwrap();
    let h = tensorvault_formats::mobi::Header::parse(&good).unwrap();
    let (t_off, g_off) = (h.tensor_offset as usize, h.graph_offset as usize);

    // A file cut inside the payloads (header total_size and CRCs made consistent): the
    // tensor section claims bytes past the end of the file.
    // After the cut: an empty graph (no operators, no names) and the footer.
    let mut cut = good[..g_off - 100].to_vec();
    cut.extend_from_slice(&[0; 6]);
    let n = cut.len() as u32;
    cut[16..20].copy_from_slice(&n.to_le_bytes());
    cut[28..32].copy_from_slice(&(n - 6).to_le_bytes());
    reseal(&mut cut);
    let e = open_err(dir.path(), "cut.mobi", &cut);
    assert!(
        matches!(
            e,
            MobiError::Truncated {
                what: "tensor data",
                ..
            }
        ),
        "{e:?}"
    );

    // Overlapping sections: the graph offset moved back into the last payload, so that
    // payload would overlap the operator graph.
    let mut overlap = good.clone();
    overlap[28..32].copy_from_slice(&((g_off - 64) as u32).to_le_bytes());
    reseal(&mut overlap);
    match open_err(dir.path(), "overlap.mobi", &overlap) {
        MobiError::Truncated {
            what: "tensor data",
            offset,
            ..
        } => assert!(offset as usize > t_off && (offset as usize) < g_off),
        e => panic!("{e:?}"),
    }

    // v1: a tensor's data_size pointing past the end of the file.
    let v1 = encode_v1(&model);
    let h1 = tensorvault_formats::mobi::Header::parse(&v1).unwrap();
    let rank = model.tensors[0].shape.len();
    let size_at = h1.tensor_offset as usize + 4 + 4 + 2 + 2 + 8 * rank;
    let mut past = v1.clone();
    past[size_at..size_at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    reseal(&mut past);
    match open_err(dir.path(), "past.mobi", &past) {
        MobiError::Truncated {
            what: "tensor data",
            offset,
            needed,
            ..
        } => {
            assert_eq!(offset as usize, size_at + 8);
            assert_eq!(needed, 1 << 40);
        }
        e => panic!("{e:?}"),
    }
    // The unpatched v1 file opens, its payloads shared with the map too.
    let ok = Model::open(write(dir.path(), "v1.mobi", &v1)).unwrap();
    assert!(ok.tensors.iter().all(|t| t.data.is_mapped()));
}

#[test]
fn from_vec_shares_the_buffer_and_agrees_with_from_bytes() {
    let model = models::lenet5(6).unwrap();
    let bytes = model.to_bytes().unwrap();
    let m = Model::from_vec(bytes.clone()).unwrap();
    assert_eq!(m, model);
    assert!(m.tensors.iter().all(|t| !t.data.is_mapped()));
    // Payloads point into the buffer handed over (no copy): consecutive tensors of
    // one buffer sit at increasing addresses within one file length.
    let base = m.tensors[0].data.as_ptr() as usize;
    for t in &m.tensors {
        let at = t.data.as_ptr() as usize;
        assert!(at >= base && at - base < bytes.len());
    }
    let mut bad = bytes;
    bad[40] ^= 1;
    assert_eq!(
        Model::from_vec(bad.clone()).unwrap_err(),
        Model::from_bytes(&bad).unwrap_err()
    );
}
