//! Property: whatever prompts are stored (any chunk size, shared or diverging starts, f16
//! values of any finite pattern), a Tier0 load returns exactly the stored values of the
//! longest stored prefix, and lookup agrees with load.

use half::f16;
use proptest::prelude::*;
use tensorvault_store::prefix::{KvData, PrefixConfig};
use tensorvault_store::PrefixCache;

const L: u32 = 2;
const H: u32 = 2;
const D: u32 = 4;

fn kv(tokens: &[u32], seed: u16) -> (Vec<Vec<f16>>, Vec<Vec<f16>>) {
    // Values depend on (position, token) only, so equal prefixes carry equal KV.
    let mk = |kind: u32| {
        (0..L)
            .map(|l| {
                let mut v = Vec::new();
                for h in 0..H {
                    for (p, &t) in tokens.iter().enumerate() {
                        v.extend((0..D).map(|d| {
                            let bits =
                                (t.wrapping_mul(31) ^ (p as u32 * 7) ^ (kind + l * 3 + h * 5 + d))
                                    .wrapping_add(u32::from(seed))
                                    as u16;
                            let x = f16::from_bits(bits & 0x7bff); // finite, any sign bit clear
                            if x.is_finite() {
                                x
                            } else {
                                f16::ZERO
                            }
                        }));
                    }
                }
                v
            })
            .collect::<Vec<_>>()
    };
    (mk(0), mk(1))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn stored_prefixes_load_back_exactly(
        chunk in 1u32..6,
        prompts in prop::collection::vec((0usize..3, prop::collection::vec(0u32..4, 0..20)), 1..5),
        seed in any::<u16>(),
        probe in prop::collection::vec(0u32..4, 0..24),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = PrefixConfig { chunk_tokens: chunk, ..PrefixConfig::default() };
        let c = PrefixCache::open(dir.path(), "p", L, H, D, cfg).unwrap();
        // Prompts share a common start of 0..3 tokens from `probe`, then diverge.
        let mut stored: Vec<Vec<u32>> = Vec::new();
        for (shared, tail) in &prompts {
            let mut t: Vec<u32> = probe.iter().take(*shared).copied().collect();
            t.extend(tail);
            let (k, v) = kv(&t, seed);
            let kd: Vec<KvData> = k.iter().map(|x| KvData::F16(x)).collect();
            let vd: Vec<KvData> = v.iter().map(|x| KvData::F16(x)).collect();
            c.store(&t, &kd, &vd).unwrap();
            stored.push(t);
        }
        for t in stored.iter().chain(std::iter::once(&probe)) {
            // The longest full-chunk prefix of t that is a full-chunk prefix of a stored prompt.
            let ch = chunk as usize;
            let want = stored
                .iter()
                .map(|s| {
                    let common = s.iter().zip(t).take_while(|(a, b)| a == b).count();
                    common.min(s.len() / ch * ch).min(t.len()) / ch * ch
                })
                .max()
                .unwrap_or(0);
            prop_assert_eq!(c.lookup(t).unwrap() as usize, want);
            let got = c.load(t, None).unwrap();
            prop_assert_eq!(got.tokens, want);
            let (k, v) = kv(&t[..want], seed);
            prop_assert_eq!(&got.keys, &k);
            prop_assert_eq!(&got.values, &v);
        }
    }
}
