//! A hostile server on a free loopback port: it reads each connection's first request and then
//! answers as a test says (never, a byte at a time, or with an endless flood). Stopped on drop.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

/// What the server does after a connection's first request.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    /// Nothing: it keeps the connection open and silent.
    Silent,
    /// `$100000\r\n`, then one byte every `every`: a reply that never completes in time, though
    /// bytes keep coming.
    Trickle { every: Duration },
    /// `$999999999999\r\n`, then data as fast as the client reads it.
    Flood,
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
                let stopped = Arc::clone(&stopped);
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
        Answer::Silent => {
            while !stop.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(50));
            }
        }
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
            while !stop.load(Ordering::SeqCst) {
                match conn.write_all(&chunk) {
                    Ok(()) => {}
                    // The client stopped reading for a second, or went away.
                    Err(_) => return,
                }
            }
        }
    }
}
