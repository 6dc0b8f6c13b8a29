//! A fault-injecting TCP proxy in front of Redis: pass, drop, hang, delay or reset, switched live
//! for every connection through it.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward both ways.
    Pass = 0,
    /// Close every connection (FIN); accept new ones and close them at once.
    Drop = 1,
    /// Keep connections open and forward nothing: no reply, no error.
    Hang = 2,
    /// Forward every chunk late.
    Delay = 3,
    /// Reset every connection (RST); reset new ones at once.
    Reset = 4,
}

struct Shared {
    mode: AtomicU8,
    /// [`Proxy::lose_reply_to`]: the bytes that mark the request, until it passes.
    lose_reply_to: Mutex<Option<Vec<u8>>>,
    /// The request passed: the next bytes from the server are dropped, with the connection.
    losing: AtomicBool,
    /// Bumped by Drop and Reset: connections of an older generation are cut.
    generation: AtomicU64,
    delay_ms: AtomicU64,
    upstream: u16,
}

impl Shared {
    fn mode(&self) -> Mode {
        match self.mode.load(Ordering::SeqCst) {
            1 => Mode::Drop,
            2 => Mode::Hang,
            3 => Mode::Delay,
            4 => Mode::Reset,
            _ => Mode::Pass,
        }
    }
}

pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Listen on a free loopback port and forward to 127.0.0.1:`upstream`.
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            mode: AtomicU8::new(Mode::Pass as u8),
            lose_reply_to: Mutex::new(None),
            losing: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            delay_ms: AtomicU64::new(0),
            upstream,
        });
        let s = Arc::clone(&shared);
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                accept(client, &s);
            }
        });
        Proxy { port, shared }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Lose the reply to the next request whose bytes hold `marker`: the request reaches the
    /// server, which acts on it; its reply is dropped with the connection (closed), as when a
    /// network fails between the two. Once.
    pub fn lose_reply_to(&self, marker: &[u8]) {
        *self.shared.lose_reply_to.lock().unwrap() = Some(marker.to_vec());
    }

    /// Whether the reply [`Self::lose_reply_to`] asked for was lost.
    pub fn lost_a_reply(&self) -> bool {
        self.shared.lose_reply_to.lock().unwrap().is_none()
    }

    /// Switch every connection to `mode` (`delay` is used by [`Mode::Delay`]).
    pub fn set(&self, mode: Mode, delay: Duration) {
        self.shared
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
        self.shared.mode.store(mode as u8, Ordering::SeqCst);
        if matches!(mode, Mode::Drop | Mode::Reset) {
            self.shared.generation.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn accept(client: TcpStream, shared: &Arc<Shared>) {
    match shared.mode() {
        Mode::Drop => return,
        Mode::Reset => {
            reset_on_close(&client);
            return;
        }
        _ => {}
    }
    let Ok(server) = TcpStream::connect_timeout(
        &([127, 0, 0, 1], shared.upstream).into(),
        Duration::from_secs(1),
    ) else {
        return;
    };
    let generation = shared.generation.load(Ordering::SeqCst);
    for (from, to, upstream) in [
        (
            client.try_clone().unwrap(),
            server.try_clone().unwrap(),
            true,
        ),
        (server, client, false),
    ] {
        let s = Arc::clone(shared);
        thread::spawn(move || pump(from, to, &s, generation, upstream));
    }
}

/// Copy `from` to `to` as the mode says, until either side closes or the connection is cut;
/// `upstream`: from the client to the server.
fn pump(mut from: TcpStream, mut to: TcpStream, shared: &Shared, generation: u64, upstream: bool) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        if shared.generation.load(Ordering::SeqCst) != generation {
            if shared.mode() == Mode::Reset {
                // RST goes out when the last handle closes; a shutdown would send FIN first.
                reset_on_close(&from);
                reset_on_close(&to);
            } else {
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
            }
            return;
        }
        if shared.mode() == Mode::Hang {
            // Leave the bytes in the kernel's buffers: nothing arrives, nothing fails.
            thread::sleep(Duration::from_millis(10));
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                if upstream {
                    let mut marker = shared.lose_reply_to.lock().unwrap();
                    if let Some(m) = marker.as_deref()
                        && buf[..n].windows(m.len()).any(|w| w == m)
                    {
                        *marker = None;
                        shared.losing.store(true, Ordering::SeqCst);
                    }
                } else if shared.losing.swap(false, Ordering::SeqCst) {
                    let _ = from.shutdown(Shutdown::Both);
                    let _ = to.shutdown(Shutdown::Both);
                    return;
                }
                if shared.mode() == Mode::Delay {
                    thread::sleep(Duration::from_millis(
                        shared.delay_ms.load(Ordering::SeqCst),
                    ));
                }
                if to.write_all(&buf[..n]).is_err() {
                    let _ = from.shutdown(Shutdown::Both);
                    return;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

/// SO_LINGER {on, 0}: closing the socket sends RST instead of FIN.
fn reset_on_close(stream: &TcpStream) {
    use nix::libc;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid open socket, and a pointer to a live `linger` of the size passed.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}
