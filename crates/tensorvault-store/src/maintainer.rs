//! A background thread that runs one tiering step ([`crate::TensorStore::maintain`])
//! every interval (feature `threads`).

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::block_io::BlockIO;
use crate::clock::Clock;
use crate::meta_log::MetaLog;
use crate::store::TensorStore;
use crate::tiering::MaintainReport;

/// Totals of a background maintainer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MaintainerTotals {
    /// Steps run.
    pub steps: u64,
    /// Blocks moved.
    pub moves: u64,
    /// Steps that failed (logged with tracing).
    pub errors: u64,
    /// Blocks held in their tier after the last successful step (values a colder tier
    /// cannot encode: `crate::finite`); tiering of the others goes on.
    pub held: u64,
}

/// A background thread running [`TensorStore::maintain`] every interval; stopped
/// (and joined) by [`Maintainer::stop`] or on drop.
pub struct Maintainer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    totals: Arc<Mutex<MaintainerTotals>>,
    handle: Option<JoinHandle<()>>,
}

impl Maintainer {
    /// Start maintaining `store` every `every` with `budget` moves per step.
    ///
    /// # Errors
    /// The OS error if the thread cannot be spawned.
    pub fn start<C, B, M>(
        store: Arc<TensorStore<C, B, M>>,
        every: Duration,
        budget: usize,
    ) -> std::io::Result<Self>
    where
        C: Clock + 'static,
        B: BlockIO + 'static,
        M: MetaLog + 'static,
    {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let totals = Arc::new(Mutex::new(MaintainerTotals::default()));
        let (s2, t2) = (Arc::clone(&stop), Arc::clone(&totals));
        let handle = std::thread::Builder::new()
            .name("tensorvault-maintain".into())
            .spawn(move || loop {
                let (lock, cv) = &*s2;
                let Ok(guard) = lock.lock() else { return };
                let Ok((guard, _)) = cv.wait_timeout_while(guard, every, |stopped| !*stopped)
                else {
                    return;
                };
                if *guard {
                    return;
                }
                drop(guard);
                let r: Result<MaintainReport, _> = store.maintain(budget);
                if let Ok(mut t) = t2.lock() {
                    t.steps += 1;
                    match r {
                        Ok(rep) => {
                            t.moves += rep.moves.len() as u64;
                            t.held = rep.held.len() as u64;
                        }
                        Err(e) => {
                            t.errors += 1;
                            tracing::warn!(error = %e, "background maintain step failed");
                        }
                    }
                }
            })?;
        Ok(Self {
            stop,
            totals,
            handle: Some(handle),
        })
    }

    /// What the thread has done so far.
    #[must_use]
    pub fn totals(&self) -> MaintainerTotals {
        self.totals.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Signal the thread, wait for the step in progress to finish, join it.
    #[must_use]
    pub fn stop(mut self) -> MaintainerTotals {
        self.shutdown();
        self.totals()
    }

    fn shutdown(&mut self) {
        let (lock, cv) = &*self.stop;
        if let Ok(mut s) = lock.lock() {
            *s = true;
        }
        cv.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Maintainer {
    fn drop(&mut self) {
        self.shutdown();
    }
}
