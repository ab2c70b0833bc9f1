//! RoPE at read from a table: the `(cos, sin)` of every position a cache has read and
//! every rotary pair, computed once (as [`RopeSpec::apply`] computes them: the angle in
//! f64, rounded to f32) and reused by later reads, which rotate every cached key at
//! every decode step. Bit-identical to [`RopeSpec::apply`].

use std::sync::RwLock;

use crate::error::{Result, StoreErr};
use crate::rope::RopeSpec;

/// Positions the table holds at most (`(cos, sin)` of 32 pairs is 256 bytes a position:
/// 16 MiB at head_dim 64); reads beyond it compute the angles as [`RopeSpec::apply`] does.
pub(crate) const MAX_TABLE_POSITIONS: u64 = 1 << 16;

/// A growing table of one spec's rotations.
#[derive(Debug)]
pub(crate) struct RopeTable {
    spec: RopeSpec,
    /// `[pos * pairs + i]` = `(cos, sin)` of pair `i` at position `pos`, positions
    /// `0..len / pairs`.
    cs: RwLock<Vec<[f32; 2]>>,
}

fn poisoned<T>(_: T) -> StoreErr {
    StoreErr::Poisoned { lock: "rope table" }
}

impl RopeTable {
    pub(crate) fn new(spec: RopeSpec) -> Self {
        Self {
            spec,
            cs: RwLock::new(Vec::new()),
        }
    }

    /// Apply RoPE to `rows` of the tokens at positions `first_pos..`, as
    /// [`RopeSpec::apply`] does (the same f32 values).
    ///
    /// # Errors
    /// As [`RopeSpec::apply`]; [`StoreErr::Poisoned`] if a reader panicked while
    /// growing the table.
    pub(crate) fn apply(&self, rows: &mut [f32], head_dim: usize, first_pos: u64) -> Result<()> {
        self.spec.checked(rows, head_dim)?;
        let pairs = usize::from(self.spec.rotary_dims / 2);
        let tokens = (rows.len() / head_dim) as u64;
        let end = first_pos.saturating_add(tokens);
        if end > MAX_TABLE_POSITIONS || pairs == 0 {
            return self.spec.apply(rows, head_dim, first_pos);
        }
        let have = self.cs.read().map_err(poisoned)?.len() / pairs;
        if (have as u64) < end {
            let mut cs = self.cs.write().map_err(poisoned)?;
            let inv = self.spec.inv_freq();
            // Grow to twice what is needed (fewer regrowths as a cache fills up).
            let want = (end.saturating_mul(2)).min(MAX_TABLE_POSITIONS) as usize;
            let from = cs.len() / pairs;
            cs.reserve((want.saturating_sub(from)) * pairs);
            for pos in from..want {
                let p = pos as f64;
                cs.extend(inv.iter().map(|f| {
                    let ang = p * f;
                    [ang.cos() as f32, ang.sin() as f32]
                }));
            }
        }
        let cs = self.cs.read().map_err(poisoned)?;
        let start = first_pos as usize * pairs;
        let table = &cs[start..start + tokens as usize * pairs];
        for (row, t) in rows
            .chunks_exact_mut(head_dim)
            .zip(table.chunks_exact(pairs))
        {
            for (i, &[c, s]) in t.iter().enumerate() {
                let (a, b) = self.spec.pair(i);
                let (x, y) = (row[a], row[b]);
                row[a] = x * c - y * s;
                row[b] = x * s + y * c;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::RopePairing;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_table_rotates_exactly_as_the_spec(
            first in 0u64..3000,
            tokens in 1usize..40,
            dims in prop::sample::select(vec![8u16, 32, 64]),
            interleaved in any::<bool>(),
            seed in any::<u32>(),
        ) {
            let pairing = if interleaved { RopePairing::Interleaved } else { RopePairing::Neox };
            let spec = RopeSpec::new(1e5, dims, pairing).unwrap();
            let hd = 64usize;
            let x: Vec<f32> = (0..tokens * hd)
                .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
                .collect();
            let table = RopeTable::new(spec);
            // A read further on first, so the table both grows and is reused.
            let mut warm = vec![0.0f32; hd];
            table.apply(&mut warm, hd, first + tokens as u64 + 5).unwrap();
            let (mut a, mut b) = (x.clone(), x);
            spec.apply(&mut a, hd, first).unwrap();
            table.apply(&mut b, hd, first).unwrap();
            prop_assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            b.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        }
    }

    #[test]
    fn positions_beyond_the_table_and_bad_rows_behave_as_the_spec() {
        let spec = RopeSpec::new(1e4, 64, RopePairing::Neox).unwrap();
        let table = RopeTable::new(spec);
        let x: Vec<f32> = (0..128).map(|i| i as f32 * 0.01).collect();
        let (mut a, mut b) = (x.clone(), x);
        spec.apply(&mut a, 64, MAX_TABLE_POSITIONS - 1).unwrap();
        table.apply(&mut b, 64, MAX_TABLE_POSITIONS - 1).unwrap();
        assert_eq!(a, b);
        assert!(
            table.cs.read().unwrap().is_empty(),
            "nothing cached past the cap"
        );
        let e = table.apply(&mut [0.0; 13], 64, 0).unwrap_err();
        assert!(
            matches!(
                e,
                StoreErr::InvalidArgument {
                    field: "values",
                    ..
                }
            ),
            "{e}"
        );
    }
}
