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

enum Expect {
    Now,
    In(Duration),
    Not,
}

/// One row per case: the room known (its free cpu), what was sent (its
/// free cpu) how many milliseconds ago, whether the DesiredSet was taken;
/// and the answer (`In` as milliseconds from now).
#[test]
fn whether_to_send_the_room() {
    let now = Instant::now();
    let ms = Duration::from_millis;
    let ago = |cpu, millis| Some((cpu, ms(millis)));
    #[rustfmt::skip]
    let cases: [(&str, Option<i64>, Ago, bool, Expect); 11] = [
        ("room unknown",              None,    None,         true,  Expect::Not),
        ("room unknown, sent before", None,    ago(1, 9000), true,  Expect::Not),
        ("before the DesiredSet",     Some(1), None,         false, Expect::Not),
        ("first on the session",      Some(1), None,         true,  Expect::Now),
        ("unchanged since sent",      Some(1), ago(1, 9000), true,  Expect::Not),
        ("less, interval passed",     Some(1), ago(2, 2000), true,  Expect::Now),
        ("less, too soon",            Some(1), ago(2, 0),    true,  Expect::In(ms(2000))),
        ("less, half way",            Some(1), ago(2, 1000), true,  Expect::In(ms(1000))),
        ("grew, a tenth passed",      Some(2), ago(1, 200),  true,  Expect::Now),
        ("grew, too soon",            Some(2), ago(1, 0),    true,  Expect::In(ms(200))),
        ("grew, half way",            Some(2), ago(1, 100),  true,  Expect::In(ms(100))),
    ];
    for (case, known, sent, taken, expect) in cases {
        let known = known.map(room);
        let sent = sent.map(|(cpu, ago)| Sent {
            room: room(cpu),
            at: now - ago,
        });
        let answer = due(known.as_ref(), sent.as_ref(), taken, INTERVAL, now);
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
    publish.send_replace(Some(room(1000)));
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

    publish.send_replace(Some(room(500)));
    assert!(
        within(&mut reports, Duration::from_millis(1500))
            .await
            .is_none(),
        "not within the interval"
    );
    publish.send_replace(Some(room(250)));
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
    publish.send_replace(Some(room(250)));
    assert!(
        within(&mut next_session, Duration::from_millis(1))
            .await
            .is_some(),
        "a new session sends the room again"
    );
}
