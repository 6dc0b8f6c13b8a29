//! Which master a majority of the sentinels given in the URL name for the service, asked of all
//! of them at once: a take and each renewal go only to a master a majority names now. A master
//! cut off with its clients and a minority of the sentinels is still named by that minority,
//! while the majority on the other side promotes a replica; a holder there fails its renewals
//! instead of renewing a lock nobody else reads.
//!
//! One thread per sentinel per question, each bounded by the question's deadline; the answer
//! comes as soon as a majority agrees (or can no longer agree). The connections are kept for
//! the next question; one still busy with a late answer sits that question out. Each sentinel
//! says its ID (SENTINEL MYID) once per connection: one sentinel the URL names under two names
//! (`localhost` and `127.0.0.1`, say) speaks once, as a hostile URL could otherwise make one
//! lying sentinel a majority.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;

use crate::backend::redis::transport::endpoint::{Endpoint, Target};
use crate::backend::redis::transport::{self, Failure, Link};

/// What explaining a failure may take after the request's deadline (`diagnose`'s probe of
/// what answered).
pub(crate) const EXPLAIN: Duration = Duration::from_millis(800);

/// One sentinel's answer: its ID, and the master it names (None when it knows no such
/// service); or why it did not answer.
type Answer = Result<(String, Option<(String, u16)>), Failure>;

/// A connection to a sentinel, and the ID it gave on it.
type Known = (Link, String);

/// A message from a sentinel's thread: which sentinel, what it said, and its connection back.
type Reply = (usize, Answer, Option<Known>);

/// The sentinels of one endpoint, with a connection to each kept between questions.
pub(crate) struct Panel {
    /// Each sentinel's connection and ID: None when closed, or while a thread has it.
    links: Vec<Option<Known>>,
    /// Whether a thread is out with the sentinel's connection (a late answer to come).
    out: Vec<bool>,
    tx: Sender<Reply>,
    rx: Receiver<Reply>,
}

impl Panel {
    pub fn new(sentinels: usize) -> Self {
        let (tx, rx) = mpsc::channel();
        Self {
            links: (0..sentinels).map(|_| None).collect(),
            out: vec![false; sentinels],
            tx,
            rx,
        }
    }

    /// The master a majority of `endpoint`'s sentinels name, asked within `deadline`, and how
    /// many named it. `explained`: whether to wait past `deadline` (up to [`EXPLAIN`]) for what
    /// a sentinel that failed at its deadline found it to be, as a first lookup does.
    pub fn majority(
        &mut self,
        endpoint: &Endpoint,
        deadline: Instant,
        explained: bool,
    ) -> Result<((String, u16), usize), Failure> {
        let Target::Sentinel {
            sentinels, service, ..
        } = &endpoint.target
        else {
            unreachable!("a sentinel majority for a non-sentinel endpoint");
        };
        // Late answers of earlier questions: their connections come back, their words are old.
        while let Ok((i, _, link)) = self.rx.try_recv() {
            self.back(i, link);
        }
        let need = sentinels.len() / 2 + 1;
        let asked = self.ask_all(endpoint, sentinels, service, deadline);
        let until = if explained {
            deadline + EXPLAIN
        } else {
            deadline
        };
        let (tally, verdict, last) = self.hear(need, asked, until);
        if let Verdict::Named(addr, n) = verdict {
            return Ok((addr, n));
        }
        Err(no_majority(
            &tally,
            last,
            endpoint,
            sentinels.len(),
            service,
        ))
    }

    /// The question to every sentinel not still busy with an earlier one, each on a thread of
    /// its own; how many were asked.
    fn ask_all(
        &mut self,
        endpoint: &Endpoint,
        sentinels: &[(String, u16)],
        service: &str,
        deadline: Instant,
    ) -> usize {
        let mut asked = 0;
        for (i, (host, port)) in sentinels.iter().enumerate() {
            if self.out[i] {
                continue;
            }
            self.out[i] = true;
            asked += 1;
            let link = self.links[i].take();
            let (tx, endpoint) = (self.tx.clone(), endpoint.clone());
            let (host, port, service) = (host.clone(), *port, service.to_owned());
            thread::spawn(move || {
                let (answer, link) = ask(&endpoint, (&host, port), &service, link, deadline);
                let _ = tx.send((i, answer, link));
            });
        }
        asked
    }

    /// The answers of the `asked` sentinels, until `need` of them name one master, or that can
    /// no longer happen, or `until`; with the last failure heard.
    fn hear(
        &mut self,
        need: usize,
        asked: usize,
        until: Instant,
    ) -> (Tally, Verdict, Option<Failure>) {
        let mut tally = Tally::default();
        let mut last = None;
        let verdict = loop {
            let pending = asked - tally.heard();
            match tally.verdict(need, pending) {
                Verdict::Pending if pending > 0 => {}
                verdict => break verdict,
            }
            let wait = until.saturating_duration_since(Instant::now());
            let (i, answer, link) = match self.rx.recv_timeout(wait) {
                Ok(reply) => reply,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    break Verdict::Impossible;
                }
            };
            self.back(i, link);
            match answer {
                Ok((id, Some(addr))) => tally.count_from(&id, Said::Named(addr)),
                Ok((id, None)) => tally.count_from(&id, Said::Unknown),
                Err(failure) => {
                    tally.count(Said::Failed);
                    super::sentinel::keep(&mut last, failure);
                }
            }
        };
        (tally, verdict, last)
    }

    fn back(&mut self, i: usize, link: Option<Known>) {
        self.out[i] = false;
        self.links[i] = link;
    }
}

/// Why the `sentinels` of `endpoint` named no master by a majority, from what they said
/// (`tally`) and the last failure heard.
fn no_majority(
    tally: &Tally,
    last: Option<Failure>,
    endpoint: &Endpoint,
    sentinels: usize,
    service: &str,
) -> Failure {
    let need = sentinels / 2 + 1;
    if tally.unknown >= need {
        return super::sentinel::unknown_service(service);
    }
    // No sentinel answered, and one said why in a way no retry changes (a password it
    // wants, TLS it does not speak, not a sentinel at all): that, as the lookup says it.
    if tally.votes.is_empty() && tally.unknown == 0 && matches!(last, Some(Failure::Refused(_))) {
        return last.expect("just matched");
    }
    let mut said: Vec<String> = tally
        .votes
        .iter()
        .map(|((h, p), n)| format!("{n} named {}", transport::node_name(h, *p)))
        .collect();
    for (n, what) in [
        (tally.unknown, "knew no such service"),
        (
            tally.again,
            "was a sentinel already heard, under another name",
        ),
        (tally.failed, "failed"),
        (sentinels - tally.heard(), "not heard from"),
    ] {
        if n > 0 {
            said.push(format!("{n} {what}"));
        }
    }
    let why = last.map_or(String::new(), |f| format!("; the last failure: {f}"));
    Failure::Unreachable(
        format!(
            "no majority of the {sentinels} sentinels of {endpoint} names one master in time \
             ({need} must): {}{why}",
            said.join(", ")
        )
        .into(),
    )
}

/// One sentinel's answer to GET-MASTER-ADDR-BY-NAME, over `link` or a new connection; the
/// connection back when it can be used again.
fn ask(
    endpoint: &Endpoint,
    (host, port): (&str, u16),
    service: &str,
    link: Option<Known>,
    deadline: Instant,
) -> (Answer, Option<Known>) {
    let at = format!("sentinel {}", transport::node_name(host, port));
    let (mut conn, id) = match link {
        Some(known) => known,
        None => match transport::connect_to_sentinel(endpoint, host, port, &at, deadline) {
            Ok(mut conn) => {
                conn.set_deadline(deadline);
                // Its ID, once per connection. A sentinel before Redis 6.2 has no MYID: it is
                // known by its address, which the URL names once.
                let id = match redis::cmd("SENTINEL").arg("MYID").query::<Value>(&mut conn) {
                    Ok(Value::BulkString(id)) => String::from_utf8_lossy(&id).into_owned(),
                    Ok(Value::SimpleString(id)) => id,
                    _ if redis::ConnectionLike::is_open(&conn) => format!("{host}:{port}"),
                    _ => {
                        let lost = format!("{at} closed the connection");
                        return (Err(Failure::Unreachable(lost.into())), None);
                    }
                };
                (conn, id)
            }
            Err(failure) => return (Err(failure), None),
        },
    };
    conn.set_deadline(deadline);
    let reply = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(service)
        .query::<Value>(&mut conn);
    let open = redis::ConnectionLike::is_open(&conn);
    let answer = match reply {
        Ok(Value::Array(items)) => super::sentinel::address(&items)
            .map(|addr| (id.clone(), Some(addr)))
            .ok_or_else(|| Failure::Refused(format!("unexpected reply from {at}").into())),
        Ok(Value::Nil) => Ok((id.clone(), None)),
        Ok(other) => Err(Failure::Refused(
            format!("unexpected reply from {at}: {other:?}").into(),
        )),
        Err(e) => Err(super::sentinel::failed(endpoint, (host, port), &at, e)),
    };
    (answer, open.then_some((conn, id)))
}

/// What one sentinel said, as far as the majority goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Said {
    Named((String, u16)),
    Unknown,
    Failed,
    /// A sentinel already heard in this question, under another of the URL's names.
    Again,
}

/// What the answers so far decide.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// This master, named by this many: a majority.
    Named((String, u16), usize),
    /// The answers still to come could make a majority.
    Pending,
    /// They cannot any more.
    Impossible,
}

/// The answers to one question so far.
#[derive(Debug, Default)]
struct Tally {
    votes: Vec<((String, u16), usize)>,
    unknown: usize,
    failed: usize,
    again: usize,
    /// The IDs of the sentinels heard.
    ids: Vec<String>,
}

impl Tally {
    fn count(&mut self, said: Said) {
        match said {
            Said::Named(addr) => match self.votes.iter_mut().find(|(a, _)| *a == addr) {
                Some((_, n)) => *n += 1,
                None => self.votes.push((addr, 1)),
            },
            Said::Unknown => self.unknown += 1,
            Said::Failed => self.failed += 1,
            Said::Again => self.again += 1,
        }
    }

    /// What the sentinel with ID `id` said: counted once, whatever names the URL gives it.
    fn count_from(&mut self, id: &str, said: Said) {
        if self.ids.iter().any(|seen| seen == id) {
            self.count(Said::Again);
        } else {
            self.ids.push(id.to_owned());
            self.count(said);
        }
    }

    fn heard(&self) -> usize {
        self.votes.iter().map(|(_, n)| n).sum::<usize>() + self.unknown + self.failed + self.again
    }

    /// With `need` votes for one master a majority, and `pending` answers still to come.
    fn verdict(&self, need: usize, pending: usize) -> Verdict {
        if let Some((addr, n)) = self.votes.iter().find(|(_, n)| *n >= need) {
            return Verdict::Named(addr.clone(), *n);
        }
        let best = self.votes.iter().map(|(_, n)| *n).max().unwrap_or(0);
        if best + pending < need {
            Verdict::Impossible
        } else {
            Verdict::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Endpoint, Failure, Said, Tally, Verdict, no_majority};

    fn at(port: u16) -> Said {
        Said::Named(("m".to_owned(), port))
    }

    /// (sentinels in the URL, what they say in order, the verdict after each answer)
    #[test]
    fn a_majority_of_the_url_decides_as_soon_as_it_can() {
        use Verdict::{Impossible as No, Pending as Wait};
        let yes = |port, n| Verdict::Named(("m".to_owned(), port), n);
        let table: Vec<(usize, Vec<Said>, Vec<Verdict>)> = vec![
            (1, vec![at(1)], vec![yes(1, 1)]),
            (1, vec![Said::Failed], vec![No]),
            (3, vec![at(1), at(1)], vec![Wait, yes(1, 2)]),
            (
                3,
                vec![at(1), Said::Failed, at(1)],
                vec![Wait, Wait, yes(1, 2)],
            ),
            (3, vec![Said::Failed, Said::Failed], vec![Wait, No]),
            // Split between two masters (a failover half seen): no majority.
            (3, vec![at(1), at(2), Said::Failed], vec![Wait, Wait, No]),
            (3, vec![at(1), at(2), at(2)], vec![Wait, Wait, yes(2, 2)]),
            (3, vec![Said::Unknown, Said::Unknown], vec![Wait, No]),
            // Four sentinels: three must agree.
            (4, vec![at(1), at(1), Said::Failed], vec![Wait, Wait, Wait]),
            (
                4,
                vec![at(1), at(1), Said::Failed, Said::Failed],
                vec![Wait, Wait, Wait, No],
            ),
            (4, vec![at(1), at(1), at(1)], vec![Wait, Wait, yes(1, 3)]),
            (
                5,
                vec![at(1), at(2), at(1), at(1)],
                vec![Wait, Wait, Wait, yes(1, 3)],
            ),
        ];
        for (sentinels, answers, want) in table {
            let need = sentinels / 2 + 1;
            let mut tally = Tally::default();
            let mut got = Vec::new();
            for said in answers.iter().cloned() {
                tally.count(said);
                got.push(tally.verdict(need, sentinels - tally.heard()));
            }
            assert_eq!(got, want, "{sentinels} sentinels saying {answers:?}");
        }
    }

    /// One sentinel under two of the URL's names speaks once: its second answer is no vote.
    #[test]
    fn one_sentinel_under_two_names_counts_once() {
        let mut tally = Tally::default();
        tally.count_from("liar", at(9));
        tally.count_from("liar", at(9));
        assert_eq!(tally.verdict(2, 1), Verdict::Pending);
        tally.count_from("honest", at(1));
        assert_eq!(tally.verdict(2, 0), Verdict::Impossible);
        let mut tally = Tally::default();
        for id in ["a", "b"] {
            tally.count_from(id, at(1));
        }
        assert_eq!(tally.verdict(2, 1), Verdict::Named(("m".to_owned(), 1), 2));
    }

    /// Without a majority, the message says what each sentinel said, or that the service is
    /// unknown when a majority said so; a refusal that no retry changes is passed on as it is.
    #[test]
    fn no_majority_says_what_the_sentinels_said() {
        let endpoint = Endpoint::parse("redis+sentinel://s1,s2,s3/svc").unwrap();
        let mut split = Tally::default();
        split.count(at(1));
        split.count(at(2));
        let failure = no_majority(&split, None, &endpoint, 3, "svc");
        assert!(matches!(failure, Failure::Unreachable(_)), "{failure:?}");
        let said = failure.to_string();
        assert!(
            said.contains("(2 must): 1 named m:1, 1 named m:2, 1 not heard from"),
            "{said}"
        );

        let mut unknown = Tally::default();
        unknown.count(Said::Unknown);
        unknown.count(Said::Unknown);
        let failure = no_majority(&unknown, None, &endpoint, 3, "svc");
        assert!(matches!(failure, Failure::Refused(_)), "{failure:?}");
        assert!(failure.to_string().contains("know no service 'svc'"));

        let mut failed = Tally::default();
        failed.count(Said::Failed);
        let wrongpass = Failure::Refused("WRONGPASS".to_owned().into());
        let failure = no_majority(&failed, Some(wrongpass), &endpoint, 3, "svc");
        assert_eq!(failure.to_string(), "WRONGPASS");
    }
}
