//! In-process harnesses for the fuzz targets in `fuzz/targets/`: the admin
//! API's router ([`AdminHarness`]) and the consumer socket's server end
//! ([`ConsumerHarness`]), each over a software-loopback engine, without
//! network sockets; and a log of the targets' panics ([`log_panics`]).
//! Not a stable interface.

mod admin;
mod consumers;
mod panic_log;

pub use admin::{AdminHarness, Answer, CONFIG, READ_TOKEN, WRITE_TOKEN};
pub use consumers::{ConsumerHarness, Outcome};
pub use panic_log::{PANIC_LOG, log_panics};
