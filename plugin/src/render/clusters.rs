//! The `clusters` table: one line per WorkerCluster; `-o wide` adds the
//! room free, the worker's own Kueue queues, and why it is (dis)connected.

use k8s_openapi::jiff::Timestamp;

use super::table;
use crate::view::age;
use crate::view::cluster::{ClusterRow, Room};

/// `rows` as a table, ages counted to `now`.
pub fn table(rows: &[ClusterRow], wide: bool, now: Timestamp) -> String {
    let mut headers = vec![
        "NAME",
        "CONNECTED",
        "AGENT VERSION",
        "MIRRORS",
        "ROOM",
        "LAST HEARD",
        "AGE",
    ];
    if wide {
        headers.extend(["FREE", "QUEUES", "MESSAGE"]);
    }
    let cells: Vec<Vec<String>> = rows.iter().map(|row| cells(row, wide, now)).collect();
    table::render(&headers, &cells)
}

fn cells(row: &ClusterRow, wide: bool, now: Timestamp) -> Vec<String> {
    let mut cells = vec![
        row.name.clone(),
        row.connected_cell(),
        row.agent_version.clone().unwrap_or_else(|| "-".into()),
        row.mirrors.to_string(),
        row.room.as_ref().map_or_else(|| "-".into(), Room::summary),
        match row.last_heartbeat {
            Some(at) => age::since(Some(at), now),
            None => "never".into(),
        },
        age::since(row.created, now),
    ];
    if wide {
        cells.extend([
            row.room
                .as_ref()
                .map_or_else(|| "-".into(), Room::free_summary),
            match row.queues.is_empty() {
                true => "-".into(),
                false => row.queues.join(","),
            },
            row.message.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    cells
}

/// What to print when there is no WorkerCluster.
pub const NONE_FOUND: &str = "No WorkerClusters found.\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::cluster::row;
    use crate::view::cluster::tests::{worker_1, worker_2_lost};

    fn now() -> Timestamp {
        "2026-11-28T12:00:00Z".parse().expect("a time")
    }

    #[test]
    fn the_table_shows_each_cluster_and_its_agent() {
        let rows = [row(&worker_1()), row(&worker_2_lost())];
        assert_eq!(
            table(&rows, false, now()),
            "\
NAME       CONNECTED      AGENT VERSION   MIRRORS   ROOM                 LAST HEARD   AGE
worker-1   True           0.1.0           3         5 nodes in 2 pools   10s          2d
worker-2   False (Lost)   -               0         -                    30m          24h
"
        );
    }

    #[test]
    fn wide_adds_the_room_free_and_the_connection_message() {
        let rows = [row(&worker_1()), row(&worker_2_lost())];
        let text = table(&rows, true, now());
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0]
                .ends_with("AGE   FREE                                          QUEUES   MESSAGE"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].ends_with(
                "cpu 11500m, memory 47.5Gi, nvidia.com/gpu 4   -        agent connected"
            ),
            "{}",
            lines[1]
        );
        assert!(lines[2].ends_with("no session since 11:30"), "{}", lines[2]);
    }
}
