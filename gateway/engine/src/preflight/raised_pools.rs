//! The regions whose `num_bufs` the engine raises to fill DPDK rings: the
//! config crate's rule ([`daqiri_config::pools`]), shared by the engine
//! (which applies it) and the checks.

use daqiri_config::ValidConfig;
pub use daqiri_config::pools::RaisedRegion as RaisedPool;

/// The regions of `config` the engine raises, as DAQIRI raises them.
pub fn raised_num_bufs(config: &ValidConfig) -> Vec<RaisedPool> {
    daqiri_config::pools::raised_regions(config.config())
}
