//! The plugin's reads of the manager cluster, thin: each lists or gets
//! what one subcommand shows and hands plain objects to `view`.

pub mod clusters;
pub mod connect;
pub mod events;
pub mod jobs;
pub mod kueue;
pub mod logs;
