//! TQTC version 8 bytes did not change when session 16 generalised `segment_v8.rs` for
//! version 9 (review16): real SmolLM2 keys (`tests/fixtures/quality/smollm2_kv_L*.npy`,
//! the KV store's 256-token blocks, the sink row raw in block 0) and a few synthetic
//! edge blocks are encoded with `encode_to_fit` at the store's tier 2 budget, a tight and
//! a loose one, and with `encode` at fixed steps; each segment's length and FNV-1a hash
//! are pinned to what the parent of the session's merge (8a17cf6, before the
//! generalisation) wrote for the same inputs. The cases live in [`cases`], so the same
//! file builds against that commit's crate to regenerate the pins.

use tensorvault_quant::segment_v8::{decode, encode, encode_to_fit, V8Params};

/// Tokens per KV block and the sink row of block 0 (the store's KV layout).
const BLOCK_TOKENS: usize = 256;
const HEAD_DIM: usize = 64;

/// The keys `[3, 512, 64]` (f16, as the cache holds them) of a SmolLM2 fixture.
fn fixture_keys(layer: u32) -> Vec<f32> {
    let path = format!(
        "{}/../../tests/fixtures/quality/smollm2_kv_L{layer}.npy",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    // NPY v1: magic (6), version (2), header length (u16 LE), header.
    let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert!(
        header.contains("'<f2'") && header.contains("(2, 3, 512, 64)"),
        "{header}"
    );
    // The first half of the array is the keys.
    bytes[10 + header_len..]
        .chunks_exact(2)
        .take(3 * 512 * HEAD_DIM)
        .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
        .collect()
}

/// Synthetic blocks at the edges: one huge outlier channel, values near f16's limit,
/// constant channels, an all-zero block.
fn synthetic() -> Vec<(&'static str, Vec<f32>)> {
    let mut s = 0x9E37_79B9u32;
    let mut noise = move || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        (s & 0xFFFF) as f32 / 32768.0 - 1.0
    };
    let n = 64 * HEAD_DIM;
    let base: Vec<f32> = (0..n)
        .map(|i| ((i % HEAD_DIM) as f32 * 0.37).sin() * 3.0 + noise() * 0.4)
        .collect();
    let mut outlier = base.clone();
    outlier[17 * HEAD_DIM + 5] = 900.0;
    let near_limit: Vec<f32> = base.iter().map(|v| 60000.0 + v * 1000.0).collect();
    let constant: Vec<f32> = base
        .iter()
        .enumerate()
        .map(|(i, &v)| if i % HEAD_DIM < 8 { 1.25 } else { v })
        .collect();
    vec![
        ("outlier", outlier),
        ("near_f16_limit", near_limit),
        ("constant_channels", constant),
        ("zeros", vec![0.0; n]),
    ]
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Every case: a name, the segment's length and hash.
pub fn cases() -> Vec<(String, usize, u64)> {
    let mut out = Vec::new();
    let mut push = |name: String, bytes: Option<Vec<u8>>| {
        let (len, h) = bytes.map_or((0, 0), |b| (b.len(), fnv1a(&b)));
        out.push((name, len, h));
    };
    let p = |raw_rows, bits, lanes_log2| V8Params {
        bits,
        width: HEAD_DIM as u16,
        raw_rows,
        lanes_log2,
    };
    let len = BLOCK_TOKENS * HEAD_DIM;
    for layer in [0, 19] {
        let k = fixture_keys(layer);
        for head in 0..3 {
            for block in 0..2 {
                let at = head * 512 * HEAD_DIM + block * len;
                let x = &k[at..at + len];
                let raw = u16::from(block == 0);
                // The store's tier 2 budget (4.95 b/v), a tight one, a loose one (rung 0
                // fits: the finer-rung walk).
                for (tag, budget) in [
                    ("t2", len * 495 / 800),
                    ("tight", len * 3 / 8),
                    ("loose", len * 2),
                ] {
                    let b = encode_to_fit(&p(raw, 8, 2), x, budget).unwrap();
                    push(format!("L{layer} h{head} b{block} k8 {tag}"), b);
                }
                let b = encode_to_fit(&p(raw, 10, 0), x, len * 6 / 8).unwrap();
                push(format!("L{layer} h{head} b{block} k10 l0"), b);
                let b = encode(&p(raw, 6, 3), x, 0.05).unwrap();
                push(format!("L{layer} h{head} b{block} k6 step"), Some(b));
            }
        }
    }
    for (name, x) in synthetic() {
        for budget in [x.len() * 495 / 800, x.len() * 2] {
            let b = encode_to_fit(&p(1, 8, 2), &x, budget).unwrap_or(None);
            push(format!("{name} {budget}"), b);
        }
    }
    out
}

/// Lengths and FNV-1a hashes written by 8a17cf6's `segment_v8` for [`cases`].
const PINNED: &[(&str, usize, u64)] = &[
    ("L0 h0 b0 k8 t2", 10124, 0x63e2f0f8c25ced33),
    ("L0 h0 b0 k8 tight", 6110, 0x78db4006a84ba922),
    ("L0 h0 b0 k8 loose", 12198, 0x83825f697bf2cc2c),
    ("L0 h0 b0 k10 l0", 12260, 0x07a0b804290dd178),
    ("L0 h0 b0 k6 step", 11660, 0x6631cf604155b36d),
    ("L0 h0 b1 k8 t2", 10114, 0x31eb0bc4bddf38ae),
    ("L0 h0 b1 k8 tight", 6074, 0x0f83b35e9e49d243),
    ("L0 h0 b1 k8 loose", 12332, 0x347d64b7fbbea572),
    ("L0 h0 b1 k10 l0", 12212, 0xa647f308cd4c36a4),
    ("L0 h0 b1 k6 step", 11562, 0x0bd433e98c411f69),
    ("L0 h1 b0 k8 t2", 10110, 0x388f8d5eb4c58feb),
    ("L0 h1 b0 k8 tight", 6124, 0xee08b3cacf732c17),
    ("L0 h1 b0 k8 loose", 13436, 0x646f1042cb4cdbf8),
    ("L0 h1 b0 k10 l0", 12264, 0xfe2dd3226d0ee6bf),
    ("L0 h1 b0 k6 step", 11452, 0x1333eb9b84d3fac6),
    ("L0 h1 b1 k8 t2", 10080, 0xee6b68f2c5a2ba9d),
    ("L0 h1 b1 k8 tight", 6132, 0x94015368a1687962),
    ("L0 h1 b1 k8 loose", 13476, 0xf2a8a8854ff2abb1),
    ("L0 h1 b1 k10 l0", 12240, 0x94996938ffc1c4a9),
    ("L0 h1 b1 k6 step", 11228, 0xe968a63cf66d0083),
    ("L0 h2 b0 k8 t2", 10088, 0xe2851659f438e5e9),
    ("L0 h2 b0 k8 tight", 6084, 0x3d537924bd4ac3ca),
    ("L0 h2 b0 k8 loose", 12788, 0xb23ed6394430e45d),
    ("L0 h2 b0 k10 l0", 12254, 0x8bc23a35cfc6687c),
    ("L0 h2 b0 k6 step", 11426, 0x08eb9e206c22ca02),
    ("L0 h2 b1 k8 t2", 10084, 0x140e0fa5e4fe69e0),
    ("L0 h2 b1 k8 tight", 6134, 0xa92b725a9ba960d2),
    ("L0 h2 b1 k8 loose", 12562, 0x0f09b18033e8b876),
    ("L0 h2 b1 k10 l0", 12270, 0xae6bf9436286dcd0),
    ("L0 h2 b1 k6 step", 11246, 0x5092580da4441af1),
    ("L19 h0 b0 k8 t2", 10108, 0x39571c1a1ae4a787),
    ("L19 h0 b0 k8 tight", 6124, 0xcdf2ceb16c9b5a44),
    ("L19 h0 b0 k8 loose", 14264, 0x45f12fa11a6c5323),
    ("L19 h0 b0 k10 l0", 12244, 0xd1feb815713064a3),
    ("L19 h0 b0 k6 step", 12016, 0x4a4c81ba65d62c8d),
    ("L19 h0 b1 k8 t2", 10122, 0xbfa8efd2df2d76cc),
    ("L19 h0 b1 k8 tight", 6122, 0xc83fe22ad6cc2530),
    ("L19 h0 b1 k8 loose", 14150, 0x36040ce8c17053ad),
    ("L19 h0 b1 k10 l0", 12270, 0x184a110a77cb278d),
    ("L19 h0 b1 k6 step", 11970, 0xb7b911e246458d96),
    ("L19 h1 b0 k8 t2", 10118, 0x48542892466bcc4a),
    ("L19 h1 b0 k8 tight", 6104, 0x57b8b17ce665c94e),
    ("L19 h1 b0 k8 loose", 14274, 0x7b717092038c396b),
    ("L19 h1 b0 k10 l0", 12262, 0x03986200c4ade499),
    ("L19 h1 b0 k6 step", 11140, 0xa54fc9ec39c80078),
    ("L19 h1 b1 k8 t2", 10108, 0x926329e7895ac9b4),
    ("L19 h1 b1 k8 tight", 6118, 0x9ee1530ecf6ef0d2),
    ("L19 h1 b1 k8 loose", 14190, 0x7f2b109a21521c75),
    ("L19 h1 b1 k10 l0", 12258, 0x4994e88450f4ec27),
    ("L19 h1 b1 k6 step", 11026, 0xafd75966600ec527),
    ("L19 h2 b0 k8 t2", 10086, 0x8bc390169d50eeef),
    ("L19 h2 b0 k8 tight", 6118, 0x2b5ad34f1ab88a3f),
    ("L19 h2 b0 k8 loose", 13742, 0xfeb0bd95ef6b7ba7),
    ("L19 h2 b0 k10 l0", 12232, 0xd258bf8812290c5a),
    ("L19 h2 b0 k6 step", 11102, 0x2f9dd7ef37dcb594),
    ("L19 h2 b1 k8 t2", 10098, 0xce8f04834110d1a5),
    ("L19 h2 b1 k8 tight", 6118, 0x46a8064a430314e3),
    ("L19 h2 b1 k8 loose", 13636, 0x13cfdd2a1b358cbf),
    ("L19 h2 b1 k10 l0", 12258, 0x0663356ca067980a),
    ("L19 h2 b1 k6 step", 10962, 0x7620083ed979dd9c),
    ("outlier 2534", 900, 0x8900ed7262a37828),
    ("outlier 8192", 900, 0x8900ed7262a37828),
    ("near_f16_limit 2534", 2534, 0x6632ca4dc2786afa),
    ("near_f16_limit 8192", 4430, 0x5173f7f187952df2),
    ("constant_channels 2534", 2532, 0x4b56167b4610d8dd),
    ("constant_channels 8192", 3990, 0x501e9e0fa158460f),
    ("zeros 2534", 878, 0xedcbf3ea7bf399c1),
    ("zeros 8192", 878, 0xedcbf3ea7bf399c1),
];

#[test]
fn v8_bytes_match_the_commit_before_the_generalisation() {
    let got = cases();
    assert_eq!(got.len(), PINNED.len());
    for ((name, len, h), (pn, pl, ph)) in got.iter().zip(PINNED) {
        assert_eq!((name.as_str(), *len, *h), (*pn, *pl, *ph));
    }
}

#[test]
fn the_pinned_real_blocks_decode_within_the_budget() {
    let k = fixture_keys(19);
    let x = &k[..BLOCK_TOKENS * HEAD_DIM];
    let p = V8Params {
        bits: 8,
        width: 64,
        raw_rows: 1,
        lanes_log2: 2,
    };
    let budget = x.len() * 495 / 800;
    let b = encode_to_fit(&p, x, budget).unwrap().unwrap();
    assert!(b.len() <= budget);
    let mut y = Vec::new();
    decode(&b, x.len(), &mut y).unwrap();
    let (num, den) = x.iter().zip(&y).fold((0f64, 0f64), |(n, d), (a, b)| {
        let e = f64::from(a - b);
        (n + e * e, d + f64::from(*a) * f64::from(*a))
    });
    // A real error, well under 5% relative RMSE at 4.95 b/v.
    assert!((num / den).sqrt() < 0.05, "{}", (num / den).sqrt());
}
