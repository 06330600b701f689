//! How an idle worker waits: in one `ppoll(2)` on every descriptor its
//! tasks' work comes from (sockets, TX doorbells) when each task can name
//! them; otherwise by spinning, then sleeping 50 µs at a time.
//!
//! A worker that shares a core between a socket's RX and its TX queue used
//! to sleep in 50 µs steps, a wake-up every step and up to 50 µs of added
//! latency on each burst; DAQIRI's threads block in the kernel instead.

// Wraps ppoll(2).
#![allow(unsafe_code)]

use std::time::Duration;

use crossbeam_utils::Backoff;

use crate::doorbell::Doorbell;

/// Where an idle worker's tasks expect their next work from.
#[derive(Debug, Default)]
pub(crate) struct SleepSet {
    fds: Vec<libc::pollfd>,
    /// How many of `fds`, from the start, are doorbells (cleared on wake).
    doorbells: usize,
}

impl SleepSet {
    /// Starts a new gathering.
    pub(crate) fn clear(&mut self) {
        self.fds.clear();
        self.doorbells = 0;
    }

    /// Work comes when `fd` is readable (`POLLIN`) or writable (`POLLOUT`).
    pub(crate) fn watch(&mut self, fd: std::os::fd::RawFd, events: i16) {
        self.fds.push(libc::pollfd { fd, events, revents: 0 });
    }

    /// Work comes when the application rings `doorbell`; arms it. The worker
    /// must look at the task's ring once more before it sleeps.
    pub(crate) fn doorbell(&mut self, doorbell: &Doorbell) {
        doorbell.arm();
        self.fds.insert(self.doorbells, libc::pollfd { fd: doorbell.fd(), events: libc::POLLIN, revents: 0 });
        self.doorbells += 1;
    }

    /// Sleeps until a descriptor is ready or `limit` passes, then clears
    /// the doorbells that rang.
    pub(crate) fn sleep(&mut self, limit: Duration) {
        // ppoll, not poll: limits are often under a millisecond.
        let limit = libc::timespec { tv_sec: limit.as_secs() as libc::time_t, tv_nsec: limit.subsec_nanos().into() };
        // SAFETY: `fds` is a live array of `fds.len()` pollfds; a live
        // timespec; no signal mask. EINTR only ends the sleep early.
        unsafe {
            libc::ppoll(self.fds.as_mut_ptr(), self.fds.len() as libc::nfds_t, &raw const limit, std::ptr::null())
        };
        for entry in &self.fds[..self.doorbells] {
            if entry.revents & libc::POLLIN != 0 {
                Doorbell::clear_fd(entry.fd);
            }
        }
    }
}

/// Spins briefly, then sleeps, while a worker has nothing to do and
/// nothing to sleep on.
pub(crate) fn idle(backoff: &Backoff) {
    if backoff.is_completed() {
        std::thread::sleep(Duration::from_micros(50));
    } else {
        backoff.snooze();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn a_doorbell_rung_while_armed_ends_the_sleep_and_is_cleared_after() {
        let doorbell = std::sync::Arc::new(Doorbell::new().expect("eventfd"));
        let mut set = SleepSet::default();
        set.doorbell(&doorbell);
        let ringer = std::sync::Arc::clone(&doorbell);
        let ring = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            ringer.ring();
        });
        let start = Instant::now();
        set.sleep(Duration::from_secs(30));
        assert!(start.elapsed() < Duration::from_secs(10), "the ring woke the sleep: {:?}", start.elapsed());
        ring.join().unwrap();
        // Cleared on wake, and disarmed by the ring: a second ring stays silent.
        doorbell.ring();
        let start = Instant::now();
        set.sleep(Duration::from_millis(30));
        assert!(start.elapsed() >= Duration::from_millis(30), "slept the whole limit: {:?}", start.elapsed());
    }

    #[test]
    fn a_socket_with_data_ends_the_sleep() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.send_to(b"x", socket.local_addr().unwrap()).unwrap();
        let mut set = SleepSet::default();
        set.watch(std::os::fd::AsRawFd::as_raw_fd(&socket), libc::POLLIN);
        let start = Instant::now();
        set.sleep(Duration::from_secs(30));
        assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    }
}
