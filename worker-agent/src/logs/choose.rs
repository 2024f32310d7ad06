//! Which Pods and containers a log stream reads: a choice over what the
//! agent's caches show of the mirror and its Pods, as plain data. Each
//! refusal names what the user asked for and what there is instead.

use jobrelay_proto::v1::{LogEnd, LogEndReason, LogOpen};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::ended;

/// The annotation naming a Pod's default container, as kubectl reads it.
pub const DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";
/// Pods one stream reads at once with `all_pods`. Following needs every
/// Pod's read open at once, so following more than this many is refused.
pub const PODS_AT_ONCE: usize = 16;

/// The mirror a stream asks for: where, and as the worker shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    pub cluster: String,
    pub namespace: String,
    pub origin_uid: String,
    /// Its kind and name (`Job`, `train`), while the worker holds it.
    pub found: Option<(String, String)>,
}

impl Mirror {
    /// The manager's object the user knows, for messages: `Job ml/train`.
    fn job(&self) -> String {
        match &self.found {
            Some((kind, name)) => format!("{kind} {}/{name}", self.namespace),
            None => format!(
                "the Job with UID {} in namespace {}",
                self.origin_uid, self.namespace
            ),
        }
    }
}

/// What the choice reads of a Pod (all of it kept by the agent's cache).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodFacts {
    pub name: String,
    pub running: bool,
    pub created: Option<Time>,
    /// Its containers, in the order of its spec.
    pub containers: Vec<String>,
    pub init_containers: Vec<String>,
    /// Its [`DEFAULT_CONTAINER`] annotation.
    pub default_container: Option<String>,
}

impl PodFacts {
    pub fn of(pod: &Pod) -> PodFacts {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        let names = |containers: &[k8s_openapi::api::core::v1::Container]| {
            containers.iter().map(|c| c.name.clone()).collect()
        };
        PodFacts {
            name: meta.name.clone().unwrap_or_default(),
            running: pod
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|phase| phase == "Running"),
            created: meta.creation_timestamp.clone(),
            containers: spec.map(|s| names(&s.containers)).unwrap_or_default(),
            init_containers: spec
                .and_then(|s| s.init_containers.as_deref())
                .map(names)
                .unwrap_or_default(),
            default_container: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CONTAINER))
                .cloned(),
        }
    }
}

/// One read of a stream: a Pod's container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub pod: String,
    pub container: String,
}

/// What `open` reads of `mirror`, whose Pods (in its namespace) are
/// `pods`; else how the stream ends at once.
pub fn targets(open: &LogOpen, mirror: &Mirror, pods: &[PodFacts]) -> Result<Vec<Target>, LogEnd> {
    pods_to_read(open, mirror, pods)?
        .into_iter()
        .map(|pod| {
            let container = container(&open.container, pod)?;
            Ok(Target {
                pod: pod.name.clone(),
                container,
            })
        })
        .collect()
}

/// The Pods `open` reads: the one it names if it is the mirror's, all of
/// them by name, or the first ([`first_pod`]).
pub fn pods_to_read<'a>(
    open: &LogOpen,
    mirror: &Mirror,
    pods: &'a [PodFacts],
) -> Result<Vec<&'a PodFacts>, LogEnd> {
    let invalid = |message: String| Err(ended(LogEndReason::Invalid, message));
    if !open.pod.is_empty() && open.all_pods {
        return invalid(format!(
            "ask for one Pod ({}) or for all Pods of {}, not both",
            open.pod,
            mirror.job()
        ));
    }
    if !open.pod.is_empty() {
        return match pods.iter().find(|p| p.name == open.pod) {
            Some(pod) => Ok(vec![pod]),
            None => invalid(format!(
                "Pod {} is not a Pod of {} on cluster {}",
                open.pod,
                mirror.job(),
                mirror.cluster
            )),
        };
    }
    if pods.is_empty() {
        return Err(no_pods(mirror));
    }
    if !open.all_pods {
        return Ok(first_pod(pods).into_iter().collect());
    }
    if open.follow && pods.len() > PODS_AT_ONCE {
        return invalid(format!(
            "{} has {} Pods on cluster {}: at most {PODS_AT_ONCE} are followed at once; \
             name one Pod, or read without following",
            mirror.job(),
            pods.len(),
            mirror.cluster
        ));
    }
    let mut all: Vec<&PodFacts> = pods.iter().collect();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(all)
}

/// The Pod read when none is named: a Running one first, then the oldest,
/// then by name (a Pod whose creation is unknown counts as the newest).
pub fn first_pod(pods: &[PodFacts]) -> Option<&PodFacts> {
    pods.iter().min_by(|a, b| {
        (!a.running)
            .cmp(&!b.running)
            .then_with(|| match (&a.created, &b.created) {
                (Some(a), Some(b)) => a.cmp(b),
                (a, b) => b.is_some().cmp(&a.is_some()),
            })
            .then_with(|| a.name.cmp(&b.name))
    })
}

/// The container read of `pod`: `asked` if it has it (init containers
/// included), else its [`DEFAULT_CONTAINER`] where that names one of its
/// containers, else its first.
pub fn container(asked: &str, pod: &PodFacts) -> Result<String, LogEnd> {
    let not_found = |message: String| Err(ended(LogEndReason::NotFound, message));
    if !asked.is_empty() {
        let has = |names: &[String]| names.iter().any(|c| c == asked);
        if has(&pod.containers) || has(&pod.init_containers) {
            return Ok(asked.to_string());
        }
        return not_found(format!(
            "container {asked} is not in Pod {}; {}",
            pod.name,
            containers_of(pod)
        ));
    }
    let annotated = pod
        .default_container
        .as_ref()
        .filter(|name| pod.containers.contains(name));
    match annotated.or(pod.containers.first()) {
        Some(name) => Ok(name.clone()),
        None => not_found(format!("Pod {} has no container to read", pod.name)),
    }
}

/// The stream's end where the mirror has no Pod: it may not have started
/// one yet, or the worker may hold no mirror at all.
fn no_pods(mirror: &Mirror) -> LogEnd {
    let message = match &mirror.found {
        Some(_) => format!(
            "the mirror of {} has no Pods on cluster {} yet",
            mirror.job(),
            mirror.cluster
        ),
        None => format!(
            "cluster {} holds no mirror of {}, nor any Pod of it",
            mirror.cluster,
            mirror.job()
        ),
    };
    ended(LogEndReason::NotFound, message)
}

/// A Pod's containers, as a refusal lists them.
fn containers_of(pod: &PodFacts) -> String {
    let mut listed = format!("its containers: {}", pod.containers.join(", "));
    if !pod.init_containers.is_empty() {
        listed.push_str(&format!(
            "; its init containers: {}",
            pod.init_containers.join(", ")
        ));
    }
    listed
}

#[cfg(test)]
#[path = "choose_tests.rs"]
mod tests;
