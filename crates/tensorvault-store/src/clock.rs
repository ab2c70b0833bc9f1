//! Tick sources. The store never reads wall time directly: a [`ManualClock`] makes every
//! access score, migration and replayed index deterministic in tests.

use std::sync::atomic::{AtomicU64, Ordering};

/// Monotonic tick source for timestamps.
pub trait Clock: Send + Sync {
    /// The current tick; never decreases.
    fn now_ticks(&self) -> u64;
}

/// Ticks are whole seconds since the Unix epoch (wall clock, clamped to never go back).
#[derive(Debug, Default)]
pub struct SystemClock {
    last: AtomicU64,
}

impl SystemClock {
    /// A system clock.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

impl Clock for SystemClock {
    fn now_ticks(&self) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // fetch_max keeps the clock monotonic if the wall clock steps back.
        let prev = self.last.fetch_max(now, Ordering::Relaxed);
        prev.max(now)
    }
}

/// A clock that only moves when told to: for tests and simulations.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A manual clock at `start`.
    #[must_use]
    pub fn new(start: u64) -> Self {
        Self {
            now: AtomicU64::new(start),
        }
    }

    /// Move forward by `ticks`.
    pub fn advance(&self, ticks: u64) {
        self.now.fetch_add(ticks, Ordering::Relaxed);
    }

    /// Jump to `tick` (ignored if it is in the past: the clock stays monotonic).
    pub fn set(&self, tick: u64) {
        self.now.fetch_max(tick, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_ticks(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_ticks(&self) -> u64 {
        (**self).now_ticks()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_is_monotonic() {
        let c = ManualClock::new(10);
        c.advance(5);
        assert_eq!(c.now_ticks(), 15);
        c.set(3);
        assert_eq!(c.now_ticks(), 15);
        c.set(40);
        assert_eq!(c.now_ticks(), 40);
    }

    #[test]
    fn system_clock_moves_forward() {
        let c = SystemClock::new();
        let a = c.now_ticks();
        assert!(a > 1_700_000_000);
        assert!(c.now_ticks() >= a);
    }
}
