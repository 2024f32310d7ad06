//! What the end-to-end scenarios speak, over the test bed
//! (`jobrelay-testbed`): a fault scenario's namespace, Job API and closing
//! checks, the steps of a test against the relay the chart installed, and
//! hostile peers of the Relay.

pub mod deployed;
pub mod flood;
pub mod scenario;
