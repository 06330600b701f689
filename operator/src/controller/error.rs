//! What can go wrong in a pass.

/// What can go wrong in a pass.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// An object changed after this pass read it; the next pass reads it again.
    #[error("{0} changed while the pass ran")]
    Conflict(String),
}

impl Error {
    /// Sorts an API error: a failed precondition (409) is a [`Error::Conflict`] on `what`.
    pub fn from_write(what: impl Into<String>, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(ref status) if status.code == 409 => Self::Conflict(what.into()),
            e => Self::Kube(e),
        }
    }
}
