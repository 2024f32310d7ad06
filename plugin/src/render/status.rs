//! The `status` table: one line per relayed Job, kubectl's style; `-o wide`
//! adds the Job's age, its condition's reason, the refusal its agent
//! retries and the mirrors it lost.

use k8s_openapi::jiff::Timestamp;

use super::table;
use crate::view::age;
use crate::view::kueue::KueueView;
use crate::view::pods::PodsReport;
use crate::view::status_row::StatusRow;

/// Which columns to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Columns {
    /// With a NAMESPACE column (`-A`).
    pub namespace: bool,
    pub wide: bool,
}

/// `rows` as a table, ages counted to `now`.
pub fn table(rows: &[StatusRow], columns: Columns, now: Timestamp) -> String {
    let mut headers = Vec::new();
    if columns.namespace {
        headers.push("NAMESPACE");
    }
    headers.extend([
        "NAME",
        "KUEUE",
        "CLUSTER",
        "MIRROR",
        "PODS",
        "STATUS",
        "FINALIZER",
    ]);
    if columns.wide {
        headers.extend(["AGE", "READY", "REASON", "LOST", "DISPATCH WAITING"]);
    }
    let cells: Vec<Vec<String>> = rows.iter().map(|row| cells(row, columns, now)).collect();
    table::render(&headers, &cells)
}

fn cells(row: &StatusRow, columns: Columns, now: Timestamp) -> Vec<String> {
    let or_dash = |text: Option<String>| text.unwrap_or_else(|| "-".into());
    let mut cells = Vec::new();
    if columns.namespace {
        cells.push(row.namespace.clone());
    }
    cells.extend([
        row.name.clone(),
        or_dash(row.kueue.as_ref().map(KueueView::cell)),
        or_dash(row.cluster.clone()),
        row.mirror.label().to_string(),
        or_dash(row.pods.as_ref().map(PodsReport::short)),
        row.status.summary(),
        finalizer(row.finalizer).into(),
    ]);
    if columns.wide {
        cells.extend([
            age::since(row.created, now),
            row.status.ready.to_string(),
            or_dash(row.status.reason.clone()),
            row.mirrors_lost.to_string(),
            or_dash(row.dispatch_waiting.clone()),
        ]);
    }
    cells
}

/// The FINALIZER column: whether jobrelay's finalizer holds the Job.
pub fn finalizer(held: bool) -> &'static str {
    match held {
        true => "held",
        false => "released",
    }
}

/// What to print when no relayed Job is found.
pub fn none_found(namespace: Option<&str>) -> String {
    match namespace {
        Some(namespace) => format!("No relayed Jobs found in {namespace} namespace.\n"),
        None => "No relayed Jobs found.\n".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::status_row::tests::rows;

    fn now() -> Timestamp {
        "2026-11-28T12:00:00Z".parse().expect("a time")
    }

    #[test]
    fn the_table_shows_one_job_per_line() {
        let text = table(
            &rows(),
            Columns {
                namespace: false,
                wide: false,
            },
            now(),
        );
        assert_eq!(
            text,
            "\
NAME     KUEUE                        CLUSTER    MIRROR              PODS                                       STATUS                                       FINALIZER
train    Admitted (jobrelay: Ready)   worker-1   running             1 Pod wait ErrImagePull (container main)   Running (2 active, 0 succeeded, 0 failed)    held
etl      -                            worker-2   refused, retrying   -                                          Pending (0 active, 0 succeeded, 0 failed)    held
report   -                            worker-1   gone                -                                          Complete (0 active, 1 succeeded, 0 failed)   released
"
        );
    }

    #[test]
    fn all_namespaces_and_wide_add_their_columns() {
        let text = table(
            &rows(),
            Columns {
                namespace: true,
                wide: true,
            },
            now(),
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("NAMESPACE   NAME     KUEUE"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].ends_with("AGE   READY   REASON               LOST   DISPATCH WAITING"),
            "{}",
            lines[0]
        );
        assert!(lines[1].starts_with("ml          train"), "{}", lines[1]);
        assert!(
            lines[1].ends_with("5m    1       -                    0      -"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].ends_with("-                    0      cluster worker-2 refused the Job (NAMESPACE_MISSING): namespaces \"ml\" not found"),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].ends_with("CompletionsReached   1      -"),
            "{}",
            lines[3]
        );
    }

    #[test]
    fn nothing_found_says_where_it_looked() {
        assert_eq!(
            none_found(Some("ml")),
            "No relayed Jobs found in ml namespace.\n"
        );
        assert_eq!(none_found(None), "No relayed Jobs found.\n");
    }
}
