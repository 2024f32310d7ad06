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
    let objects = render("jobrelay-system", &values).await.objects;
    object(&objects, "Deployment", "jobrelay-manager")
}

async fn agent_with(more: &[&str]) -> Deployment {
    let values = [AGENT_VALUES, more].concat();
    let objects = render("jobrelay-system", &values).await.objects;
    object(&objects, "Deployment", "jobrelay-agent")
}

/// One side's CA bundle: its container, the variable naming the file it
/// reads, and the folder a bundle of its own is mounted at.
struct Side {
    container: &'static str,
    variable: &'static str,
    dir: &'static str,
}

const MANAGER: Side = Side {
    container: "manager",
    variable: "JOBRELAY_CLIENT_CA",
    dir: CLIENT_CA_DIR,
};
const AGENT: Side = Side {
    container: "agent",
    variable: "JOBRELAY_MANAGER_CA",
    dir: MANAGER_CA_DIR,
};

/// The file `side` reads its bundle from, and where a volume of the
/// bundle's own comes from (`secret` or `configMap`, and its name), if one
/// is mounted; a mount is read-only and a folder.
fn trusted(deployment: &Deployment, side: &Side) -> (String, Option<(&'static str, String)>) {
    let container = container(deployment, side.container);
    let file = env(container, side.variable).to_string();
    let Some(mount) = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == side.dir)
    else {
        return (file, None);
    };
    assert_eq!(mount.read_only, Some(true), "mounted read-only");
    assert!(mount.sub_path.is_none(), "mounted as a folder");
    let volume = pod_spec(deployment)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .cloned()
        .expect("the mount's volume");
    let source = match (volume.secret, volume.config_map) {
        (Some(secret), _) => ("secret", secret.secret_name.unwrap_or_default()),
        (_, Some(config_map)) => ("configMap", config_map.name),
        other => panic!("a bundle from neither a Secret nor a ConfigMap: {other:?}"),
    };
    (file, Some(source))
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
        trusted(&serving, &MANAGER),
        (format!("{TLS_DIR}/ca.crt"), None)
    );

    // MANAGER_VALUES name a Secret of its own.
    let from_secret = manager_with(&[]).await;
    assert_eq!(
        trusted(&from_secret, &MANAGER),
        (
            format!("{CLIENT_CA_DIR}/ca.crt"),
            Some(("secret", "agents-ca".into()))
        )
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
        trusted(&from_config_map, &MANAGER),
        (
            format!("{CLIENT_CA_DIR}/bundle.pem"),
            Some(("configMap", "agents-ca".into()))
        )
    );
}

#[tokio::test]
async fn the_agent_trusts_its_tls_secrets_ca_or_a_bundle_of_the_managers_ca_of_its_own() {
    let default = agent_with(&[]).await;
    assert_eq!(
        trusted(&default, &AGENT),
        (format!("{TLS_DIR}/ca.crt"), None)
    );

    let from_config_map = agent_with(&["--set", "agent.managerCA.configMapName=jobrelay-ca"]).await;
    assert_eq!(
        trusted(&from_config_map, &AGENT),
        (
            format!("{MANAGER_CA_DIR}/ca.crt"),
            Some(("configMap", "jobrelay-ca".into()))
        )
    );

    let from_secret = agent_with(&[
        "--set",
        "agent.managerCA.secretName=manager-ca",
        "--set",
        "agent.managerCA.key=bundle.pem",
    ])
    .await;
    assert_eq!(
        trusted(&from_secret, &AGENT),
        (
            format!("{MANAGER_CA_DIR}/bundle.pem"),
            Some(("secret", "manager-ca".into()))
        )
    );
}
