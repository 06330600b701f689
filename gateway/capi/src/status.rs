//! Status codes as C sees them, and the message behind the last failure.
//!
//! Every call that fails returns a DAQIRI status and leaves a message that
//! names the argument or call at fault, for `daqiri_gw_last_error()` on the
//! same thread. Misuse (a freed or foreign burst, a wrong index) is also
//! logged, since DAQIRI's programs print only the status.

use std::cell::RefCell;
use std::ffi::{CString, c_char};

use daqiri::{Error, Status};

/// `DAQIRI_GW_SUCCESS`; the failures follow in DAQIRI's order (c_api.h).
pub(crate) const SUCCESS: i32 = 0;

/// The C value of a status (c_api.h's `daqiri_gw_status`).
pub(crate) const fn code(status: Status) -> i32 {
    match status {
        Status::NullPtr => 1,
        Status::NoFreeBurstBuffers => 2,
        Status::NoFreePacketBuffers => 3,
        Status::NotReady => 4,
        Status::InvalidParameter => 5,
        Status::NoSpaceAvailable => 6,
        Status::NotSupported => 7,
        Status::GenericFailure => 8,
        Status::ConnectFailure => 9,
        Status::InternalError => 10,
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `error` as this thread's last and returns its code. Statuses a
/// working program meets in its polling loop (nothing ready, a full ring,
/// no free buffer) are not logged; the rest are, at warn level.
pub(crate) fn fail(call: &str, error: Error) -> i32 {
    let quiet = matches!(
        error.status,
        Status::NotReady
            | Status::NullPtr
            | Status::NoSpaceAvailable
            | Status::NoFreeBurstBuffers
            | Status::NoFreePacketBuffers
    );
    report(call, error, !quiet)
}

/// As [`fail`], and logged whatever the status: for calls no loop polls
/// (starting the engine), where a shortage (of hugepages, of buffers) is the
/// reason a program stops, not a moment to wait through.
pub(crate) fn fail_loudly(call: &str, error: Error) -> i32 {
    report(call, error, true)
}

fn report(call: &str, error: Error, log: bool) -> i32 {
    if log {
        crate::logging::install();
        tracing::warn!("{call}: {} ({})", error.detail(), error.status);
    }
    remember(&format!("{call}: {}", error.detail()));
    code(error.status)
}

/// The C value of a result, recording a failure.
pub(crate) fn status_of(call: &str, result: daqiri::Result<()>) -> i32 {
    match result {
        Ok(()) => SUCCESS,
        Err(e) => fail(call, e),
    }
}

fn remember(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = text);
}

/// The message of this thread's last failed call ("" when none failed);
/// valid until this thread's next failing call.
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_last_error() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}

/// Records a failure the C++ headers found themselves (a member they
/// cannot write, a key they cannot read) as this thread's last, logged as
/// the library's own are; returns `status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn daqiri_gw_fail(status: i32, message: *const c_char) -> i32 {
    let message = if message.is_null() {
        std::borrow::Cow::Borrowed("(no message)")
    } else {
        // SAFETY: a non-null C string argument, NUL-terminated by the C contract.
        unsafe { std::ffi::CStr::from_ptr(message) }.to_string_lossy()
    };
    let status = match status {
        1 => Status::NullPtr,
        5 => Status::InvalidParameter,
        7 => Status::NotSupported,
        _ => Status::GenericFailure,
    };
    let (call, detail) = message.split_once(": ").unwrap_or(("daqiri", &message));
    fail(call, Error::new(status, detail))
}

/// DAQIRI's name of a status code ("SUCCESS", "NOT_READY", ...).
#[unsafe(no_mangle)]
pub extern "C" fn daqiri_gw_status_name(status: i32) -> *const c_char {
    let name: &'static std::ffi::CStr = match status {
        SUCCESS => c"SUCCESS",
        1 => c"NULL_PTR",
        2 => c"NO_FREE_BURST_BUFFERS",
        3 => c"NO_FREE_PACKET_BUFFERS",
        4 => c"NOT_READY",
        5 => c"INVALID_PARAMETER",
        6 => c"NO_SPACE_AVAILABLE",
        7 => c"NOT_SUPPORTED",
        8 => c"GENERIC_FAILURE",
        9 => c"CONNECT_FAILURE",
        10 => c"INTERNAL_ERROR",
        _ => c"UNKNOWN_STATUS",
    };
    name.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_its_daqiri_name() {
        for status in [
            Status::NullPtr,
            Status::NoFreeBurstBuffers,
            Status::NoFreePacketBuffers,
            Status::NotReady,
            Status::InvalidParameter,
            Status::NoSpaceAvailable,
            Status::NotSupported,
            Status::GenericFailure,
            Status::ConnectFailure,
            Status::InternalError,
        ] {
            // SAFETY: status_name returns a static C string.
            let name = unsafe { std::ffi::CStr::from_ptr(daqiri_gw_status_name(code(status))) };
            assert_eq!(name.to_str().unwrap(), status.as_str());
        }
    }

    #[test]
    fn the_last_error_is_per_thread_and_names_the_call() {
        fail("get_rx_burst", Error::invalid("port 9 does not exist"));
        // SAFETY: last_error returns this thread's live C string.
        let here = unsafe { std::ffi::CStr::from_ptr(daqiri_gw_last_error()) }.to_str().unwrap().to_owned();
        assert!(here.starts_with("get_rx_burst: port 9"), "{here}");
        let there = std::thread::spawn(|| {
            // SAFETY: as above, on that thread.
            unsafe { std::ffi::CStr::from_ptr(daqiri_gw_last_error()) }.to_str().unwrap().to_owned()
        });
        assert_eq!(there.join().unwrap(), "");
    }
}
