//! Fuzz the CVC reader: arbitrary bytes must never panic, hang or allocate without bound.
//! Every error is fine; when the bytes open, every read path is exercised and the paths
//! must agree with each other.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tensorvault_formats::cvc::CvcReader;

fuzz_target!(|data: &[u8]| {
    let Ok(r) = CvcReader::from_source(data.to_vec(), "fuzz") else {
        return;
    };
    let (n, dim) = (r.num_vectors(), r.dimension());

    let all = r.load_all();
    if let Ok(t) = &all {
        let want = [usize::try_from(n).unwrap(), usize::try_from(dim).unwrap()];
        assert_eq!(t.shape().dims(), &want);
    }

    // A small range in the middle and the first row.
    let lo = n / 3;
    let hi = (lo + 2).min(n);
    if let (Ok(part), Ok(all)) = (r.load_rows(lo..hi), &all) {
        let all = all.as_slice::<f32>().unwrap();
        let range = (lo * dim) as usize..(hi * dim) as usize;
        let same = part
            .as_slice::<f32>()
            .unwrap()
            .iter()
            .zip(&all[range.clone()]);
        assert!(same.clone().all(|(a, b)| a.to_bits() == b.to_bits()));
        assert_eq!(part.as_slice::<f32>().unwrap().len(), range.len());
    }
    let _ = r.load_rows(0..n.min(1));

    // The chunk iterator, concatenated, equals the full load when both succeed.
    let mut streamed = Vec::new();
    let mut iter_ok = true;
    for c in r.iter_chunks() {
        match c {
            Ok(c) => streamed.extend(c.values.iter().map(|x| x.to_bits())),
            Err(_) => iter_ok = false,
        }
    }
    if let (true, Ok(all)) = (iter_ok, &all) {
        let all: Vec<u32> = all
            .as_slice::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect();
        assert_eq!(streamed, all);
    }

    let report = r.verify();
    if let Ok(report) = &report {
        assert_eq!(report.chunks, r.chunks().len());
        // A clean report means the checksummed load cannot fail on a checksum.
        if report.is_ok() {
            assert!(all.is_ok());
        }
    }

    // Without checksums, corrupted payloads are decoded too.
    let _ = r.with_checksums(false).load_all();
});
