//! What the test bed takes from this host: Debian packages, loopback ports for its servers,
//! and child processes that never outlive the process that started them.

pub mod debian;
pub mod ports;
pub mod processes;
