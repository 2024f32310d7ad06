//! `describe` as text, the way `kubectl describe` lays it out: sections of
//! aligned `Label:  value` lines, then the Events as a table.

use k8s_openapi::jiff::Timestamp;

use super::status::finalizer;
use super::table;
use crate::view::age;
use crate::view::description::Description;
use crate::view::events;
use crate::view::kueue::KueueView;
use crate::view::pods::PodsReport;
use jobrelay_proto::wire::REMOTE_CLEANUP_FINALIZER;

/// `described` as text, ages counted to `now`.
pub fn text(described: &Description, now: Timestamp) -> String {
    let mut out = String::new();
    let created = match described.created {
        Some(at) => format!("{at} ({} ago)", age::since(Some(at), now)),
        None => "<unknown>".into(),
    };
    let status = &described.status;
    let mut job = vec![
        ("Name", described.name.clone()),
        ("Namespace", described.namespace.clone()),
        ("UID", described.uid.clone()),
        (
            "Managed By",
            described
                .managed_by
                .clone()
                .unwrap_or_else(|| "<none>".into()),
        ),
        ("Created", created),
        ("Status", status.summary()),
        ("Ready", status.ready.to_string()),
    ];
    if status.terminating > 0 {
        job.push(("Terminating", status.terminating.to_string()));
    }
    if let Some(reason) = &status.reason {
        job.push(("Reason", reason.clone()));
    }
    if let Some(message) = &status.message {
        job.push(("Message", message.clone()));
    }
    job.push((
        "Finalizer",
        format!(
            "{REMOTE_CLEANUP_FINALIZER} {}",
            finalizer(described.finalizer)
        ),
    ));
    fields(&mut out, 0, &job);

    match &described.kueue {
        Some(kueue) => kueue_section(&mut out, kueue),
        None => out.push_str("Kueue:  <none>\n"),
    }

    out.push_str("Mirror:\n");
    let mirror = &described.mirror;
    fields(
        &mut out,
        2,
        &[
            (
                "Cluster",
                mirror.cluster.clone().unwrap_or_else(|| "<none>".into()),
            ),
            ("State", mirror.state.label().into()),
        ],
    );
    match mirror.annotations.is_empty() {
        true => out.push_str("  Recorded by jobrelay:  <none>\n"),
        false => {
            out.push_str("  Recorded by jobrelay:\n");
            let recorded: Vec<(String, String)> = mirror
                .annotations
                .iter()
                .map(|a| match a.label == a.key {
                    true => (a.key.clone(), a.value.clone()),
                    false => (format!("{} ({})", a.label, a.key), a.value.clone()),
                })
                .collect();
            fields(&mut out, 4, &recorded);
        }
    }

    match &described.pods {
        Some(pods) => pods_section(&mut out, pods),
        None => out.push_str("Pods:  <none waiting or failed for a reason>\n"),
    }

    if described.events.is_empty() {
        out.push_str("Events:  <none>\n");
    } else {
        out.push_str("Events:\n");
        let rows: Vec<Vec<String>> = std::iter::once(
            ["----", "------", "----", "----", "-------"]
                .map(String::from)
                .to_vec(),
        )
        .chain(described.events.iter().map(|e| {
            vec![
                e.type_.clone(),
                e.reason.clone(),
                events::age(e, now),
                e.from.clone(),
                e.message.clone(),
            ]
        }))
        .collect();
        for line in table::render(&["Type", "Reason", "Age", "From", "Message"], &rows).lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn kueue_section(out: &mut String, kueue: &KueueView) {
    out.push_str("Kueue:\n");
    let queue = match (&kueue.queue, &kueue.cluster_queue) {
        (Some(queue), Some(cq)) => format!("{queue} (ClusterQueue {cq})"),
        (Some(queue), None) => queue.clone(),
        (None, _) => "<none>".into(),
    };
    let mut lines = vec![
        ("Workload", kueue.workload.clone()),
        ("Queue", queue),
        ("State", format!("{:?}", kueue.state)),
    ];
    if let Some(reason) = &kueue.reason {
        lines.push(("Reason", reason.clone()));
    }
    if let Some(message) = &kueue.message {
        lines.push(("Message", message.clone()));
    }
    fields(out, 2, &lines);
    if kueue.checks.is_empty() {
        return;
    }
    out.push_str("  Admission Checks:\n");
    let checks: Vec<(String, String)> = kueue
        .checks
        .iter()
        .map(|c| {
            let name = match c.jobrelay {
                Some(true) => format!("{} (jobrelay)", c.name),
                _ => c.name.clone(),
            };
            let state = match &c.message {
                Some(message) => format!("{}: {message}", c.state),
                None => c.state.clone(),
            };
            (name, state)
        })
        .collect();
    fields(out, 4, &checks);
}

fn pods_section(out: &mut String, pods: &PodsReport) {
    out.push_str("Pods:\n");
    if pods.reasons.is_empty() {
        out.push_str(&format!("  {}\n", pods.text));
        return;
    }
    fields(
        out,
        2,
        &[
            ("Cluster", pods.cluster.clone().unwrap_or_default()),
            ("By Phase", pods.phases.clone().unwrap_or_default()),
        ],
    );
    out.push_str("  Reasons:\n");
    for reason in &pods.reasons {
        match &reason.message {
            Some(message) => out.push_str(&format!("    {}: {message}\n", reason.short())),
            None => out.push_str(&format!("    {}\n", reason.short())),
        }
    }
}

/// `Label:  value` lines indented by `indent`, the values aligned.
fn fields<L: AsRef<str>>(out: &mut String, indent: usize, lines: &[(L, String)]) {
    let width = lines
        .iter()
        .map(|(label, _)| label.as_ref().chars().count())
        .max()
        .unwrap_or(0);
    for (label, value) in lines {
        let label = label.as_ref();
        let pad = width - label.chars().count() + 2;
        out.push_str(&format!(
            "{:indent$}{label}:{:pad$}{value}\n",
            "",
            "",
            indent = indent,
            pad = pad
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::description::tests::train;

    #[test]
    fn a_job_reads_like_kubectl_describe() {
        let now: Timestamp = "2026-11-28T12:00:00Z".parse().expect("a time");
        let text = text(&train(), now);
        assert_eq!(
            text,
            "\
Name:        train
Namespace:   ml
UID:         uid-train
Managed By:  jobrelay.dev/manager
Created:     2026-11-28T11:55:00Z (5m ago)
Status:      Running (2 active, 0 succeeded, 0 failed)
Ready:       1
Finalizer:   jobrelay.dev/remote-cleanup held
Kueue:
  Workload:  job-train-1a2b3
  Queue:     team-a (ClusterQueue fleet)
  State:     Admitted
  Reason:    AdmittedReason
  Admission Checks:
    jobrelay (jobrelay):  Ready: placed on worker-1
    provisioning:         Ready
Mirror:
  Cluster:  worker-1
  State:    running
  Recorded by jobrelay:
    Placed on cluster (jobrelay.dev/cluster):      worker-1
    Placement seal (jobrelay.dev/placement-seal):  c2VhbA
    Pods on the worker (jobrelay.dev/pods):        cluster worker-1 (1 Pending, 1 Running): 1 Pod wait ErrImagePull (container main): pull access denied for trainer:9
Pods:
  Cluster:   worker-1
  By Phase:  1 Pending, 1 Running
  Reasons:
    1 Pod wait ErrImagePull (container main): pull access denied for trainer:9
Events:
  Type      Reason          Age                   From               Message
  ----      ------          ----                  ----               -------
  Normal    Dispatched      4m                    jobrelay-manager   sent to cluster worker-1 (revision 1)
  Warning   WorkerWarning   3m                    jobrelay-manager   on cluster worker-1, Pod ml/train-x7k2p: FailedMount (kubelet): secret \"creds\" not found
  Warning   PodsWaiting     60s (x4 over 3m30s)   jobrelay-manager   on cluster worker-1, 1 Pod wait ErrImagePull (container main): pull access denied for trainer:9
"
        );
    }
}
