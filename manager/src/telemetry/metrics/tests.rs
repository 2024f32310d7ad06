//! The manager's metrics as Prometheus reads them.

use super::*;
use crate::mirror::Held;
use jobrelay_proto::v1::MirrorPhase;
use kube::runtime::reflector::ObjectRef;
use std::time::Duration;

#[test]
fn renders_counters_gauges_and_per_cluster_histograms() {
    let (triggers, _) = tokio::sync::mpsc::unbounded_channel();
    let fleet = Arc::new(Fleet::new(triggers));
    let (outbox, _rx) = crate::outbox::Outbox::new(16);
    fleet.connect("w1", "test", &[], vec![], vec![], outbox);
    let key = crate::kinds::Key::of(&ObjectRef::<Job>::new("a").within("ns"));
    fleet.ensure_applied("w1", "u1", &key, 1, Vec::new);
    fleet.record_status("w1", "u1", Held::new(1, MirrorPhase::Running, None));
    let metrics = Metrics::new(
        Arc::clone(&fleet),
        Arc::new(DeletionTurns::per_second(1.0)),
        true,
    );
    metrics.deletions.done();
    metrics.refused("unknown_cluster");
    metrics.refused("unknown_cluster");
    metrics.mirror_lost("w1");
    metrics.desired_set_resent("w2");
    metrics.apply_refused("w2", "QUOTA_EXCEEDED", false);
    metrics.dispatched("w1", Duration::from_millis(120));
    metrics.cleaned_up("w1", Duration::from_secs(3));
    let text = metrics.render();
    for line in [
        "# TYPE jobrelay_retention_deleted counter\njobrelay_retention_deleted_total 1\n",
        "jobrelay_retention_waiting 0\n",
        "jobrelay_connected_clusters 1\n",
        "jobrelay_sessions_refused_total{reason=\"unknown_cluster\"} 2\n",
        "jobrelay_sessions_refused_total{reason=\"version_skew\"} 0\n",
        "jobrelay_mirrors_lost_total{cluster=\"w1\"} 1\n",
        "jobrelay_desired_set_resyncs_total{cluster=\"w2\"} 1\n",
        "jobrelay_apply_refusals_total{cluster=\"w2\",reason=\"QUOTA_EXCEEDED\",permanent=\"false\"} 1\n",
        "jobrelay_mirrors{cluster=\"w1\",phase=\"running\"} 1\n",
        "jobrelay_dispatch_seconds_count{cluster=\"w1\"} 1\n",
        "jobrelay_dispatch_seconds_bucket{le=\"0.25\",cluster=\"w1\"} 1\n",
        "jobrelay_cleanup_seconds_sum{cluster=\"w1\"} 3.0\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    assert!(
        metrics
            .render()
            .contains("jobrelay_retention_deleted_total 1\n"),
        "a scrape counts each deletion once"
    );
    assert!(text.contains("jobrelay_build_info{version=\""), "{text}");
    assert!(text.contains("\nprocess_cpu_seconds_total "), "{text}");
}

#[test]
fn latencies_are_fleet_wide_unless_asked_per_cluster() {
    let (triggers, _) = tokio::sync::mpsc::unbounded_channel();
    let fleet = Arc::new(Fleet::new(triggers));
    let pace = Arc::new(DeletionTurns::per_second(1.0));
    let metrics = Metrics::new(fleet, pace, false);
    metrics.dispatched("w1", Duration::from_millis(120));
    metrics.dispatched("w2", Duration::from_millis(120));
    let text = metrics.render();
    assert!(
        text.contains("jobrelay_dispatch_seconds_count{} 2\n"),
        "{text}"
    );
    assert!(!text.contains("_seconds_count{cluster="), "{text}");
}
