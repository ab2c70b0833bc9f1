//! SIGINT and SIGTERM: blocked in every thread and taken by one watcher thread with
//! `sigwait`. By default the watcher removes the temporary files of unfinished outputs
//! (an interrupted `cvc load` used to leave a hidden temp file of up to the output's
//! size) and exits with 128 + the signal number, as a shell reports it. A command that
//! must finish its step and close its store first (`store maintain --watch`) calls
//! [`stop_gracefully`]: the first signal then only raises a stop request the command
//! polls; a second one exits at once as before.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Whether the first signal only requests a stop.
static GRACEFUL: AtomicBool = AtomicBool::new(false);
/// The stop request, and the condition [`sleep_unless_stopped`] waits on.
static STOP: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

/// Start the watcher. Must run before any other thread starts (threads inherit the
/// blocked mask).
#[cfg(unix)]
pub fn watch_termination_signals() {
    // SAFETY: plain libc calls on a stack-local signal set; the mask is changed before
    // any other thread exists.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        std::thread::spawn(move || loop {
            let mut sig: libc::c_int = 0;
            // SAFETY: waits on the set built above, owned by this closure.
            if libc::sigwait(&set, &mut sig) != 0 {
                return;
            }
            if GRACEFUL.load(Ordering::SeqCst) && request_stop() {
                continue;
            }
            tensorvault_core::atomic::remove_live_temps();
            std::process::exit(128 + sig);
        });
    }
}

/// A reader that went away (`tensorvault ... | head`) makes Rust's `print!` panic with
/// "failed printing to stdout: Broken pipe". Treat that as the end of the output, the way
/// `cat` does: remove the temporary files of unfinished outputs and exit with 141
/// (128 + SIGPIPE) without a panic message. Every other panic keeps the default report.
pub fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to std") && msg.contains("Broken pipe") {
            tensorvault_core::atomic::remove_live_temps();
            std::process::exit(141);
        }
        default(info);
    }));
}

/// Without unix signals there is nothing to watch: commands run until killed.
#[cfg(not(unix))]
pub fn watch_termination_signals() {}

/// Raise the stop request; false if it was raised already.
fn request_stop() -> bool {
    let (lock, cvar) = &STOP;
    let mut stop = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let first = !*stop;
    *stop = true;
    cvar.notify_all();
    first
}

/// From now on, the first SIGINT or SIGTERM only requests a stop ([`stop_requested`]).
pub fn stop_gracefully() {
    GRACEFUL.store(true, Ordering::SeqCst);
}

/// Whether a stop was requested.
pub fn stop_requested() -> bool {
    *STOP.0.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sleep for `d` or until a stop is requested; returns whether one was.
pub fn sleep_unless_stopped(d: Duration) -> bool {
    let deadline = Instant::now() + d;
    let (lock, cvar) = &STOP;
    let mut stop = lock.lock().unwrap_or_else(PoisonError::into_inner);
    while !*stop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        stop = cvar
            .wait_timeout(stop, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    *stop
}
