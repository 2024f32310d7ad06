//! The manager's key for sealing where each Job runs
//! ([`crate::job::record`]): a Secret in the manager's namespace, made by
//! the first replica to lead that finds none, and read by every other. That
//! replica records on it since when records are sealed (annotation
//! `jobrelay.dev/sealing-since`): the records of Jobs created before —
//! placed by an earlier jobrelay, also while one still led during a rolling
//! upgrade — are trusted unsealed. Deleting the Secret makes a new key and
//! starts that anew.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use ring::rand::{SecureRandom, SystemRandom};
use tracing::info;

use crate::error::Error;
use crate::job::record::Sealer;

/// The key's entry in the Secret's `data`.
const ENTRY: &str = "key";
/// The key's length: HMAC-SHA256's block of entropy.
const KEY_BYTES: usize = 32;
/// Annotation on the Secret: since when records are sealed.
const SINCE_ANNOTATION: &str = "jobrelay.dev/sealing-since";
/// Taken off the moment a leader starts sealing, for the API server's clock
/// (which stamps Jobs' creation) running behind this replica's.
const CLOCK_MARGIN: Duration = Duration::from_secs(60);

/// The Secret `namespace/name`.
struct KeySecret<'a> {
    secrets: Api<Secret>,
    namespace: &'a str,
    name: &'a str,
}

impl<'a> KeySecret<'a> {
    fn new(client: &kube::Client, namespace: &'a str, name: &'a str) -> Self {
        KeySecret {
            secrets: Api::namespaced(client.clone(), namespace),
            namespace,
            name,
        }
    }

    fn failed(&self, source: kube::Error) -> Error {
        Error::SealKey {
            secret: format!("{}/{}", self.namespace, self.name),
            source,
        }
    }

    fn invalid(&self) -> Error {
        Error::SealKeyInvalid {
            secret: format!("{}/{}", self.namespace, self.name),
        }
    }
}

/// What the Secret says, read before this replica leads (it writes nothing
/// then): sealing as it says, or not yet where it does not say since when.
pub async fn load(client: &kube::Client, namespace: &str, name: &str) -> Result<Sealer, Error> {
    let secret = KeySecret::new(client, namespace, name);
    let sealer = Sealer::default();
    let found = secret.secrets.get_opt(name).await;
    if let Some(found) = found.map_err(|e| secret.failed(e))? {
        let key = key_of(&found).ok_or_else(|| secret.invalid())?;
        if let Some(since) = since_of(&found) {
            sealer.seal_since(key, since);
        }
    }
    Ok(sealer)
}

/// Once this replica leads: the key made if there is none, and records
/// sealed since the Secret says — or since now, recorded on it.
pub async fn lead(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    sealer: &Sealer,
) -> Result<(), Error> {
    let secret = KeySecret::new(client, namespace, name);
    let found = secret.secrets.get_opt(name).await;
    let found = match found.map_err(|e| secret.failed(e))? {
        Some(found) => found,
        None => match secret
            .secrets
            .create(&PostParams::default(), &new_key(name)?)
            .await
        {
            Ok(created) => created,
            // Made meanwhile, by a replica that led before.
            Err(kube::Error::Api(status)) if status.code == 409 => secret
                .secrets
                .get(name)
                .await
                .map_err(|e| secret.failed(e))?,
            Err(other) => return Err(secret.failed(other)),
        },
    };
    let key = key_of(&found).ok_or_else(|| secret.invalid())?;
    if let Some(since) = since_of(&found) {
        sealer.seal_since(key, since);
        return Ok(());
    }
    let since = Timestamp::now() - CLOCK_MARGIN;
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": found.metadata.resource_version,
        "annotations": {SINCE_ANNOTATION: since.to_string()},
    }});
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let patched = secret.secrets.patch(name, &params, &patch).await;
    patched.map_err(|e| secret.failed(e))?;
    info!(%since, secret = %format!("{namespace}/{name}"), "records of where Jobs run are sealed from now on");
    sealer.seal_since(key, since);
    Ok(())
}

/// A Secret holding a fresh random key.
fn new_key(name: &str) -> Result<Secret, Error> {
    let mut key = vec![0u8; KEY_BYTES];
    SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| Error::NoRandom)?;
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(ENTRY.to_string(), ByteString(key))])),
        type_: Some("Opaque".into()),
        ..Secret::default()
    })
}

/// The Secret's key, if it holds one of the right length.
fn key_of(secret: &Secret) -> Option<&[u8]> {
    let key = secret.data.as_ref()?.get(ENTRY)?;
    (key.0.len() >= KEY_BYTES).then_some(key.0.as_slice())
}

/// Since when the Secret says records are sealed, if it says.
fn since_of(secret: &Secret) -> Option<Timestamp> {
    secret
        .metadata
        .annotations
        .as_ref()?
        .get(SINCE_ANNOTATION)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_key_is_random_and_seals_since_its_secret_says() {
        let (a, b) = (new_key("k").unwrap(), new_key("k").unwrap());
        assert_ne!(a.data, b.data, "two keys differ");
        assert_eq!(since_of(&a), None, "not sealing until a leader says so");
        let mut led = a.clone();
        let at = Timestamp::from_second(1_800_000_000).unwrap();
        led.metadata.annotations = Some(BTreeMap::from([(
            SINCE_ANNOTATION.to_string(),
            at.to_string(),
        )]));
        assert_eq!(since_of(&led), Some(at));
        let sealer = Sealer::new(key_of(&led).unwrap(), at);
        let seal = sealer.seal("uid", "worker-1").unwrap();
        assert_eq!(sealer.open("uid", &seal), Some("worker-1"));
    }

    #[test]
    fn a_secret_without_a_whole_key_is_refused() {
        let mut short = new_key("k").unwrap();
        short.data = Some(BTreeMap::from([(ENTRY.into(), ByteString(vec![1; 8]))]));
        assert!(key_of(&short).is_none());
        assert!(key_of(&Secret::default()).is_none());
    }
}
