//! Power cuts during the atomic replacement of CVC, CGEB and MOBI files (issue 15,
//! item 1): every writer replaces its output through `AtomicFile` (temporary file,
//! fsync, rename, directory fsync). For every cut point of a replacement (every file
//! operation of `tensorvault_core::fsio`) and three loss models, the disk image after
//! the cut must hold, under the destination's name, the old file or the new one byte for
//! byte, never a mix; once the replacement returned, the new one. A CGEB batch is two
//! files replaced one after the other: each is old or new, and a new data file next to an
//! old index is refused by the reader (the index carries the data file's hash).

use std::path::Path;

use tensorvault_core::fsio::power_cut::{Image, Loss, PowerCut};
use tensorvault_formats::cgeb::{
    BatchBinaryEncoder, BatchReader, EmbeddingBinaryCodec, FusedEmbedding,
};
use tensorvault_formats::cvc::{pack, Compression, PackOptions};
use tensorvault_formats::mobi::models::lenet5;
use tensorvault_formats::mobi::WriteOptions;

const LOSSES: [Loss; 3] = [Loss::AllUnsynced, Loss::Random { seed: 7 }, Loss::Nothing];

/// Cut `write` (which replaces files under `dir`) at every operation and hand each disk
/// image, with whether `write` returned Ok, to `check`. Returns the number of cut points.
fn every_cut(
    setup: &dyn Fn(&Path),
    write: &dyn Fn(&Path) -> bool,
    check: &dyn Fn(&Image, bool, &str),
) -> u64 {
    // Count the operations of one uncut replacement.
    let d = tempfile::tempdir().unwrap();
    setup(d.path());
    let (pc, g) = PowerCut::start(d.path(), None, Loss::AllUnsynced).unwrap();
    assert!(write(d.path()), "the uncut replacement failed");
    let ops = pc.ops();
    drop(g);
    assert!(
        ops >= 3,
        "a replacement is at least fsync, rename, dir fsync ({ops})"
    );
    let mut points = 0;
    for loss in LOSSES {
        for cut in 0..=ops {
            let d = tempfile::tempdir().unwrap();
            setup(d.path());
            let (pc, g) = PowerCut::start(d.path(), Some(cut), loss).unwrap();
            let ok = write(d.path());
            let image = pc.cut_now().unwrap();
            drop(g);
            check(
                &image,
                ok,
                &format!("cut after op {cut} of {ops}, {loss:?}"),
            );
            points += 1;
        }
    }
    points
}

fn old_or_new(image: &Image, name: &str, old: &[u8], new: &[u8], ok: bool, ctx: &str) -> bool {
    let got = image
        .get(Path::new(name))
        .unwrap_or_else(|| panic!("{ctx}: {name} is gone"));
    if ok {
        assert!(
            got == new,
            "{ctx}: {name} is not the new file after the write returned"
        );
    }
    assert!(
        got == old || got == new,
        "{ctx}: {name} is a mix ({} bytes; old {}, new {})",
        got.len(),
        old.len(),
        new.len()
    );
    got == new
}

fn values(seed: u32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
        .collect()
}

#[test]
fn cvc_replacement_is_old_or_new_at_every_cut() {
    let opts = PackOptions {
        compression: Compression::Int8,
        chunk_size: 64,
        ..PackOptions::default()
    };
    let bytes_of = |v: &[f32]| {
        let d = tempfile::tempdir().unwrap();
        pack(d.path().join("x.cvc"), v, 16, &opts).unwrap();
        std::fs::read(d.path().join("x.cvc")).unwrap()
    };
    let (old_v, new_v) = (values(1, 16 * 200), values(2, 16 * 300));
    let (old, new) = (bytes_of(&old_v), bytes_of(&new_v));
    let points = every_cut(
        &|dir| {
            pack(dir.join("v.cvc"), &old_v, 16, &opts).unwrap();
        },
        &|dir| pack(dir.join("v.cvc"), &new_v, 16, &opts).is_ok(),
        &|img, ok, ctx| {
            old_or_new(img, "v.cvc", &old, &new, ok, ctx);
        },
    );
    eprintln!("cvc: {points} cut points");
}

#[test]
fn mobi_replacement_is_old_or_new_at_every_cut() {
    let old_m = lenet5(1).unwrap();
    let new_m = lenet5(2).unwrap();
    let opts = WriteOptions::default();
    let (old, new) = (
        old_m.to_bytes_with(&opts).unwrap(),
        new_m.to_bytes_with(&opts).unwrap(),
    );
    assert_ne!(old, new);
    let points = every_cut(
        &|dir| {
            old_m.save(dir.join("m.mobi"), &opts).unwrap();
        },
        &|dir| new_m.save(dir.join("m.mobi"), &opts).is_ok(),
        &|img, ok, ctx| {
            old_or_new(img, "m.mobi", &old, &new, ok, ctx);
        },
    );
    eprintln!("mobi: {points} cut points");
}

fn batch(seed: u32, n: usize) -> BatchBinaryEncoder {
    let mut b = BatchBinaryEncoder::new(EmbeddingBinaryCodec::default(), 4096).unwrap();
    for i in 0..n {
        let e = FusedEmbedding::new(values(seed + i as u32, 32), vec![0.25; 4], vec![0, 1, 2, 3]);
        b.push(&e).unwrap();
    }
    b
}

#[test]
fn cgeb_batch_replacement_is_old_or_new_at_every_cut() {
    let (old_b, new_b) = (batch(10, 3), batch(20, 5));
    let files = |b: &BatchBinaryEncoder| {
        let d = tempfile::tempdir().unwrap();
        b.write_gds_file(&d.path().join("b.cgeb")).unwrap();
        (
            std::fs::read(d.path().join("b.cgeb")).unwrap(),
            std::fs::read(d.path().join("b.cgei")).unwrap(),
        )
    };
    let ((old_d, old_i), (new_d, new_i)) = (files(&old_b), files(&new_b));
    let points = every_cut(
        &|dir| {
            old_b.write_gds_file(&dir.join("b.cgeb")).unwrap();
        },
        &|dir| new_b.write_gds_file(&dir.join("b.cgeb")).is_ok(),
        &|img, ok, ctx| {
            let data_new = old_or_new(img, "b.cgeb", &old_d, &new_d, ok, ctx);
            let index_new = old_or_new(img, "b.cgei", &old_i, &new_i, ok, ctx);
            let d = tempfile::tempdir().unwrap();
            PowerCut::write_image(img, d.path()).unwrap();
            let opened = BatchReader::open(&d.path().join("b.cgeb"));
            if data_new == index_new {
                let r = opened.unwrap_or_else(|e| panic!("{ctx}: a matching pair fails: {e}"));
                assert_eq!(r.len(), if data_new { 5 } else { 3 }, "{ctx}");
            } else {
                assert!(
                    opened.is_err(),
                    "{ctx}: a mixed data/index pair was accepted"
                );
            }
        },
    );
    eprintln!("cgeb: {points} cut points");
}
