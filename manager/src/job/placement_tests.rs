//! Which cluster [`choose_cluster`] picks, case by case.

use jobrelay_kinds::room::fit::Shortfall;
use jobrelay_kinds::room::{PodGroup, Pool, Queue, Resources};

use super::{Choice, Offer, choose_cluster};

fn all(_: &str) -> bool {
    true
}

fn unknown(name: &str, active_mirrors: usize) -> Offer<'_> {
    Offer {
        name,
        active_mirrors,
        left: None,
        queue: None,
    }
}

fn room(cpu: i64, gpus: i64) -> Vec<Pool> {
    let free = Resources::from([("cpu", cpu), ("nvidia.com/gpu", gpus), ("pods", 100)]);
    vec![Pool::one_node(free)]
}

fn known<'a>(name: &'a str, active_mirrors: usize, left: &'a [Pool]) -> Offer<'a> {
    Offer {
        name,
        active_mirrors,
        left: Some(left),
        queue: None,
    }
}

fn asks(pods: i64, cpu: i64, gpus: i64) -> Vec<PodGroup> {
    vec![PodGroup {
        pods,
        each: Resources::from([("cpu", cpu), ("nvidia.com/gpu", gpus), ("pods", 1)]),
        ..PodGroup::default()
    }]
}

fn on(name: &str) -> Choice {
    Choice::On(name.into())
}

#[test]
fn a_pinned_job_goes_where_it_is_pinned_even_without_room() {
    let none = room(0, 0);
    let offers = [known("worker-a", 0, &none)];
    assert_eq!(
        choose_cluster(Some("worker-b"), None, offers, all, &asks(1, 1000, 0)),
        on("worker-b")
    );
}

#[test]
fn without_room_reports_the_least_loaded_cluster_wins_and_ties_go_by_name() {
    let offers = [
        unknown("worker-a", 5),
        unknown("worker-b", 2),
        unknown("worker-c", 2),
    ];
    assert_eq!(
        choose_cluster(None, None, offers, all, &asks(1, 1000, 0)),
        on("worker-b")
    );
    assert_eq!(choose_cluster(None, None, [], all, &[]), Choice::NoCluster);
}

#[test]
fn the_cluster_with_most_room_of_the_dominant_resource_wins_among_those_that_fit() {
    let (small, big, gpus) = (room(4000, 0), room(16_000, 0), room(8000, 4));
    let offers = [
        known("small", 0, &small),
        known("big", 9, &big),
        known("gpus", 0, &gpus),
    ];
    assert_eq!(
        choose_cluster(None, None, offers, all, &asks(2, 1000, 0)),
        on("big")
    );
    assert_eq!(
        choose_cluster(None, None, offers, all, &asks(1, 1000, 1)),
        on("gpus"),
        "only it has a GPU"
    );
}

#[test]
fn a_full_cluster_is_passed_over_and_one_of_unknown_room_comes_after_those_that_fit() {
    let (full, roomy) = (room(0, 0), room(8000, 0));
    let offers = [
        known("full", 0, &full),
        unknown("silent", 0),
        known("roomy", 7, &roomy),
    ];
    assert_eq!(
        choose_cluster(None, None, offers, all, &asks(1, 1000, 0)),
        on("roomy")
    );
    let offers = [known("full", 0, &full), unknown("silent", 3)];
    assert_eq!(
        choose_cluster(None, None, offers, all, &asks(1, 1000, 0)),
        on("silent")
    );
}

#[test]
fn a_job_that_fits_nowhere_waits_with_what_is_short_on_each_cluster_that_takes_it() {
    let (a, b) = (room(2000, 0), room(1000, 0));
    let offers = [known("worker-a", 0, &a), known("worker-b", 0, &b)];
    let not_b = |name: &str| name != "worker-b";
    assert_eq!(
        choose_cluster(None, None, offers, not_b, &asks(3, 1000, 0)),
        Choice::NoRoom(vec![(
            "worker-a".into(),
            Shortfall::Room {
                fit: 2,
                wanted: 3,
                short_of: vec!["cpu".into()]
            }
        )])
    );
    assert_eq!(
        choose_cluster(None, None, offers, |_| false, &asks(3, 1000, 0)),
        Choice::NoCluster
    );
}

#[test]
fn a_cluster_that_does_not_take_the_job_is_passed_over_and_asked_only_in_turn() {
    let asked = std::cell::RefCell::new(Vec::new());
    let takes = |name: &str| {
        asked.borrow_mut().push(name.to_string());
        name != "worker-c"
    };
    let offers = [
        unknown("worker-a", 1),
        unknown("worker-b", 3),
        unknown("worker-c", 0),
        unknown("worker-d", 2),
    ];
    assert_eq!(
        choose_cluster(None, None, offers, takes, &[]),
        on("worker-a")
    );
    assert_eq!(*asked.borrow(), ["worker-c", "worker-a"]);
}

#[test]
fn a_fill_order_puts_a_job_on_the_first_listed_cluster_it_fits_and_spills_over_after() {
    let (little, much, none) = (room(2000, 0), room(64000, 0), room(0, 0));
    let fill = ["worker-c".to_string(), "worker-b".to_string()];
    let fill = Some(fill.as_slice());
    let offers = [
        known("worker-a", 0, &much),
        known("worker-b", 0, &little),
        known("worker-c", 0, &little),
    ];
    assert_eq!(
        choose_cluster(None, fill, offers, all, &asks(1, 1000, 0)),
        on("worker-c"),
        "the first listed, though another has more room"
    );
    let offers = [
        known("worker-a", 0, &much),
        known("worker-b", 0, &little),
        known("worker-c", 0, &none),
    ];
    assert_eq!(
        choose_cluster(None, fill, offers, all, &asks(1, 1000, 0)),
        on("worker-b"),
        "the next listed once the first is full"
    );
    assert_eq!(
        choose_cluster(None, fill, offers, all, &asks(2, 1000, 0)),
        on("worker-b"),
    );
    assert_eq!(
        choose_cluster(None, fill, offers, all, &asks(3, 1000, 0)),
        on("worker-a"),
        "one not listed once no listed one has room"
    );
    assert_eq!(
        choose_cluster(None, fill, offers, |c| c != "worker-b", &asks(1, 1000, 0)),
        on("worker-a"),
        "a listed cluster that does not take the Job is passed over"
    );
}

#[test]
fn a_job_queued_in_a_workers_kueue_goes_only_where_its_cluster_queue_has_quota() {
    let much = room(64000, 0);
    let queue = |cpu| Queue {
        name: "team".into(),
        local_queues: vec!["ns/lq".into()],
        free: Resources::from([("cpu", cpu)]),
    };
    let (full, some) = (queue(1000), queue(4000));
    let queued = |name, left, queue| Offer {
        queue: Some(queue),
        ..known(name, 0, left)
    };
    let offers = [
        queued("worker-a", &much, &full),
        known("worker-b", 0, &much),
    ];
    assert_eq!(
        choose_cluster(None, None, offers, all, &asks(2, 1000, 0)),
        on("worker-b"),
        "not where its queue has too little quota, though the nodes have room"
    );
    let offers = [queued("worker-a", &much, &full)];
    assert_eq!(
        choose_cluster(None, None, offers, all, &asks(2, 1000, 0)),
        Choice::NoRoom(vec![(
            "worker-a".into(),
            Shortfall::Quota {
                queue: "team".into(),
                short_of: vec!["cpu".into()]
            }
        )])
    );
    let offers = [queued("worker-a", &much, &some)];
    assert_eq!(
        choose_cluster(None, None, offers, all, &asks(2, 1000, 0)),
        on("worker-a")
    );
    let unknown_room = Offer {
        queue: Some(&full),
        ..unknown("worker-a", 0)
    };
    assert!(
        matches!(
            choose_cluster(None, None, [unknown_room], all, &asks(2, 1000, 0)),
            Choice::NoRoom(_)
        ),
        "the queue's quota counts where the nodes' room is not known"
    );
}
