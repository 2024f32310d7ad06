//! jobrelay manager: runs in the manager cluster, watches Jobs managed by
//! `jobrelay.dev/manager` and the `WorkerCluster`s, serves the `Relay` gRPC
//! service that worker agents dial, and writes mirror status back.

pub mod cli;
