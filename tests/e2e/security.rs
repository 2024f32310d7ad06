//! Security end to end, on real clusters: what a worker's owner and the
//! manager's operator rely on when a peer is hostile. Each part of the
//! threat model (docs/security.md) has its module; they share one relay and
//! run one at a time.

#[path = "security/foreign_copy.rs"]
mod foreign_copy;
#[path = "security/instance.rs"]
mod instance;
#[path = "security/pinning.rs"]
mod pinning;
#[path = "security/placement_record.rs"]
mod placement_record;
#[path = "security/relay.rs"]
mod relay;
#[path = "security/session_budget.rs"]
mod session_budget;

/// Only one scenario at a time floods, kills or measures.
static EXCLUSIVE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
