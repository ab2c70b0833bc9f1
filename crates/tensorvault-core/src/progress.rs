//! The one progress layer of the workspace: long library operations (a CVC pack, a
//! store `put_tensor`, ...) take an optional [`ProgressFn`] and call it with
//! `(done, total)` in the unit the operation documents (rows, bytes, blocks); the CLI
//! turns it into a progress bar with rates for people, Python or a service into whatever
//! it shows. A callback must be cheap: it runs on the working thread.
//!
//! ```
//! use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
//! use tensorvault_core::progress::{report, ProgressFn};
//! let seen = Arc::new(AtomicU64::new(0));
//! let s = Arc::clone(&seen);
//! let p: ProgressFn = Arc::new(move |done, _total| s.store(done, Ordering::Relaxed));
//! report(Some(&p), 40, 100);
//! report(None, 50, 100); // no callback: nothing happens
//! assert_eq!(seen.load(Ordering::Relaxed), 40);
//! ```

use std::sync::Arc;

/// A progress callback: `(done, total)` in the operation's unit.
pub type ProgressFn = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// Call `progress` (if any) with `(done, total)`.
pub fn report(progress: Option<&ProgressFn>, done: u64, total: u64) {
    if let Some(p) = progress {
        p(done, total);
    }
}
