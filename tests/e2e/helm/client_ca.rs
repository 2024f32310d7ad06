//! The manager's client CA bundle: a Secret's or ConfigMap's key of its
//! own (`manager.clientCA`, required), mounted as a folder of its own so a
//! rotated bundle is picked up; or, said outright, the serving Secret's
//! `ca.crt`.

use k8s_openapi::api::apps::v1::Deployment;

use super::{MANAGER_VALUES, TLS_DIR, container, env, object, pod_spec, render};

const CLIENT_CA_DIR: &str = "/etc/jobrelay/client-ca";

async fn manager_with(more: &[&str]) -> Deployment {
    let values = [MANAGER_VALUES, more].concat();
    let objects = render("jobrelay-system", &values, false).await.objects;
    object(&objects, "Deployment", "jobrelay-manager")
}

/// The volume mounted at the client CA folder, if any.
fn client_ca_volume(deployment: &Deployment) -> Option<k8s_openapi::api::core::v1::Volume> {
    let mount = container(deployment, "manager")
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == CLIENT_CA_DIR)?;
    assert_eq!(mount.read_only, Some(true), "mounted read-only");
    assert!(mount.sub_path.is_none(), "mounted as a folder");
    pod_spec(deployment)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .cloned()
}

#[tokio::test]
async fn the_client_ca_is_a_bundle_of_its_own_or_said_outright_the_serving_secrets() {
    let serving = manager_with(&[
        "--set",
        "manager.clientCA.secretName=",
        "--set",
        "manager.clientCA.fromTLSSecret=true",
    ])
    .await;
    assert_eq!(
        env(container(&serving, "manager"), "JOBRELAY_CLIENT_CA"),
        format!("{TLS_DIR}/ca.crt")
    );
    assert!(client_ca_volume(&serving).is_none());

    // MANAGER_VALUES name a Secret of its own.
    let from_secret = manager_with(&[]).await;
    assert_eq!(
        env(container(&from_secret, "manager"), "JOBRELAY_CLIENT_CA"),
        format!("{CLIENT_CA_DIR}/ca.crt")
    );
    let volume = client_ca_volume(&from_secret).expect("the bundle's volume");
    assert_eq!(
        volume.secret.and_then(|s| s.secret_name).as_deref(),
        Some("agents-ca")
    );

    let from_config_map = manager_with(&[
        "--set",
        "manager.clientCA.secretName=",
        "--set",
        "manager.clientCA.configMapName=agents-ca",
        "--set",
        "manager.clientCA.key=bundle.pem",
    ])
    .await;
    assert_eq!(
        env(container(&from_config_map, "manager"), "JOBRELAY_CLIENT_CA"),
        format!("{CLIENT_CA_DIR}/bundle.pem")
    );
    let volume = client_ca_volume(&from_config_map).expect("the bundle's volume");
    assert_eq!(
        volume.config_map.map(|c| c.name).as_deref(),
        Some("agents-ca")
    );
}
