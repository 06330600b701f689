//! The daqiri-operator: `DaqiriPort` / `DaqiriFlow` custom resources rendered
//! into each node's DAQIRI config, which the node's gateway runs.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod controller;
pub mod crd;
pub mod crdgen;
pub mod gateway;
pub mod leader;
pub mod node_config;
pub mod render;
pub mod uninstall;
