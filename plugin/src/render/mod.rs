//! The plugin's output, pure: tables in kubectl's style, `describe` text,
//! and the same data as JSON or YAML.

pub mod clusters;
pub mod describe;
pub mod status;
pub mod structured;
pub mod table;
