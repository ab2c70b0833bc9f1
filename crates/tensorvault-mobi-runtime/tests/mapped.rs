//! Weights mapped, not copied: a model opened from a file keeps its f32 weights in the
//! file's memory map and the session uses them in place; the results equal the copied
//! path bit for bit; quantized, gzip and misaligned (v1) payloads are converted once.

#[path = "../../tensorvault-formats/tests/mobi_util/mod.rs"]
mod mobi_util;

use std::path::Path;

use tensorvault_formats::mobi::{models, Model, QuantTarget, WriteOptions};
use tensorvault_mobi_runtime::{ConstantMemory, Session, Tensor};

fn image(n: usize) -> Tensor {
    let len = n * 28 * 28;
    Tensor::f32(
        vec![n, 1, 28, 28],
        (0..len).map(|i| ((i * 37) % 101) as f32 / 101.0).collect(),
    )
    .unwrap()
}

fn bits(s: &Session) -> Vec<u32> {
    let out = s.run(&[("image", image(3))]).unwrap();
    out[0]
        .1
        .as_f32()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn save(dir: &Path, name: &str, model: &Model, opts: &WriteOptions) -> std::path::PathBuf {
    let p = dir.join(name);
    model.save(&p, opts).unwrap();
    p
}

#[test]
fn opened_f32_model_runs_from_the_map_and_equals_the_copied_path() {
    let dir = tempfile::tempdir().unwrap();
    let model = models::lenet5(7).unwrap();
    let path = save(dir.path(), "f32.mobi", &model, &WriteOptions::default());
    let opened = Model::open(&path).unwrap();
    assert!(opened.tensors.iter().all(|t| t.data.is_mapped()));
    let s = Session::new(&opened).unwrap();
    let all = 4 * model.parameter_count();
    assert_eq!(
        s.constant_memory(),
        ConstantMemory {
            in_place_bytes: all,
            mapped_bytes: all,
            converted_bytes: 0,
            packed_bytes: s.constant_memory().packed_bytes,
            released_bytes: s.constant_memory().released_bytes,
            dropped_bytes: 0,
        }
    );
    // The mapped pages of the packed weights were given back (whole pages inside those
    // payloads: the fully-connected 400 x 120 and 120 x 84 matrices alone span 50 4-KiB
    // pages); the run below reads the packed copy and still equals the copied path.
    let released = s.constant_memory().released_bytes;
    assert!(
        released >= 40 * 4096 && released <= all,
        "{released} of {all}"
    );
    // LeNet-5's 6 -> 16 5x5 convolution and its fully-connected layers are packed (its
    // first convolution, one input channel, runs as a depthwise one): at least their
    // weights (most of the model), at most twice (padding to whole panels).
    let packed = s.constant_memory().packed_bytes;
    assert!(packed >= all / 2 && packed <= 2 * all, "{packed} of {all}");
    assert_eq!(s.mapped_bytes(), all);
    // The copied path: bytes read into memory of their own, and the in-memory model.
    let copied = Model::from_bytes(&std::fs::read(&path).unwrap()).unwrap();
    assert!(copied.tensors.iter().all(|t| !t.data.is_mapped()));
    let sc = Session::new(&copied).unwrap();
    assert_eq!(sc.mapped_bytes(), 0);
    assert_eq!(
        sc.constant_memory().released_bytes,
        0,
        "owned bytes are kept"
    );
    assert_eq!(bits(&s), bits(&sc));
    assert_eq!(bits(&s), bits(&Session::new(&model).unwrap()));
    // The session keeps the map alive after the model is gone.
    drop(opened);
    assert_eq!(bits(&s), bits(&sc));
}

#[test]
fn quantized_and_gzip_payloads_are_converted_once() {
    let dir = tempfile::tempdir().unwrap();
    let model = models::lenet5(8).unwrap();
    let int8 = WriteOptions {
        quantize: Some(QuantTarget::Int8),
        gzip: false,
    };
    let q = Model::open(save(dir.path(), "int8.mobi", &model, &int8)).unwrap();
    let m = Session::new(&q).unwrap().constant_memory();
    // Big weights are int8 (dequantized), biases stay f32 (in place from the map).
    let int8_values: u64 = q
        .tensors
        .iter()
        .filter(|t| t.dtype.is_affine())
        .map(|t| t.len())
        .sum();
    assert!(int8_values > 0);
    // Packed weights (LeNet-5's fully-connected and 6 -> 16 convolution) are decoded
    // straight into their packed copy (dropped), the rest (the depthwise-shaped first
    // convolution) dequantized once and kept.
    assert!(m.dropped_bytes > 0);
    assert_eq!(m.converted_bytes + m.dropped_bytes, 4 * int8_values);
    assert_eq!(m.mapped_bytes, m.in_place_bytes);
    assert_eq!(
        m.in_place_bytes + m.converted_bytes + m.dropped_bytes,
        4 * model.parameter_count()
    );
    let gz = WriteOptions {
        quantize: None,
        gzip: true,
    };
    let g = Model::open(save(dir.path(), "gz.mobi", &model, &gz)).unwrap();
    assert!(g.tensors.iter().all(|t| !t.data.is_mapped()));
    let sg = Session::new(&g).unwrap();
    assert_eq!(sg.mapped_bytes(), 0);
    assert_eq!(bits(&sg), bits(&Session::new(&model).unwrap()));
}

#[test]
fn v1_file_with_misaligned_f32_payloads_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let model = models::lenet5(9).unwrap();
    let want = bits(&Session::new(&model).unwrap());
    // v1 payloads follow variable-length fields: pick a model name that puts at least
    // one f32 payload at an odd address in the map (which starts page-aligned).
    let mut misaligned_seen = false;
    for extra in 0..4 {
        let mut m = model.clone();
        m.metadata.name.push_str(&"x".repeat(extra));
        let p = dir.path().join(format!("v1-{extra}.mobi"));
        std::fs::write(&p, mobi_util::encode_v1(&m)).unwrap();
        let opened = Model::open(&p).unwrap();
        let misaligned = opened
            .tensors
            .iter()
            .filter(|t| !(t.data.as_ptr() as usize).is_multiple_of(4))
            .count();
        let s = Session::new(&opened).unwrap();
        let mem = s.constant_memory();
        if misaligned > 0 {
            misaligned_seen = true;
            // Copied, or (the packed weights) decoded straight into their packed copy.
            assert!(
                mem.converted_bytes + mem.dropped_bytes > 0,
                "misaligned payloads are copied"
            );
        }
        assert_eq!(
            mem.in_place_bytes + mem.converted_bytes + mem.dropped_bytes,
            4 * model.parameter_count()
        );
        assert_eq!(bits(&s), want, "name + {extra} bytes");
    }
    assert!(misaligned_seen);
}
