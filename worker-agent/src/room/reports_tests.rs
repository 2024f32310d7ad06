use jobrelay_kinds::room::{Pool, Resources};
use jobrelay_proto::v1::NodePool;

use super::*;

const INTERVAL: Duration = Duration::from_secs(2);

fn room(cpu: i64) -> Room {
    let pool = Pool {
        nodes: 1,
        free: Resources::from([("cpu", cpu)]),
        largest: Resources::from([("cpu", cpu)]),
        ..Pool::default()
    };
    Room {
        pools: vec![pool],
        queues: Vec::new(),
    }
}

/// What is sent how long ago, for a case.
type Ago = Option<(i64, Duration)>;

/// A case of [`due`]: its name, the room known, what was sent, whether
/// the room counts more of a mirror's Pods, whether the DesiredSet was
/// taken, and the answer.
type DueCase = (&'static str, Option<i64>, Ago, bool, bool, Expect);

/// Pods counted of each mirror, by origin UID.
type Counts = &'static [(&'static str, u32)];

/// A case of [`newly_counted`]: its name, what is counted now, what the
/// last report counted, and what the next one names.
type NamedCase = (&'static str, Counts, Counts, Counts);

enum Expect {
    Now,
    In(Duration),
    Not,
}

/// One row per case: the room known (its free cpu), what was sent (its
/// free cpu) how many milliseconds ago, whether the room counts more Pods
/// of some mirror than that, whether the DesiredSet was taken; and the
/// answer (`In` as milliseconds from now).
#[test]
fn whether_to_send_the_room() {
    let now = Instant::now();
    let ms = Duration::from_millis;
    let ago = |cpu, millis| Some((cpu, ms(millis)));
    #[rustfmt::skip]
    let cases: [DueCase; 13] = [
        ("room unknown",              None,    None,         false, true,  Expect::Not),
        ("room unknown, sent before", None,    ago(1, 9000), false, true,  Expect::Not),
        ("before the DesiredSet",     Some(1), None,         false, false, Expect::Not),
        ("first on the session",      Some(1), None,         false, true,  Expect::Now),
        ("unchanged since sent",      Some(1), ago(1, 9000), false, true,  Expect::Not),
        ("less, interval passed",     Some(1), ago(2, 2000), false, true,  Expect::Now),
        ("less, too soon",            Some(1), ago(2, 0),    false, true,  Expect::In(ms(2000))),
        ("less, half way",            Some(1), ago(2, 1000), false, true,  Expect::In(ms(1000))),
        ("less, a mirror's Pods counted", Some(1), ago(2, 0), true, true,  Expect::In(ms(200))),
        ("less, counted, a tenth passed", Some(1), ago(2, 200), true, true, Expect::Now),
        ("grew, a tenth passed",      Some(2), ago(1, 200),  false, true,  Expect::Now),
        ("grew, too soon",            Some(2), ago(1, 0),    false, true,  Expect::In(ms(200))),
        ("grew, half way",            Some(2), ago(1, 100),  false, true,  Expect::In(ms(100))),
    ];
    for (case, known, sent, counts_more, taken, expect) in cases {
        let known = known.map(room);
        let sent = sent.map(|(cpu, ago)| Sent {
            room: room(cpu),
            at: now - ago,
        });
        let answer = due(
            known.as_ref(),
            sent.as_ref(),
            counts_more,
            taken,
            INTERVAL,
            now,
        );
        let expected = match expect {
            Expect::Now => Due::Now,
            Expect::In(wait) => Due::At(now + wait),
            Expect::Not => Due::Not,
        };
        assert_eq!(answer, expected, "{case}");
    }
}

fn kind(message: &AgentMessage) -> Vec<NodePool> {
    match &message.kind {
        Some(agent_message::Kind::Room(room)) => room.pools.clone(),
        other => panic!("a Room, not {other:?}"),
    }
}

/// The room with `cpu` free, counting the Pods of no mirror.
fn summed(cpu: i64) -> Summed {
    counting(cpu, &[])
}

/// The room with `cpu` free, counting `pods` of each mirror named.
fn counting(cpu: i64, pods: &[(&str, u32)]) -> Summed {
    let counted = pods.iter().map(|(uid, n)| (uid.to_string(), *n)).collect();
    Summed {
        room: room(cpu),
        counted: Arc::new(counted),
    }
}

fn counted(message: &AgentMessage) -> Vec<(String, u32)> {
    match &message.kind {
        Some(agent_message::Kind::Room(room)) => {
            let mut counted: Vec<(String, u32)> =
                room.counted.iter().map(|(u, n)| (u.clone(), *n)).collect();
            counted.sort();
            counted
        }
        other => panic!("a Room, not {other:?}"),
    }
}

/// One row per case: the Pods of each mirror counted now, those the last
/// report counted, and the mirrors the next report names.
#[test]
fn which_mirrors_a_report_names() {
    let map = |pairs: &[(&str, u32)]| -> HashMap<String, u32> {
        pairs.iter().map(|(u, n)| (u.to_string(), *n)).collect()
    };
    #[rustfmt::skip]
    let cases: [NamedCase; 5] = [
        ("first on the session",  &[("a", 2), ("b", 1)], &[],                 &[("a", 2), ("b", 1)]),
        ("nothing new",           &[("a", 2)],           &[("a", 2)],         &[]),
        ("more of one",           &[("a", 3), ("b", 1)], &[("a", 2), ("b", 1)], &[("a", 3)]),
        ("fewer: not named",      &[("a", 1)],           &[("a", 2)],         &[]),
        ("a new mirror",          &[("a", 2), ("c", 4)], &[("a", 2)],         &[("c", 4)]),
    ];
    for (case, now, sent, named) in cases {
        assert_eq!(newly_counted(&map(now), &map(sent)), map(named), "{case}");
    }
    let many: HashMap<String, u32> = (0..NAMED_AT_MOST + 10)
        .map(|i| (format!("{i:036}"), 1))
        .collect();
    let named = newly_counted(&many, &HashMap::new());
    assert_eq!(named.len(), NAMED_AT_MOST, "a report names so many at most");
    let mut message: jobrelay_proto::v1::Room = (&room(1)).into();
    message.counted = named;
    let size = prost::Message::encoded_len(&message);
    assert!(
        size < 512 * 1024,
        "{size} bytes, within the manager's Room limit"
    );
}

#[tokio::test(start_paused = true)]
async fn each_report_names_the_mirrors_it_counts_more_pods_of() {
    let (publish, latest) = watch::channel(Some(counting(8, &[("a", 1)])));
    let feed = Feed {
        room: latest,
        interval: INTERVAL,
        sent: Counter::default(),
    };
    let mut reports = feed.for_session(watch::channel(Some(Holding::default())).1);
    let first = within(&mut reports, Duration::from_millis(1))
        .await
        .expect("the first");
    assert_eq!(counted(&first), [("a".to_string(), 1)]);
    publish.send_replace(Some(counting(4, &[("a", 2), ("b", 1)])));
    let second = within(&mut reports, INTERVAL).await.expect("the next");
    assert_eq!(
        counted(&second),
        [("a".to_string(), 2), ("b".to_string(), 1)]
    );
    publish.send_replace(Some(counting(6, &[("b", 1)])));
    let third = within(&mut reports, INTERVAL).await.expect("the room grew");
    assert!(
        counted(&third).is_empty(),
        "a mirror's Pods gone names none"
    );
    let mut next_session = feed.for_session(watch::channel(Some(Holding::default())).1);
    let again = within(&mut next_session, Duration::from_millis(1))
        .await
        .expect("a new session");
    assert_eq!(
        counted(&again),
        [("b".to_string(), 1)],
        "a new session's first names all"
    );
}

/// Whether `reports` has a message within `wait` (of paused time).
async fn within(reports: &mut Reports, wait: Duration) -> Option<AgentMessage> {
    tokio::time::timeout(wait, reports.next()).await.ok()
}

#[tokio::test(start_paused = true)]
async fn a_session_sends_after_its_desired_set_then_each_change_at_most_once_per_interval() {
    let (publish, latest) = watch::channel(None);
    let (desired, holding) = watch::channel(None);
    let sent = Counter::default();
    let feed = Feed {
        room: latest,
        interval: INTERVAL,
        sent: sent.clone(),
    };
    let mut reports = feed.for_session(holding);
    publish.send_replace(Some(summed(1000)));
    assert!(
        within(&mut reports, Duration::from_secs(10))
            .await
            .is_none(),
        "nothing before the DesiredSet"
    );
    desired.send_replace(Some(Holding::default()));
    let first = within(&mut reports, Duration::from_millis(1))
        .await
        .expect("the room once the DesiredSet came");
    assert_eq!(kind(&first)[0].free["cpu"], 1000);

    publish.send_replace(Some(summed(500)));
    assert!(
        within(&mut reports, Duration::from_millis(1500))
            .await
            .is_none(),
        "not within the interval"
    );
    publish.send_replace(Some(summed(250)));
    let second = within(&mut reports, Duration::from_secs(1))
        .await
        .expect("the latest room once the interval passed");
    assert_eq!(
        kind(&second)[0].free["cpu"],
        250,
        "the latest, not the one between"
    );
    assert!(
        within(&mut reports, Duration::from_secs(60))
            .await
            .is_none(),
        "nothing while the room stays the same"
    );
    publish.send_replace(None);
    assert!(
        within(&mut reports, Duration::from_secs(60))
            .await
            .is_none(),
        "nothing while the room is not known"
    );
    assert_eq!(sent.get(), 2);

    let mut next_session = feed.for_session(watch::channel(Some(Holding::default())).1);
    publish.send_replace(Some(summed(250)));
    assert!(
        within(&mut next_session, Duration::from_millis(1))
            .await
            .is_some(),
        "a new session sends the room again"
    );
}
