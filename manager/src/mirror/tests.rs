use super::*;
use k8s_openapi::api::batch::v1::JobStatus;

#[test]
fn a_kept_status_reads_back_as_written() {
    let status: JobStatus = serde_json::from_value(serde_json::json!({
        "active": 1,
        "conditions": [{"type": "Complete", "status": "True"}],
    }))
    .unwrap();
    let kept = StatusText::new(&status);
    assert_eq!(kept.read::<JobStatus>(), Some(status));
}
