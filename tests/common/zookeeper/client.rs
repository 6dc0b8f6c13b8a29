//! A tiny blocking ZooKeeper client for the fixture's helpers: one session on one member over
//! ZooKeeper's own wire protocol (jute records, length-prefixed, on the client port), with the
//! few requests the tests need and no watches, pings or reconnection.
//!
//! Not `zkCli.sh`: a JVM per call took 0.45-0.5 s on an idle 2-core machine, where a session,
//! a request and its close here take a few milliseconds; and no crate: ZooKeeper clients are
//! async, and the tests read what redlock left through code that shares nothing with its own
//! client.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The session timeout the client asks for; the member grants one between its
/// `minSessionTimeout` and `maxSessionTimeout`. The client sends no pings: a session lives as
/// long as its requests follow each other within this.
const SESSION_TIMEOUT_MS: i32 = 4000;

// Request types (ZooDefs.OpCode).
const CREATE: i32 = 1;
const DELETE: i32 = 2;
const EXISTS: i32 = 3;
const GET_DATA: i32 = 4;
const SET_DATA: i32 = 5;
const GET_CHILDREN: i32 = 8;
const SYNC: i32 = 9;
const CLOSE_SESSION: i32 = -11;

/// What a member keeps of a node besides its data (ZooKeeper's `Stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZkStat {
    /// The zxid of the transaction that created it.
    pub czxid: i64,
    /// The zxid of its last change.
    pub mzxid: i64,
    /// Created and last changed, milliseconds since the epoch.
    pub ctime: i64,
    pub mtime: i64,
    /// How many times its data changed.
    pub version: i32,
    /// How many times its children changed.
    pub cversion: i32,
    pub aversion: i32,
    /// The session that owns it if it is ephemeral, else 0.
    pub ephemeral_owner: i64,
    pub data_length: i32,
    pub num_children: i32,
    /// The zxid of the last change to its children.
    pub pzxid: i64,
}

/// A request that failed: on the connection, or with an error code the member answered.
#[derive(Debug)]
pub enum ZkError {
    Io(io::Error),
    /// A `KeeperException.Code`: -101 no node, -110 node exists, -111 not empty, ...
    Code(i32),
}

impl ZkError {
    pub const NO_NODE: i32 = -101;
    pub const NODE_EXISTS: i32 = -110;
    pub const NOT_EMPTY: i32 = -111;

    /// The member answered this error code.
    pub fn is(&self, code: i32) -> bool {
        matches!(self, ZkError::Code(c) if *c == code)
    }
}

impl fmt::Display for ZkError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            ZkError::Io(e) => write!(f, "connection: {e}"),
            ZkError::Code(code) => {
                let name = match *code {
                    -4 => "connection loss",
                    -101 => "no node",
                    -102 => "not authorized",
                    -103 => "bad version",
                    -108 => "no children for ephemerals",
                    -110 => "node exists",
                    -111 => "not empty",
                    -112 => "session expired",
                    -118 => "session moved",
                    _ => "error",
                };
                write!(f, "{name} ({code})")
            }
        }
    }
}

impl From<io::Error> for ZkError {
    fn from(e: io::Error) -> ZkError {
        ZkError::Io(e)
    }
}

/// One session on one member. Requests are answered in order, one at a time; every read and
/// write on the socket gives up after the timeout it was opened with. Dropping it closes the
/// session.
pub struct ZkClient {
    stream: TcpStream,
    session_id: i64,
    xid: i32,
}

impl ZkClient {
    /// Connects to `endpoint` (`127.0.0.1:port`) and opens a session. A member that serves no
    /// requests (no quorum, still electing) closes the connection instead: an `Io` error.
    pub fn connect(endpoint: &str, timeout: Duration) -> Result<ZkClient, ZkError> {
        let addr: SocketAddr = endpoint
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{endpoint}: {e}")))?;
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        let mut client = ZkClient {
            stream,
            session_id: 0,
            xid: 0,
        };
        // ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly.
        let mut req = Vec::new();
        put_i32(&mut req, 0);
        put_i64(&mut req, 0);
        put_i32(&mut req, SESSION_TIMEOUT_MS);
        put_i64(&mut req, 0);
        put_bytes(&mut req, &[0; 16]);
        req.push(0);
        client.send(&req)?;
        let frame = client.receive()?;
        let mut reply = Reader::new(&frame);
        let _protocol = reply.i32()?;
        let granted = reply.i32()?;
        client.session_id = reply.i64()?;
        if granted <= 0 {
            // A member that refuses the session (an expired or unknown one) grants 0.
            let refused = format!("{endpoint} refused the session (timeout {granted})");
            return Err(ZkError::Io(io::Error::other(refused)));
        }
        Ok(client)
    }

    /// The session's id, as a node's `ephemeral_owner` names it.
    pub fn session_id(&self) -> i64 {
        self.session_id
    }

    /// The names of `path`'s children, sorted.
    pub fn ls(&mut self, path: &str) -> Result<Vec<String>, ZkError> {
        let mut req = Vec::new();
        put_str(&mut req, path);
        req.push(0); // no watch
        let frame = self.call(GET_CHILDREN, &req)?;
        let mut reply = Reader::new(&frame);
        let n = reply.i32()?;
        let mut children = (0..n.max(0))
            .map(|_| reply.string())
            .collect::<Result<Vec<_>, _>>()?;
        children.sort();
        Ok(children)
    }

    /// `path`'s data and stat, None if there is no such node.
    pub fn get(&mut self, path: &str) -> Result<Option<(Vec<u8>, ZkStat)>, ZkError> {
        let mut req = Vec::new();
        put_str(&mut req, path);
        req.push(0);
        match self.call(GET_DATA, &req) {
            Ok(frame) => {
                let mut reply = Reader::new(&frame);
                let data = reply.bytes()?;
                Ok(Some((data, reply.stat()?)))
            }
            Err(e) if e.is(ZkError::NO_NODE) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `path`'s stat, None if there is no such node.
    pub fn stat(&mut self, path: &str) -> Result<Option<ZkStat>, ZkError> {
        let mut req = Vec::new();
        put_str(&mut req, path);
        req.push(0);
        match self.call(EXISTS, &req) {
            Ok(frame) => Ok(Some(Reader::new(&frame).stat()?)),
            Err(e) if e.is(ZkError::NO_NODE) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates a persistent node open to everyone (`world:anyone`, every permission).
    pub fn create(&mut self, path: &str, data: &[u8]) -> Result<(), ZkError> {
        let mut req = Vec::new();
        put_str(&mut req, path);
        put_bytes(&mut req, data);
        put_i32(&mut req, 1); // one ACL
        put_i32(&mut req, 31); // ALL
        put_str(&mut req, "world");
        put_str(&mut req, "anyone");
        put_i32(&mut req, 0); // persistent
        self.call(CREATE, &req).map(drop)
    }

    /// Replaces `path`'s data, whatever its version; its new stat.
    pub fn set(&mut self, path: &str, data: &[u8]) -> Result<ZkStat, ZkError> {
        let mut req = Vec::new();
        put_str(&mut req, path);
        put_bytes(&mut req, data);
        put_i32(&mut req, -1);
        let frame = self.call(SET_DATA, &req)?;
        Reader::new(&frame).stat()
    }

    /// Deletes `path`, whatever its version.
    pub fn delete(&mut self, path: &str) -> Result<(), ZkError> {
        let mut req = Vec::new();
        put_str(&mut req, path);
        put_i32(&mut req, -1);
        self.call(DELETE, &req).map(drop)
    }

    /// Brings this member up to date with the leader on `path`: a read after it sees every
    /// write committed before.
    pub fn sync(&mut self, path: &str) -> Result<(), ZkError> {
        let mut req = Vec::new();
        put_str(&mut req, path);
        self.call(SYNC, &req).map(drop)
    }

    /// Sends one request and returns the body of its answer (after the reply header).
    fn call(&mut self, op: i32, body: &[u8]) -> Result<Vec<u8>, ZkError> {
        self.xid += 1;
        let mut req = Vec::with_capacity(8 + body.len());
        put_i32(&mut req, self.xid);
        put_i32(&mut req, op);
        req.extend_from_slice(body);
        self.send(&req)?;
        loop {
            let frame = self.receive()?;
            let mut reply = Reader::new(&frame);
            let xid = reply.i32()?;
            let _zxid = reply.i64()?;
            let err = reply.i32()?;
            // Pings (-2) and watch events (-1) are neither asked for nor ours.
            if xid != self.xid {
                continue;
            }
            if err != 0 {
                return Err(ZkError::Code(err));
            }
            return Ok(frame[16..].to_vec());
        }
    }

    fn send(&mut self, payload: &[u8]) -> io::Result<()> {
        let mut frame = Vec::with_capacity(4 + payload.len());
        put_i32(&mut frame, payload.len() as i32);
        frame.extend_from_slice(payload);
        self.stream.write_all(&frame)
    }

    fn receive(&mut self) -> io::Result<Vec<u8>> {
        let closed = |e: io::Error| match e.kind() {
            io::ErrorKind::UnexpectedEof => {
                io::Error::new(e.kind(), "the member closed the connection")
            }
            _ => e,
        };
        let mut len = [0; 4];
        self.stream.read_exact(&mut len).map_err(closed)?;
        let len = i32::from_be_bytes(len);
        if !(0..=16 << 20).contains(&len) {
            return Err(io::Error::other(format!("a frame of {len} bytes")));
        }
        let mut frame = vec![0; len as usize];
        self.stream.read_exact(&mut frame).map_err(closed)?;
        Ok(frame)
    }
}

impl Drop for ZkClient {
    /// Closes the session, so that the member forgets it now and not at its timeout; then waits
    /// for the member to close the connection, which it does right after answering (closed
    /// first from this side, a member logs a warning and a stack trace).
    fn drop(&mut self) {
        let _ = self
            .stream
            .set_read_timeout(Some(Duration::from_millis(500)));
        if self.call(CLOSE_SESSION, &[]).is_ok() {
            let _ = self.stream.read_to_end(&mut Vec::new());
        }
    }
}

fn put_i32(out: &mut Vec<u8>, n: i32) {
    out.extend_from_slice(&n.to_be_bytes());
}

fn put_i64(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(&n.to_be_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_i32(out, bytes.len() as i32);
    out.extend_from_slice(bytes);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, s.as_bytes());
}

/// Reads jute's big-endian records from one frame.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(io::Error::other("a reply cut short"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn i32(&mut self) -> io::Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn i64(&mut self) -> io::Result<i64> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }

    /// A buffer; -1 (null) reads as empty.
    fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let len = self.i32()?;
        Ok(self.take(len.max(0) as usize)?.to_vec())
    }

    fn string(&mut self) -> io::Result<String> {
        Ok(String::from_utf8_lossy(&self.bytes()?).into_owned())
    }

    fn stat(&mut self) -> Result<ZkStat, ZkError> {
        Ok(ZkStat {
            czxid: self.i64()?,
            mzxid: self.i64()?,
            ctime: self.i64()?,
            mtime: self.i64()?,
            version: self.i32()?,
            cversion: self.i32()?,
            aversion: self.i32()?,
            ephemeral_owner: self.i64()?,
            data_length: self.i32()?,
            num_children: self.i32()?,
            pzxid: self.i64()?,
        })
    }
}
