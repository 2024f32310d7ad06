//! What every bench mode measures and reports with: the Jobs it creates and
//! deletes, the watches that time them, the figures drawn from the times,
//! the machine's CPU and memory, the API requests from the audit logs, the
//! manager's histograms, and the table's lines.

pub(crate) mod chart;
pub(crate) mod figures;
pub(crate) mod histogram;
pub(crate) mod jobs;
pub(crate) mod machine;
pub(crate) mod measure;
pub(crate) mod requests;
pub(crate) mod table;
