//! The quorum's rules, as tables: majorities, time limits, retry delays, one server under two
//! names.

use super::*;

#[test]
fn majorities() {
    assert_eq!(majority(1), 1);
    assert_eq!(majority(2), 2);
    assert_eq!(majority(3), 2);
    assert_eq!(majority(4), 3);
    assert_eq!(majority(5), 3);
}

#[test]
fn node_timeouts_are_small_against_the_ttl() {
    // With the acquire timeouts of a 30 s, a 1 s, a 100 ms and a year-long ttl.
    let ms = Duration::from_millis;
    assert_eq!(node_timeout(Duration::from_secs(30), ms(5000)), ms(600));
    assert_eq!(node_timeout(Duration::from_secs(1), ms(333)), ms(100));
    assert_eq!(node_timeout(ms(100), ms(33)), ms(33));
    let year = crate::lock::validity::MAX_DURATION;
    assert_eq!(node_timeout(year, ms(5000)), ms(1000));
    // A fiftieth of the ttl at most, once the ttl is 5 s or more.
    for secs in [5u64, 30, 60, 3600] {
        let ttl = Duration::from_secs(secs);
        assert!(node_timeout(ttl, ms(5000)) <= ttl / 50, "{secs}s");
    }
}

#[test]
fn split_delays_are_random_and_back_off() {
    assert_eq!(split_delay(1, 0.0), Duration::from_millis(50));
    assert_eq!(split_delay(1, 0.5), Duration::from_millis(150));
    assert!(split_delay(1, 0.999) < Duration::from_millis(250));
    assert!(split_delay(2, 0.999) < Duration::from_millis(450));
    assert_eq!(split_delay(5, 1.0), Duration::from_millis(3250));
    assert_eq!(split_delay(u32::MAX, 1.0), Duration::from_millis(3250));
    assert_eq!(split_delay(0, 1.0), Duration::from_millis(250));
}

#[test]
fn nodes_of_one_run_id_are_one_server() {
    let (a, b) = (Some("a1b2"), Some("c3d4"));
    assert_eq!(same_server(&[a, b, Some("e5f6")]), None);
    assert_eq!(same_server(&[a, a, b]), Some(vec![0, 1]));
    assert_eq!(same_server(&[b, a, None, a, a]), Some(vec![1, 3, 4]));
    // A node that did not say (an ACL, a proxy, a node down) matches nothing.
    assert_eq!(same_server(&[None, None, a]), None);
    assert_eq!(same_server(&[a]), None);
    assert_eq!(same_server(&[]), None);
    let two = ["127.0.0.1:6379".to_owned(), "localhost:6379".to_owned()];
    assert!(same_server_refusal(&two).starts_with(
        "127.0.0.1:6379 and localhost:6379 are one Redis server (INFO server gives them"
    ));
    let three = [two[0].clone(), two[1].clone(), "[::1]:6379".to_owned()];
    assert!(
        same_server_refusal(&three)
            .starts_with("127.0.0.1:6379, localhost:6379 and [::1]:6379 are one Redis")
    );
}

#[test]
fn validity_needs_half_the_ttl() {
    let ttl = Duration::from_secs(10);
    assert!(valid(Moment::now(), ttl));
    let long_ago = Moment::now() - Duration::from_secs(6);
    assert!(!valid(long_ago, ttl));
}

/// A skip on any node (the shortest ago) or a key held another way ends an attempt whatever
/// the other nodes said; anything else is the majority's to decide.
#[test]
fn a_skip_or_a_key_held_another_way_settles_an_attempt() {
    let skipped = |ms| {
        Some(Ok(Acquire::Skipped {
            ago: Duration::from_millis(ms),
        }))
    };
    let mismatch = || {
        Some(Ok(Acquire::Mismatch {
            found: crate::lock::HeldAs::Kind(crate::lock::Kind::Limit(3)),
        }))
    };
    let acquired = || Some(Ok(Acquire::Acquired { fence: 1 }));
    let unreachable = || Some(Err(Failure::Unreachable("no answer".to_owned().into())));
    let ago = |replies: &[Option<Result<Acquire, Failure>>]| match settled(replies) {
        Some(Acquire::Skipped { ago }) => Some(ago.as_millis()),
        _ => None,
    };
    assert_eq!(ago(&[acquired(), skipped(30), skipped(20), None]), Some(20));
    assert_eq!(ago(&[mismatch(), skipped(5), unreachable()]), Some(5));
    assert!(matches!(
        settled(&[acquired(), mismatch(), unreachable()]),
        Some(Acquire::Mismatch { .. })
    ));
    assert!(settled(&[acquired(), acquired(), unreachable(), None]).is_none());
}
