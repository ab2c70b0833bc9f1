//! The checked API of [`RopeSpec`] (`crate::rope`): construction, validation against a
//! head dimension and the rotation of token rows, with the store's error type.

use crate::error::{Result, StoreErr};
pub use crate::rope::{RopePairing, RopeSpec};

impl RopeSpec {
    /// A checked spec.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] naming `rope.theta` (not finite or not > 1) or
    /// `rope.rotary_dims` (odd or 0).
    pub fn new(theta: f64, rotary_dims: u16, pairing: RopePairing) -> Result<Self> {
        let s = Self {
            theta,
            rotary_dims,
            pairing,
        };
        s.validate(None)?;
        Ok(s)
    }

    /// Check the fields, and that `rotary_dims <= head_dim` when a head dimension is given.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] naming the field.
    pub fn validate(&self, head_dim: Option<u32>) -> Result<()> {
        match self.problem(head_dim) {
            Some((field, reason)) => Err(StoreErr::InvalidArgument { field, reason }),
            None => Ok(()),
        }
    }

    pub(crate) fn checked(&self, rows: &[f32], head_dim: usize) -> Result<()> {
        self.validate(Some(u32::try_from(head_dim).unwrap_or(u32::MAX)))?;
        if head_dim == 0 || !rows.len().is_multiple_of(head_dim) {
            return Err(StoreErr::InvalidArgument {
                field: "values",
                reason: format!(
                    "{} values is not a whole number of {head_dim}-value token positions",
                    rows.len()
                ),
            });
        }
        Ok(())
    }

    /// Apply RoPE to `rows` of the tokens at positions `first_pos..`.
    ///
    /// # Errors
    /// [`StoreErr::InvalidArgument`] if `rows` is not whole tokens of `head_dim` or the
    /// spec does not fit `head_dim`.
    pub fn apply(&self, rows: &mut [f32], head_dim: usize, first_pos: u64) -> Result<()> {
        self.checked(rows, head_dim)?;
        self.rotate_rows(rows, head_dim, first_pos, false);
        Ok(())
    }

    /// Undo RoPE on `rows` of the tokens at positions `first_pos..` (post-RoPE keys back
    /// to pre-RoPE, up to rounding).
    ///
    /// # Errors
    /// As [`RopeSpec::apply`].
    pub fn unapply(&self, rows: &mut [f32], head_dim: usize, first_pos: u64) -> Result<()> {
        self.checked(rows, head_dim)?;
        self.rotate_rows(rows, head_dim, first_pos, true);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_bad_specs() {
        for (theta, dims, field) in [
            (f64::NAN, 64, "rope.theta"),
            (1.0, 64, "rope.theta"),
            (1e4, 0, "rope.rotary_dims"),
            (1e4, 63, "rope.rotary_dims"),
        ] {
            let e = RopeSpec::new(theta, dims, RopePairing::Neox).unwrap_err();
            assert!(
                matches!(e, StoreErr::InvalidArgument { field: f, .. } if f == field),
                "{e}"
            );
        }
        let s = RopeSpec::new(1e4, 128, RopePairing::Neox).unwrap();
        let e = s.apply(&mut [0.0; 64], 64, 0).unwrap_err();
        assert!(e.to_string().contains("head_dim 64"), "{e}");
        let e = RopeSpec::new(1e4, 8, RopePairing::Neox)
            .unwrap()
            .apply(&mut [0.0; 13], 8, 0)
            .unwrap_err();
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

    #[test]
    fn pairings_rotate_the_right_channels() {
        // Token at position 1, head_dim 4, theta 1e4: pair 0 rotates by 1 rad, pair 1 by
        // 1e4^(-1/2) = 0.01 rad.
        let x = [1.0f32, 2.0, 3.0, 4.0];
        let (c0, s0, c1, s1) = (1f32.cos(), 1f32.sin(), 0.01f32.cos(), 0.01f32.sin());
        let mut neox = x;
        RopeSpec::new(1e4, 4, RopePairing::Neox)
            .unwrap()
            .apply(&mut neox, 4, 1)
            .unwrap();
        // Neox pairs (0, 2) and (1, 3).
        let want = [
            1.0 * c0 - 3.0 * s0,
            2.0 * c1 - 4.0 * s1,
            1.0 * s0 + 3.0 * c0,
            2.0 * s1 + 4.0 * c1,
        ];
        for (a, b) in neox.iter().zip(want) {
            assert!((a - b).abs() < 1e-5, "{neox:?} {want:?}");
        }
        let mut inter = x;
        RopeSpec::new(1e4, 4, RopePairing::Interleaved)
            .unwrap()
            .apply(&mut inter, 4, 1)
            .unwrap();
        let want = [
            1.0 * c0 - 2.0 * s0,
            1.0 * s0 + 2.0 * c0,
            3.0 * c1 - 4.0 * s1,
            3.0 * s1 + 4.0 * c1,
        ];
        for (a, b) in inter.iter().zip(want) {
            assert!((a - b).abs() < 1e-5, "{inter:?} {want:?}");
        }
        // Partial rotary: channels beyond rotary_dims are untouched.
        let mut part = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        RopeSpec::new(1e4, 4, RopePairing::Neox)
            .unwrap()
            .apply(&mut part, 6, 7)
            .unwrap();
        assert_eq!(part[4..], [5.0, 6.0]);
    }

    proptest! {
        #[test]
        fn unapply_undoes_apply(
            vals in proptest::collection::vec(-8.0f32..8.0, 1..8usize).prop_map(|v| v.repeat(8)),
            pos in 0u64..100_000,
            neox in any::<bool>(),
        ) {
            let pairing = if neox { RopePairing::Neox } else { RopePairing::Interleaved };
            let s = RopeSpec::new(1e5, 8, pairing).unwrap();
            let mut y = vals.clone();
            s.apply(&mut y, 8, pos).unwrap();
            // A rotation keeps each pair's norm.
            let n0: f32 = vals.iter().map(|v| v * v).sum();
            let n1: f32 = y.iter().map(|v| v * v).sum();
            prop_assert!((n0 - n1).abs() <= 1e-3 * n0.max(1.0));
            s.unapply(&mut y, 8, pos).unwrap();
            for (a, b) in vals.iter().zip(&y) {
                prop_assert!((a - b).abs() < 1e-4, "{} {}", a, b);
            }
        }
    }
}
