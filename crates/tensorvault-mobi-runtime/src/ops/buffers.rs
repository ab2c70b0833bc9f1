//! Recycled f32 buffers. A fresh large `Vec` is a new memory mapping whose pages fault in
//! on first touch and are unmapped again when the value is freed; for a CNN's
//! activations that costs more than the arithmetic. The session keeps the buffers of
//! freed values and kernel scratch in a [`Pool`] across runs, and each run borrows them
//! as [`Buffers`]: kernels take a buffer of at least the size they need (best fit) and
//! the session gives values back after their last use.

use std::cell::RefCell;
use std::sync::Mutex;

use crate::tensor::{Data, Tensor};

/// At most this many idle buffers are kept (the rest are freed).
const MAX_IDLE: usize = 64;

/// Idle buffers kept between runs of one session (runs on several threads each take
/// what is idle; none waits for another).
#[derive(Default)]
pub(crate) struct Pool(Mutex<Vec<Vec<f32>>>);

impl Pool {
    /// Take every idle buffer for one run.
    pub fn lend(&self) -> Buffers {
        let idle = self.0.lock().map(|mut v| std::mem::take(&mut *v));
        Buffers(RefCell::new(idle.unwrap_or_default()))
    }

    /// Keep a run's buffers for the next run.
    pub fn restore(&self, b: Buffers) {
        let mut back = b.0.into_inner();
        if let Ok(mut idle) = self.0.lock() {
            idle.append(&mut back);
            trim(&mut idle);
        }
    }
}

impl Clone for Pool {
    /// A clone starts with no idle buffers.
    fn clone(&self) -> Self {
        Pool::default()
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.0.lock().map_or(0, |v| v.len());
        write!(f, "Pool {{ idle: {idle} }}")
    }
}

fn trim(idle: &mut Vec<Vec<f32>>) {
    if idle.len() > MAX_IDLE {
        // Keep the largest: they serve any request a smaller one would.
        idle.sort_unstable_by_key(|v| std::cmp::Reverse(v.capacity()));
        idle.truncate(MAX_IDLE);
    }
}

/// The buffers of one run.
#[derive(Default)]
pub(crate) struct Buffers(RefCell<Vec<Vec<f32>>>);

impl Buffers {
    /// A buffer of `n` elements with unspecified contents (zeros or values of an earlier
    /// use): the caller writes every element before reading it. `n` was checked against
    /// the element limit by the caller.
    pub fn take(&self, n: usize) -> Vec<f32> {
        let mut idle = self.0.borrow_mut();
        // A buffer shorter than `n` must be zero-filled up to `n` first (safe code cannot
        // reuse the values past a `Vec`'s length: a memset that showed up at 4-6% of the
        // CNNs' runs). So: the buffer at least `n` long that loses the fewest values to
        // the truncation (its length is what a later request can take without a fill),
        // else the longest shorter one whose capacity fits (the smallest fill).
        let best = idle
            .iter()
            .enumerate()
            .filter(|(_, v)| v.capacity() >= n)
            .min_by_key(|(_, v)| match v.len().checked_sub(n) {
                Some(lost) => (false, lost),
                None => (true, n - v.len()),
            })
            .map(|(i, _)| i);
        let mut v = match best {
            Some(i) => idle.swap_remove(i),
            None => Vec::new(),
        };
        if v.len() >= n {
            v.truncate(n);
        } else {
            v.resize(n, 0.0);
        }
        v
    }

    /// Keep `v` for a later [`Buffers::take`].
    pub fn give(&self, v: Vec<f32>) {
        if v.capacity() > 0 {
            let mut idle = self.0.borrow_mut();
            idle.push(v);
            trim(&mut idle);
        }
    }

    /// Keep the data of a freed value (f32 values only).
    pub fn recycle(&self, t: Tensor) {
        if let Data::F32(v) = t.data {
            self.give(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_fit_reuse_and_sizes() {
        let b = Buffers::default();
        b.give(vec![1.0; 100]);
        b.give(vec![2.0; 10]);
        let v = b.take(8); // the 10-element buffer fits best
        assert_eq!((v.len(), v[0]), (8, 2.0));
        let z = b.take(150); // nothing fits: a new one, the 100-element one is left
        assert!(z.len() == 150 && z.iter().all(|&x| x == 0.0));
        let w = b.take(50);
        assert_eq!((w.len(), w[0]), (50, 1.0));
        let pool = Pool::default();
        b.give(w);
        pool.restore(b);
        let again = pool.lend();
        assert_eq!(again.take(40)[0], 1.0, "kept across runs");
        for _ in 0..MAX_IDLE + 5 {
            again.give(vec![0.0; 3]);
        }
        assert_eq!(again.0.borrow().len(), MAX_IDLE);
    }

    #[test]
    fn the_request_takes_the_buffer_whose_length_it_wastes_least() {
        // A: 64 long. B: capacity 256 but only 16 long (truncated by an earlier use).
        let b = Buffers::default();
        b.give(vec![1.0; 64]);
        let mut short = Vec::with_capacity(256);
        short.extend([2.0; 16]);
        b.give(short);
        // 16 fits B exactly; taking A (the smaller capacity) would cut it to 16 and the
        // 64-element request after would zero-fill 48 values of B.
        let v = b.take(16);
        assert_eq!((v.len(), v.capacity() >= 256, v[0]), (16, true, 2.0));
        let w = b.take(64);
        assert!(
            w.len() == 64 && w.iter().all(|&x| x == 1.0),
            "A whole, no fill"
        );
        // Only buffers shorter than the request: the longest (smallest fill) that fits.
        b.give(v);
        let mut mid = Vec::with_capacity(128);
        mid.extend([3.0; 40]);
        b.give(mid);
        let z = b.take(100);
        assert_eq!((z[0], z[39], z[40]), (3.0, 3.0, 0.0), "40 kept, 60 filled");
    }

    #[test]
    fn a_buffer_long_enough_is_preferred_to_one_to_fill() {
        let b = Buffers::default();
        let mut short = Vec::with_capacity(64);
        short.extend([3.0; 8]); // capacity 64, 8 long: taking 32 would zero-fill 24
        b.give(short);
        b.give(vec![5.0; 100]);
        let v = b.take(32);
        assert_eq!((v.len(), v[31]), (32, 5.0), "the 100-long buffer, no fill");
        let w = b.take(32);
        assert_eq!(
            (w.len(), w[0], w[8]),
            (32, 3.0, 0.0),
            "then the short one, filled"
        );
    }
}
