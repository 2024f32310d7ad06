//! The CA bundles each side trusts for the other: the manager's client CA
//! (`manager.clientCA`, required) and the agent's bundle of the manager's
//! CA (`agent.managerCA`), each a Secret's or ConfigMap's key of its own,
//! mounted as a folder of its own so a rotated bundle is picked up; or the
//! `ca.crt` of the side's TLS Secret (the manager's only when said
//! outright).

use k8s_openapi::api::apps::v1::Deployment;

use super::{AGENT_VALUES, MANAGER_VALUES, TLS_DIR, container, env, object, pod_spec, render};

const CLIENT_CA_DIR: &str = "/etc/jobrelay/client-ca";
const MANAGER_CA_DIR: &str = "/etc/jobrelay/manager-ca";

async fn manager_with(more: &[&str]) -> Deployment {
    let values = [MANAGER_VALUES, more].concat();
    let objects = render("jobrelay-system", &values, false).await.objects;
    object(&objects, "Deployment", "jobrelay-manager")
}

async fn agent_with(more: &[&str]) -> Deployment {
    let values = [AGENT_VALUES, more].concat();
    let objects = render("jobrelay-system", &values, false).await.objects;
    object(&objects, "Deployment", "jobrelay-agent")
}

/// The volume mounted at the manager's client CA folder, if any.
fn client_ca_volume(deployment: &Deployment) -> Option<k8s_openapi::api::core::v1::Volume> {
    bundle_volume(deployment, "manager", CLIENT_CA_DIR)
}

/// The volume `name`'s container mounts at `dir`, if any.
fn bundle_volume(
    deployment: &Deployment,
    name: &str,
    dir: &str,
) -> Option<k8s_openapi::api::core::v1::Volume> {
    let mount = container(deployment, name)
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == dir)?;
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

#[tokio::test]
async fn the_agent_trusts_its_tls_secrets_ca_or_a_bundle_of_the_managers_ca_of_its_own() {
    let default = agent_with(&[]).await;
    assert_eq!(
        env(container(&default, "agent"), "JOBRELAY_MANAGER_CA"),
        format!("{TLS_DIR}/ca.crt")
    );
    assert!(bundle_volume(&default, "agent", MANAGER_CA_DIR).is_none());

    let from_config_map = agent_with(&["--set", "agent.managerCA.configMapName=jobrelay-ca"]).await;
    assert_eq!(
        env(container(&from_config_map, "agent"), "JOBRELAY_MANAGER_CA"),
        format!("{MANAGER_CA_DIR}/ca.crt")
    );
    let volume =
        bundle_volume(&from_config_map, "agent", MANAGER_CA_DIR).expect("the bundle's volume");
    assert_eq!(
        volume.config_map.map(|c| c.name).as_deref(),
        Some("jobrelay-ca")
    );

    let from_secret = agent_with(&[
        "--set",
        "agent.managerCA.secretName=manager-ca",
        "--set",
        "agent.managerCA.key=bundle.pem",
    ])
    .await;
    assert_eq!(
        env(container(&from_secret, "agent"), "JOBRELAY_MANAGER_CA"),
        format!("{MANAGER_CA_DIR}/bundle.pem")
    );
    let volume = bundle_volume(&from_secret, "agent", MANAGER_CA_DIR).expect("the bundle's volume");
    assert_eq!(
        volume.secret.and_then(|s| s.secret_name).as_deref(),
        Some("manager-ca")
    );
}
