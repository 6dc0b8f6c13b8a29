//! Which master a majority of the sentinels given in the URL name for the service, asked of all
//! of them at once: a take and each renewal go only to a master a majority names now. A master
//! cut off with its clients and a minority of the sentinels is still named by that minority,
//! while the majority on the other side promotes a replica; a holder there fails its renewals
//! instead of renewing a lock nobody else reads.
//!
//! One thread per sentinel per question, each bounded by the question's deadline; the answer
//! comes as soon as a majority agrees (or can no longer agree). The connections are kept for
//! the next question; one still busy with a late answer sits that question out.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;

use crate::backend::redis::transport::endpoint::{Endpoint, Target};
use crate::backend::redis::transport::{self, Failure, Link};

/// What explaining a failure may take after the request's deadline (`diagnose`'s probe of
/// what answered).
pub(crate) const EXPLAIN: Duration = Duration::from_millis(800);

/// One sentinel's answer: the master it names, None when it knows no such service, or why it
/// did not answer.
type Answer = Result<Option<(String, u16)>, Failure>;

/// A message from a sentinel's thread: which sentinel, what it said, and its connection back.
type Reply = (usize, Answer, Option<Link>);

/// The sentinels of one endpoint, with a connection to each kept between questions.
pub(crate) struct Panel {
    /// Each sentinel's connection: None when closed, or while a thread has it.
    links: Vec<Option<Link>>,
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
        let mut asked = 0;
        for (i, (host, port)) in sentinels.iter().enumerate() {
            if self.out[i] {
                continue;
            }
            self.out[i] = true;
            asked += 1;
            let link = self.links[i].take();
            let (tx, endpoint) = (self.tx.clone(), endpoint.clone());
            let (host, port, service) = (host.clone(), *port, service.clone());
            thread::spawn(move || {
                let (answer, link) = ask(&endpoint, (&host, port), &service, link, deadline);
                let _ = tx.send((i, answer, link));
            });
        }
        let mut tally = Tally::default();
        let mut last = None;
        let until = if explained {
            deadline + EXPLAIN
        } else {
            deadline
        };
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
                Ok(Some(addr)) => tally.count(Said::Named(addr)),
                Ok(None) => tally.count(Said::Unknown),
                Err(failure) => {
                    tally.count(Said::Failed);
                    super::sentinel::keep(&mut last, failure);
                }
            }
        };
        if let Verdict::Named(addr, n) = verdict {
            return Ok((addr, n));
        }
        if tally.unknown >= need {
            return Err(Failure::Refused(
                format!(
                    "the sentinels know no service '{service}' (check the name after the hosts in \
                     the URL)"
                )
                .into(),
            ));
        }
        // No sentinel answered, and one said why in a way no retry changes (a password it
        // wants, TLS it does not speak, not a sentinel at all): that, as the lookup says it.
        if tally.votes.is_empty() && tally.unknown == 0 && matches!(last, Some(Failure::Refused(_)))
        {
            return Err(last.expect("just matched"));
        }
        let mut said: Vec<String> = tally
            .votes
            .iter()
            .map(|((h, p), n)| format!("{n} named {}", transport::node_name(h, *p)))
            .collect();
        for (n, what) in [
            (tally.unknown, "knew no such service"),
            (tally.failed, "failed"),
            (sentinels.len() - tally.heard(), "not heard from"),
        ] {
            if n > 0 {
                said.push(format!("{n} {what}"));
            }
        }
        let why = last.map_or(String::new(), |f| format!("; the last failure: {f}"));
        Err(Failure::Unreachable(
            format!(
                "no majority of the {} sentinels of {endpoint} names one master in time \
                 ({need} must): {}{why}",
                sentinels.len(),
                said.join(", ")
            )
            .into(),
        ))
    }

    fn back(&mut self, i: usize, link: Option<Link>) {
        self.out[i] = false;
        self.links[i] = link;
    }
}

/// One sentinel's answer to GET-MASTER-ADDR-BY-NAME, over `link` or a new connection; the
/// connection back when it can be used again.
fn ask(
    endpoint: &Endpoint,
    (host, port): (&str, u16),
    service: &str,
    link: Option<Link>,
    deadline: Instant,
) -> (Answer, Option<Link>) {
    let at = format!("sentinel {}", transport::node_name(host, port));
    let mut conn = match link {
        Some(conn) => conn,
        None => match transport::connect_to_sentinel(endpoint, host, port, &at, deadline) {
            Ok(conn) => conn,
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
            .map(Some)
            .ok_or_else(|| Failure::Refused(format!("unexpected reply from {at}").into())),
        Ok(Value::Nil) => Ok(None),
        Ok(other) => Err(Failure::Refused(
            format!("unexpected reply from {at}: {other:?}").into(),
        )),
        Err(e) => Err(super::sentinel::failed(endpoint, (host, port), &at, e)),
    };
    (answer, open.then_some(conn))
}

/// What one sentinel said, as far as the majority goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Said {
    Named((String, u16)),
    Unknown,
    Failed,
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
        }
    }

    fn heard(&self) -> usize {
        self.votes.iter().map(|(_, n)| n).sum::<usize>() + self.unknown + self.failed
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
    use super::{Said, Tally, Verdict};

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
}
