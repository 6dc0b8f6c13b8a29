//! A hostile server on a free loopback port: it reads each connection's first request and then
//! answers as a test says (never, a byte at a time, with an endless flood, with the same
//! bytes to every request, or to every one after the first). Stopped on drop.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

/// What the server does after a connection's first request.
#[derive(Clone, Debug)]
pub enum Answer {
    /// Nothing: it keeps the connection open and silent.
    Silent,
    /// `$100000\r\n`, then one byte every `every`: a reply that never completes in time, though
    /// bytes keep coming.
    Trickle { every: Duration },
    /// `$999999999999\r\n`, then data as fast as the client reads it.
    Flood,
    /// `reply` to each request, then `then`.
    Reply { reply: Vec<u8>, then: Then },
    /// `first` to the first request (the connection's set-up, such as ROLE), then `rest` to
    /// every other: a server that passes the checks and then misbehaves.
    After { first: Vec<u8>, rest: Vec<u8> },
}

/// ROLE's reply from a master without replicas.
pub const MASTER: &[u8] = b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n";

/// What a [`Answer::Reply`] server does after a reply.
#[derive(Clone, Copy, Debug)]
pub enum Then {
    /// Close the connection.
    Close,
    /// Keep it open and say nothing more.
    Hang,
    /// Answer the next request the same way.
    Repeat,
}

pub struct FakeServer {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl FakeServer {
    pub fn start(answer: Answer) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (stopped, answer) = (Arc::clone(&stopped), answer.clone());
                thread::spawn(move || serve(conn, answer, &stopped));
            }
        });
        FakeServer { port, stop }
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT`, as redlock names the server.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(mut conn: TcpStream, answer: Answer, stop: &AtomicBool) {
    let mut buf = [0u8; 64 * 1024];
    if !matches!(conn.read(&mut buf), Ok(n) if n > 0) {
        return;
    }
    let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
    match answer {
        Answer::Silent => hang(stop),
        Answer::Trickle { every } => {
            if conn.write_all(b"$100000\r\n").is_err() {
                return;
            }
            while !stop.load(Ordering::SeqCst) && conn.write_all(b"x").is_ok() {
                thread::sleep(every);
            }
        }
        Answer::Flood => {
            if conn.write_all(b"$999999999999\r\n").is_err() {
                return;
            }
            let chunk = vec![b'x'; 64 * 1024];
            // Until the client stops reading for a second, or goes away.
            while !stop.load(Ordering::SeqCst) && conn.write_all(&chunk).is_ok() {}
        }
        Answer::After { first, rest } => {
            if conn.write_all(&first).is_err() {
                return;
            }
            while matches!(conn.read(&mut buf), Ok(n) if n > 0) && conn.write_all(&rest).is_ok() {}
        }
        Answer::Reply { reply, then } => loop {
            if conn.write_all(&reply).is_err() {
                return;
            }
            match then {
                Then::Close => return,
                Then::Hang => return hang(stop),
                Then::Repeat => {}
            }
            if !matches!(conn.read(&mut buf), Ok(n) if n > 0) {
                return;
            }
        },
    }
}

/// Keep the connection open, silent, until the server stops.
fn hang(stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(50));
    }
}
