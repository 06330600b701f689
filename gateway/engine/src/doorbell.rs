//! A queue's doorbell: an eventfd the application rings when it queues a
//! TX burst, so an idle worker can sleep in `poll(2)` beside its sockets
//! instead of waking every 50 µs to look at the ring.
//!
//! Ringing costs a fence and a load per burst; the `write(2)` happens only
//! while the worker is armed (about to sleep), at most once per sleep.

// Wraps eventfd(2), read(2), write(2).
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering, fence};

/// One queue's eventfd and whether its worker waits on it.
#[derive(Debug)]
pub(crate) struct Doorbell {
    fd: OwnedFd,
    armed: AtomicBool,
}

impl Doorbell {
    /// A new doorbell; `None` where the kernel gives no eventfd (the worker
    /// then keeps polling).
    pub(crate) fn new() -> Option<Self> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor we own.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        // SAFETY: `fd` is a fresh descriptor owned by nobody else.
        (fd >= 0).then(|| Self { fd: unsafe { OwnedFd::from_raw_fd(fd) }, armed: AtomicBool::new(false) })
    }

    /// The worker is about to sleep: the next ring writes the eventfd. The
    /// worker must look at the ring once more after this, then sleep on
    /// [`fd`](Self::fd).
    pub(crate) fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
        // Pairs with the fence in `Queue::ring_doorbell`: either the worker's next look sees
        // the burst, or the producer sees the doorbell armed.
        fence(Ordering::SeqCst);
    }

    /// Called after a burst went into the queue's ring, and a SeqCst fence
    /// (see `Queue::ring_doorbell`).
    pub(crate) fn ring(&self) {
        if self.armed.load(Ordering::SeqCst) && self.armed.swap(false, Ordering::SeqCst) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live buffer to our eventfd; a full
            // counter (EAGAIN) still leaves it readable, which is all we need.
            unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        }
    }

    /// Resets a doorbell's eventfd `fd` after a worker woke on it.
    pub(crate) fn clear_fd(fd: RawFd) {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live buffer from a
        // non-blocking eventfd; EAGAIN (not rung) is fine.
        unsafe { libc::read(fd, count.as_mut_ptr().cast(), count.len()) };
    }

    /// The descriptor the worker sleeps on (readable once rung).
    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
