//! What the test bed takes from this host: loopback ports for its servers,
//! and child processes that never outlive the process that started them.

pub mod ports;
pub mod processes;
