//! The name every write of the manager is recorded under in an object's
//! `managedFields`, so what jobrelay owns on a Job, a Workload, a Lease or a
//! WorkerCluster can be told apart from what users and Kueue own.

use kube::api::{PatchParams, PostParams};

/// Field manager of everything the manager writes.
pub const FIELD_MANAGER: &str = "jobrelay-manager";

/// A merge or JSON patch recorded under [`FIELD_MANAGER`].
pub fn patch() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    }
}

/// A server-side apply under [`FIELD_MANAGER`] that takes over fields
/// another manager set.
pub fn apply() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// A create or replace recorded under [`FIELD_MANAGER`].
pub fn post() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_kind_of_write_names_the_manager() {
        assert_eq!(
            super::patch().field_manager.as_deref(),
            Some("jobrelay-manager")
        );
        assert_eq!(
            super::apply().field_manager.as_deref(),
            Some("jobrelay-manager")
        );
        assert!(super::apply().force);
        assert_eq!(
            super::post().field_manager.as_deref(),
            Some("jobrelay-manager")
        );
    }
}
