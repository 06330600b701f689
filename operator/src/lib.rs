//! The daqiri-operator: `DaqiriPort` / `DaqiriFlow` custom resources rendered
//! into each node's DAQIRI config, which the node's gateway runs.

pub mod crd;
pub mod crdgen;
pub mod render;
