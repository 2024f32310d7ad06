//! What the chart's objects must hold, asserted on rendered objects: probes,
//! mounted certificates, the configuration file, the restricted Pod
//! Security profile, and the grants of a role.

use super::*;

pub(super) fn pod_spec(deployment: &Deployment) -> &PodSpec {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod spec")
}

pub(super) fn container<'a>(deployment: &'a Deployment, name_: &str) -> &'a Container {
    pod_spec(deployment)
        .containers
        .iter()
        .find(|c| c.name == name_)
        .unwrap_or_else(|| panic!("container {name_}"))
}

pub(super) fn env<'a>(container: &'a Container, name_: &str) -> &'a str {
    container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == name_)
        .and_then(|e| e.value.as_deref())
        .unwrap_or_else(|| panic!("env {name_} on container {}", container.name))
}

/// Liveness asks the health port's overall service, readiness asks
/// `jobrelay.v1.Relay`, both over gRPC.
pub(super) fn assert_grpc_probes(container: &Container) {
    let liveness = container
        .liveness_probe
        .as_ref()
        .and_then(|p| p.grpc.as_ref())
        .unwrap_or_else(|| panic!("{}: a grpc liveness probe", container.name));
    assert_eq!(
        liveness.port, HEALTH_PORT,
        "{}: liveness port",
        container.name
    );
    assert_eq!(
        liveness.service.as_deref().unwrap_or(""),
        "",
        "{}: liveness asks the process, not the Relay",
        container.name
    );
    let readiness = container
        .readiness_probe
        .as_ref()
        .and_then(|p| p.grpc.as_ref())
        .unwrap_or_else(|| panic!("{}: a grpc readiness probe", container.name));
    assert_eq!(
        readiness.port, HEALTH_PORT,
        "{}: readiness port",
        container.name
    );
    assert_eq!(
        readiness.service.as_deref(),
        Some(READY_SERVICE),
        "{}: readiness service",
        container.name
    );
    let health = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.container_port == HEALTH_PORT)
        .unwrap_or_else(|| panic!("{}: the health port is declared", container.name));
    assert_eq!(health.name.as_deref(), Some("health"));
    assert_eq!(
        env(container, "JOBRELAY_HEALTH_LISTEN"),
        format!("$(POD_IP):{HEALTH_PORT}"),
        "by default every port listens on the Pod's IP only"
    );
}

/// The Secret named `secret` is mounted read-only at the TLS folder, and the
/// certificate flags (`ca_env` for the CA, where it is read from there)
/// point into it.
pub(super) fn assert_tls_mounted(
    deployment: &Deployment,
    container: &Container,
    secret: &str,
    ca_env: Option<&str>,
) {
    let volume = pod_spec(deployment)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some(secret))
        .unwrap_or_else(|| panic!("a volume of Secret {secret}"));
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == volume.name)
        .unwrap_or_else(|| panic!("{}: Secret {secret} mounted", container.name));
    assert_eq!(mount.mount_path, TLS_DIR);
    assert_eq!(mount.read_only, Some(true), "TLS mounted read-only");
    assert!(
        mount.sub_path.is_none(),
        "a subPath mount would never see a rotated Secret"
    );
    let ca = ca_env.map(|variable| (variable, "ca.crt"));
    for (variable, key) in [
        ("JOBRELAY_TLS_CERT", "tls.crt"),
        ("JOBRELAY_TLS_KEY", "tls.key"),
    ]
    .into_iter()
    .chain(ca)
    {
        assert_eq!(env(container, variable), format!("{TLS_DIR}/{key}"));
    }
}

/// The configuration file is the ConfigMap rendered from values, mounted
/// where `JOBRELAY_CONFIG` points.
pub(super) fn assert_config_file(
    objects: &[Value],
    deployment: &Deployment,
    container: &Container,
    expected: Value,
) {
    let path = env(container, "JOBRELAY_CONFIG");
    let (dir, file) = path.rsplit_once('/').expect("a file path");
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == dir)
        .unwrap_or_else(|| panic!("{}: a volume mounted at {dir}", container.name));
    let config_map = pod_spec(deployment)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .and_then(|v| v.config_map.as_ref())
        .map(|c| c.name.clone())
        .unwrap_or_else(|| panic!("{}: {dir} is a ConfigMap", container.name));
    let config_map: ConfigMap = object(objects, "ConfigMap", &config_map);
    let text = config_map
        .data
        .as_ref()
        .and_then(|d| d.get(file))
        .unwrap_or_else(|| panic!("ConfigMap key {file}"));
    let parsed: Value = serde_yaml_ng::from_str(text).expect("the config file is YAML");
    assert_eq!(parsed, expected, "config file:\n{text}");
}

/// Runs as non-root on a read-only root file system with no capabilities
/// and the runtime's seccomp profile.
pub(super) fn assert_restricted(deployment: &Deployment, container: &Container) {
    let pod = pod_spec(deployment)
        .security_context
        .as_ref()
        .expect("pod securityContext");
    assert_eq!(pod.run_as_non_root, Some(true));
    let context = container
        .security_context
        .as_ref()
        .expect("container securityContext");
    assert_eq!(context.run_as_non_root, Some(true));
    assert_eq!(context.read_only_root_filesystem, Some(true));
    assert_eq!(context.allow_privilege_escalation, Some(false));
    assert_eq!(
        context
            .capabilities
            .as_ref()
            .and_then(|c| c.drop.as_deref()),
        Some(&["ALL".to_string()][..])
    );
    assert_eq!(
        context.seccomp_profile.as_ref().map(|p| p.type_.as_str()),
        Some("RuntimeDefault")
    );
}

/// (group, resource) pairs a ClusterRole grants, with a check that no rule
/// uses a wildcard.
pub(super) fn grants(role: &ClusterRole) -> BTreeSet<(String, String)> {
    let mut grants = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        assert!(
            !rule.verbs.iter().any(|v| v == "*"),
            "no wildcard verbs: {rule:?}"
        );
        for group in rule.api_groups.iter().flatten() {
            assert_ne!(group, "*", "no wildcard API groups: {rule:?}");
            for resource in rule.resources.iter().flatten() {
                assert_ne!(resource, "*", "no wildcard resources: {rule:?}");
                grants.insert((group.clone(), resource.clone()));
            }
        }
    }
    grants
}
