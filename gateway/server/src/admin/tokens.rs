//! The bearer tokens the admin API checks, read from their files.

use std::path::Path;

use anyhow::{Context, bail};

/// The tokens the admin API checks; `None` leaves that side open.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tokens {
    /// Needed by POST, PUT, PATCH and DELETE (`--admin-token-file`); also grants reads.
    pub write: Option<String>,
    /// Needed by reads beyond health and metrics (`--admin-read-token-file`).
    pub read: Option<String>,
}

impl Tokens {
    /// Reads each token file (trimmed; an empty one is refused).
    pub(crate) fn from_files(write: Option<&Path>, read: Option<&Path>) -> anyhow::Result<Self> {
        let load = |path: Option<&Path>, flag: &str| -> anyhow::Result<Option<String>> {
            let Some(path) = path else { return Ok(None) };
            let token = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {flag} {}", path.display()))?
                .trim()
                .to_owned();
            if token.is_empty() {
                bail!("{flag} {} is empty", path.display());
            }
            Ok(Some(token))
        };
        Ok(Self { write: load(write, "--admin-token-file")?, read: load(read, "--admin-read-token-file")? })
    }

    /// Says what anyone who reaches `addr` can do without a token.
    pub(crate) fn warn_if_exposed(&self, addr: std::net::SocketAddr) {
        for warning in self.exposure(addr) {
            tracing::warn!("{warning}");
        }
    }

    /// What anyone who reaches `addr` can do without a token, as warnings.
    fn exposure(&self, addr: std::net::SocketAddr) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.read.is_some() && self.write.is_none() {
            warnings.push(format!(
                "the admin API on {addr} has --admin-read-token-file but no --admin-token-file: reads need a token and changes (config, flows, captures) do not; give both"
            ));
        }
        if addr.ip().is_loopback() {
            return warnings;
        }
        if self.write.is_none() {
            warnings.push(format!(
                "the admin API listens on {addr}, beyond loopback, without --admin-token-file: anyone who reaches it can replace the config and start captures"
            ));
        }
        if self.read.is_none() {
            warnings.push(format!(
                "the admin API listens on {addr}, beyond loopback, without --admin-read-token-file: anyone who reaches it can read the config and download captured packets"
            ));
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_token_without_a_write_token_is_warned_of_even_on_loopback() {
        let tokens = Tokens { write: None, read: Some("r".into()) };
        let warnings = tokens.exposure("127.0.0.1:8080".parse().unwrap());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("changes (config, flows, captures) do not"), "{warnings:?}");
        let both = Tokens { write: Some("w".into()), read: Some("r".into()) };
        assert!(both.exposure("0.0.0.0:8080".parse().unwrap()).is_empty());
        assert_eq!(Tokens::default().exposure("0.0.0.0:8080".parse().unwrap()).len(), 2);
    }
}
