//! The DPDK calls the backend makes, with their safety reasoning: EAL once
//! per process, Ethernet ports and their queues, mempools over our regions.
//! This is the backend's only `unsafe` code; nothing above it sees a raw
//! DPDK pointer.

#![allow(unsafe_code)]

mod eal;
mod errors;
mod ethdev;
mod flow;
mod mempool;
mod staging;
mod timestamp;

pub(crate) use eal::{Eal, EalArgs, register_thread};
pub(crate) use ethdev::{EthPort, PortCounters, Received, RxMbufs, RxPools, TxMbufs};
pub(crate) use flow::{InstalledFlow, Traffic};
pub(crate) use mempool::Mempool;
pub(crate) use timestamp::{TimestampField, TimestampSource};
