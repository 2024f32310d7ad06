//! The requests each client made of each cluster's API server during a
//! step, counted from the API servers' own audit logs — not from jobrelay's
//! account of itself: by cluster, client (the program its user agent
//! names), verb and resource.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::cluster::audit::audit_log;
use serde::Serialize;
use serde_json::Value;

/// Where each cluster's audit log stood at one moment.
pub struct Mark(Vec<(String, PathBuf, u64)>);

impl Mark {
    pub fn take(set: &ClusterSet) -> Mark {
        Mark(
            set.clusters
                .iter()
                .map(|cluster| {
                    let log = audit_log(cluster);
                    let at = std::fs::metadata(&log).map_or(0, |m| m.len());
                    (cluster.name.clone(), log, at)
                })
                .collect(),
        )
    }

    /// The requests answered since this mark, per Job of `jobs`.
    pub fn since(&self, jobs: usize) -> Vec<Count> {
        let mut counts = Vec::new();
        for (cluster, log, at) in &self.0 {
            let mut text = String::new();
            if let Ok(mut file) = std::fs::File::open(log)
                && file.seek(SeekFrom::Start(*at)).is_ok()
            {
                let _ = file.read_to_string(&mut text);
            }
            for ((client, verb, resource), requests) in tally(&text) {
                counts.push(Count {
                    cluster: cluster.clone(),
                    client,
                    verb,
                    resource,
                    requests,
                    per_job: requests as f64 / jobs.max(1) as f64,
                });
            }
        }
        counts
    }
}

/// One kind of request on one cluster during a step.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Count {
    pub cluster: String,
    pub client: String,
    pub verb: String,
    pub resource: String,
    pub requests: u64,
    pub per_job: f64,
}

/// Requests by client, verb and resource in audit-log lines (one JSON event
/// each; a line cut short by the writer is left out).
fn tally(lines: &str) -> BTreeMap<(String, String, String), u64> {
    let mut counts = BTreeMap::new();
    for event in lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let client = client_of(event["userAgent"].as_str().unwrap_or_default());
        let verb = event["verb"].as_str().unwrap_or_default().to_string();
        *counts
            .entry((client, verb, resource_of(&event)))
            .or_insert(0) += 1;
    }
    counts
}

/// The program a user agent names (`kueue/v0.19.2 (linux/amd64) abcd012`
/// → `kueue`); the bench's own client sends none.
fn client_of(user_agent: &str) -> String {
    match user_agent.split('/').next().unwrap_or_default() {
        "" => "bench client".into(),
        program => program.to_string(),
    }
}

/// `resource` or `resource/subresource` of the event's object, or the path
/// of a request for no object (`/healthz`).
fn resource_of(event: &Value) -> String {
    let object = &event["objectRef"];
    match (object["resource"].as_str(), object["subresource"].as_str()) {
        (Some(resource), Some(sub)) => format!("{resource}/{sub}"),
        (Some(resource), None) => resource.to_string(),
        _ => {
            let uri = event["requestURI"].as_str().unwrap_or_default();
            uri.split('?').next().unwrap_or_default().to_string()
        }
    }
}

/// The verbs that change something.
const WRITES: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// Requests per Job on each cluster, all and writes alone:
/// `manager 12.30 (writes 8.10), …`.
pub fn totals(counts: &[Count]) -> String {
    let mut by_cluster: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for c in counts {
        let (all, writes) = by_cluster.entry(&c.cluster).or_default();
        *all += c.per_job;
        if WRITES.contains(&c.verb.as_str()) {
            *writes += c.per_job;
        }
    }
    let each: Vec<String> = by_cluster
        .into_iter()
        .map(|(cluster, (all, writes))| format!("{cluster} {all:.2} (writes {writes:.2})"))
        .collect();
    each.join(", ")
}

/// Lines of `counts` for a client whose program name starts with `client`,
/// at least `least` per Job: `cluster: verb resource per-Job, …`.
pub fn describe(counts: &[Count], client: &str, least: f64) -> Vec<String> {
    let mut by_cluster: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for c in counts
        .iter()
        .filter(|c| c.client.starts_with(client) && c.per_job >= least)
    {
        by_cluster
            .entry(&c.cluster)
            .or_default()
            .push(format!("{} {} {:.2}", c.verb, c.resource, c.per_job));
    }
    by_cluster
        .into_iter()
        .map(|(cluster, each)| format!("{cluster}: {}", each.join(", ")))
        .collect()
}

/// Prints the requests per Job of a step: every client's on each cluster,
/// then jobrelay's by verb and resource.
pub fn print(counts: &[Count]) {
    println!("  requests per Job: {}", totals(counts));
    for line in describe(counts, "jobrelay", 0.05) {
        println!("  jobrelay's, per Job: {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_told_apart_by_program_verb_and_resource() {
        let log = [
            r#"{"verb":"patch","userAgent":"jobrelay-manager/0.1.0 (manager-0)","objectRef":{"resource":"jobs","subresource":"status"}}"#,
            r#"{"verb":"patch","userAgent":"jobrelay-manager/0.1.0 (manager-1)","objectRef":{"resource":"jobs","subresource":"status"}}"#,
            r#"{"verb":"create","userAgent":"","objectRef":{"resource":"jobs"}}"#,
            r#"{"verb":"get","userAgent":"kube-probe/1.34","requestURI":"/readyz?verbose"}"#,
            r#"{"verb":"patch","userAgent":"kueue/v0.19.2 (linux/am"#,
        ]
        .join("\n");
        let counts = tally(&log);
        let key = |c: &str, v: &str, r: &str| (c.to_string(), v.to_string(), r.to_string());
        assert_eq!(
            counts.get(&key("jobrelay-manager", "patch", "jobs/status")),
            Some(&2)
        );
        assert_eq!(counts.get(&key("bench client", "create", "jobs")), Some(&1));
        assert_eq!(counts.get(&key("kube-probe", "get", "/readyz")), Some(&1));
        assert_eq!(counts.len(), 3, "the cut line is left out: {counts:?}");
    }

    #[test]
    fn a_description_names_each_clusters_requests_of_one_client_per_job() {
        let count = |cluster: &str, client: &str, verb: &str, per_job: f64| Count {
            cluster: cluster.into(),
            client: client.into(),
            verb: verb.into(),
            resource: "jobs".into(),
            requests: 0,
            per_job,
        };
        let counts = [
            count("manager", "jobrelay-manager", "patch", 2.0),
            count("manager", "jobrelay-manager", "get", 0.01),
            count("worker-1", "jobrelay-agent", "create", 1.0),
            count("manager", "kueue", "patch", 3.0),
        ];
        assert_eq!(
            describe(&counts, "jobrelay", 0.05),
            ["manager: patch jobs 2.00", "worker-1: create jobs 1.00"]
        );
        assert_eq!(
            totals(&counts),
            "manager 5.01 (writes 5.00), worker-1 1.00 (writes 1.00)"
        );
    }
}
