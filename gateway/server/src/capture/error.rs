//! Why a capture request was refused.

/// Why a capture request was refused.
#[derive(Debug)]
pub(crate) enum CaptureError {
    /// A field is wrong: (field, message).
    Invalid(&'static str, String),
    /// No capture has this id.
    NotFound(u64),
    /// The format exists but this build cannot write it.
    NotImplemented(String),
    /// The capture filesystem is below its free-space floor.
    NoSpace(String),
    /// Files of that name exist already: (field, message).
    Conflict(&'static str, String),
    /// As many captures run as the gateway allows (`--max-captures`).
    TooMany(String),
    /// The S3 store refused a request or did not answer.
    Store(String),
    /// Creating the capture failed.
    Failed(String),
}
