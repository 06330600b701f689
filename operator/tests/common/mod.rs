//! Shared test fixtures.

// Each test binary uses a part of the fake.
#![allow(dead_code)]

pub mod fake_api;
