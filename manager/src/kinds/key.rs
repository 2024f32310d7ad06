//! The key of a relayed object of any kind: what the fleet keeps for each
//! mirror and what its triggers carry, so one fleet serves every kind's
//! controller.

use std::fmt;

use jobrelay_proto::kinds::KindName;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::RelayedKind;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub kind: KindName,
    pub namespace: String,
    pub name: String,
}

impl Key {
    /// The key of a `K` of that reference.
    pub fn of<K: RelayedKind>(reference: &ObjectRef<K>) -> Key {
        Key {
            kind: K::NAME,
            namespace: reference.namespace.clone().unwrap_or_default(),
            name: reference.name.clone(),
        }
    }

    /// The key of `object`.
    pub fn from_obj<K: RelayedKind>(object: &K) -> Key {
        Key {
            kind: K::NAME,
            namespace: object.namespace().unwrap_or_default(),
            name: object.name_any(),
        }
    }

    /// The reference of a `K`, if this is the key of one.
    pub fn typed<K: RelayedKind>(&self) -> Option<ObjectRef<K>> {
        (self.kind == K::NAME).then(|| ObjectRef::new(&self.name).within(&self.namespace))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.kind, self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobrelay_kinds::jobset::JobSet;
    use k8s_openapi::api::batch::v1::Job;

    #[test]
    fn a_key_is_typed_back_only_as_its_own_kind() {
        let job = Key::of(&ObjectRef::<Job>::new("train").within("ml"));
        assert_eq!(job.to_string(), "Job ml/train");
        assert_eq!(
            job.typed::<Job>(),
            Some(ObjectRef::new("train").within("ml"))
        );
        assert_eq!(job.typed::<JobSet>(), None);
        let jobset = Key::of(&ObjectRef::<JobSet>::new("train").within("ml"));
        assert_ne!(job, jobset, "same name, another kind");
    }
}
