//! A pipelined load generator over the wire protocol, for benchmarks: connections that each
//! keep a window of calls in flight (closed loop) or send on a schedule at a given rate (open
//! loop), with every call's latency in an hdrhistogram.
//!
//! Unlike [`crate::Client`] it does no routing and no retries: it talks to one node, which
//! must be the primary, and an error ends its connection. Each connection has a receiver
//! thread, which reads replies and, in closed loop, sends the next calls at once; one pacer
//! thread for all of them starts the closed loop and sends on schedule in open loop. (Socket
//! read timeouts are rounded to the kernel's jiffies, so pacing cannot ride on them.) In open
//! loop a call's latency counts from its schedule, so a late send is charged to the system
//! (no coordinated omission).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tandem_wire::{Frame, FrameBuffer, Hello, PeerKind, encode_call, encode_hello};

/// The open-loop pacer's step (see `LoadClients::pace`).
const PACING_QUANTUM: Duration = Duration::from_micros(200);

/// The client ids the load's connections say hello with: 1000 and up.
const CLIENT_ID_FIRST: u64 = 1000;

/// Why the load's connections could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot connect to {address}: {source}")]
    Connect {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("connection {index}: {source}")]
    Setup {
        index: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the load's pacer thread: {0}")]
    Pacer(#[source] std::io::Error),
}

/// A generator of calls: writes the next call's arguments and returns its procedure.
pub type CallSource = Box<dyn FnMut(&mut Vec<u8>) -> u16 + Send>;

/// Pipelined client connections to one node.
pub struct LoadClients {
    active: AtomicBool,
    replies: AtomicU64,
    outstanding: AtomicU64,
    /// 0: closed loop with `window` calls in flight per connection; otherwise an open-loop
    /// rate for all connections together, in calls per second.
    rate_per_s: AtomicU64,
    latency_ns: Mutex<Histogram<u64>>,
    address: SocketAddr,
    connections: u32,
    window: u32,
    sources: Mutex<Vec<CallSource>>,
    welcomed: AtomicBool,
    /// Set when the benchmark ends, so closed connections are not reported as errors.
    stopping: AtomicBool,
}

impl std::fmt::Debug for LoadClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadClients")
            .field("address", &self.address)
            .field("connections", &self.connections)
            .field("window", &self.window)
            .field("replies", &self.replies())
            .field("outstanding", &self.outstanding())
            .finish_non_exhaustive()
    }
}

impl LoadClients {
    /// Connections to `address`, one per source, each keeping `window` calls in flight in
    /// closed loop. Nothing connects before [`LoadClients::connect`], and nothing is sent
    /// before [`LoadClients::set_active`].
    pub fn new(address: SocketAddr, window: u32, sources: Vec<CallSource>) -> Arc<LoadClients> {
        assert!(
            window >= 1,
            "a closed loop keeps at least one call in flight"
        );
        Arc::new(LoadClients {
            active: AtomicBool::new(false),
            replies: AtomicU64::new(0),
            outstanding: AtomicU64::new(0),
            rate_per_s: AtomicU64::new(0),
            latency_ns: Mutex::new(Histogram::new(3).expect("3 significant digits are valid")),
            address,
            connections: sources.len() as u32,
            window,
            sources: Mutex::new(sources),
            welcomed: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
        })
    }

    /// Sends calls while `active` (after the node's Welcome), else lets those in flight end.
    pub fn set_active(&self, active: bool) {
        self.active.store(active, Ordering::Release);
    }

    /// 0: closed loop (the default); otherwise an open-loop rate for all connections
    /// together, in calls per second.
    pub fn set_rate_per_s(&self, rate_per_s: u64) {
        self.rate_per_s.store(rate_per_s, Ordering::Release);
    }

    /// Replies received so far (committed, rolled back or refused).
    pub fn replies(&self) -> u64 {
        self.replies.load(Ordering::Relaxed)
    }

    /// Calls sent and not yet answered.
    pub fn outstanding(&self) -> u64 {
        self.outstanding.load(Ordering::Acquire)
    }

    /// The latencies of the calls that committed or rolled back since the last reset, in
    /// nanoseconds (a connection adds its own every 4,096 replies and whenever it drains).
    pub fn latency_ns(&self) -> Histogram<u64> {
        self.latency_ns.lock().expect("not poisoned").clone()
    }

    pub fn reset_latency(&self) {
        self.latency_ns.lock().expect("not poisoned").reset();
    }

    /// The load ends: connections that close from now on are not reported as errors.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Opens the connections. Each has a receiver thread, which reads replies and, in closed
    /// loop, sends the next calls at once. One pacer thread for all of them starts the closed
    /// loop and sends on schedule in open loop. (Socket read timeouts are rounded to the
    /// kernel's jiffies, so pacing cannot ride on them.)
    pub fn connect(self: &Arc<Self>) -> Result<(), LoadError> {
        let sources: Vec<CallSource> =
            std::mem::take(&mut *self.sources.lock().expect("not poisoned"));
        let mut connections = Vec::new();
        for (index, source) in sources.into_iter().enumerate() {
            let setup = |source| LoadError::Setup { index, source };
            let mut stream =
                TcpStream::connect(self.address).map_err(|source| LoadError::Connect {
                    address: self.address,
                    source,
                })?;
            stream.set_nodelay(true).map_err(setup)?;
            let mut hello = Vec::new();
            encode_hello(
                &mut hello,
                &Hello::new(PeerKind::Client, CLIENT_ID_FIRST + index as u64, 0),
            );
            stream.write_all(&hello).map_err(setup)?;
            let writer = stream.try_clone().map_err(setup)?;
            let connection = Arc::new(Connection {
                sender: Mutex::new(Sender {
                    stream: writer,
                    source,
                    seq: 0,
                    args: Vec::new(),
                    out: Vec::new(),
                }),
                in_flight: Mutex::new(VecDeque::new()),
            });
            let (clients, receiving) = (Arc::clone(self), Arc::clone(&connection));
            thread::Builder::new()
                .name(format!("load-client-{index}"))
                .spawn(move || {
                    if let Err(err) = clients.receive(stream, &receiving)
                        && !clients.stopping.load(Ordering::Acquire)
                    {
                        eprintln!("load client {index}: {err}");
                    }
                })
                .map_err(setup)?;
            connections.push(connection);
        }
        let clients = Arc::clone(self);
        thread::Builder::new()
            .name("load-pacer".into())
            .spawn(move || clients.pace(&connections))
            .map_err(LoadError::Pacer)?;
        Ok(())
    }

    /// Sends `count` calls in one write; the i-th counts its latency from `started(i)`.
    fn send(
        &self,
        connection: &Connection,
        count: usize,
        started: impl Fn(usize) -> Instant,
    ) -> Result<(), String> {
        let mut sender = connection.sender.lock().expect("not poisoned");
        let sender = &mut *sender;
        sender.out.clear();
        for _ in 0..count {
            sender.seq += 1;
            let proc_id = (sender.source)(&mut sender.args);
            encode_call(&mut sender.out, sender.seq, proc_id, None, &sender.args);
        }
        {
            let mut in_flight = connection.in_flight.lock().expect("not poisoned");
            in_flight.extend((0..count).map(started));
        }
        self.outstanding.fetch_add(count as u64, Ordering::AcqRel);
        sender
            .stream
            .write_all(&sender.out)
            .map_err(|err| err.to_string())
    }

    /// Starts the closed loop when the load turns on; sends on schedule in open loop, each
    /// connection carrying an equal share of the rate.
    fn pace(&self, connections: &[Arc<Connection>]) {
        let mut next_send = vec![Instant::now(); connections.len()];
        loop {
            if self.stopping.load(Ordering::Acquire) {
                return;
            }
            let active = self.active.load(Ordering::Acquire);
            let rate = self.rate_per_s.load(Ordering::Acquire);
            if !active || !self.welcomed.load(Ordering::Acquire) {
                next_send.fill(Instant::now());
                thread::sleep(Duration::from_micros(500));
                continue;
            }
            if rate == 0 {
                for connection in connections {
                    let idle = connection
                        .in_flight
                        .lock()
                        .expect("not poisoned")
                        .is_empty();
                    let now = Instant::now();
                    if idle
                        && self
                            .send(connection, self.window as usize, |_| now)
                            .is_err()
                    {
                        return;
                    }
                }
                thread::sleep(Duration::from_millis(1));
                continue;
            }
            // Open loop: each call leaves on its schedule, and its latency counts from the
            // schedule, so a late send is charged to the system (no coordinated omission).
            let interval = Duration::from_secs_f64(f64::from(self.connections) / rate as f64);
            let now = Instant::now();
            for (connection, next) in connections.iter().zip(&mut next_send) {
                if *next + Duration::from_millis(100) < now {
                    *next = now;
                }
                let mut due = 0usize;
                while *next + interval * due as u32 <= now {
                    due += 1;
                }
                let first = *next;
                if due > 0
                    && self
                        .send(connection, due, |i| first + interval * i as u32)
                        .is_err()
                {
                    return;
                }
                *next += interval * due as u32;
            }
            // Wake at most every PACING_QUANTUM: each wake is a send per connection, and on a
            // 2-core machine the load generator competes with the system it measures. Calls
            // that fall due between wakes wait for the next one, and that wait counts in their
            // latency.
            let earliest = next_send.iter().min().copied().unwrap_or(now);
            thread::sleep(
                earliest
                    .saturating_duration_since(Instant::now())
                    .max(PACING_QUANTUM),
            );
        }
    }

    fn receive(&self, mut stream: TcpStream, connection: &Connection) -> Result<(), String> {
        let mut buffer = FrameBuffer::new(tandem_wire::MAX_FRAME_LEN_DEFAULT);
        let mut histogram = Histogram::<u64>::new(3).expect("valid");
        loop {
            match stream.read(buffer.spare()) {
                Ok(0) => return Err("the primary closed the connection".into()),
                Ok(n) => buffer.filled(n),
                Err(err) => return Err(err.to_string()),
            }
            let mut answered = 0usize;
            let now = Instant::now();
            while let Some(frame) = buffer.next_frame().map_err(|err| err.to_string())? {
                match frame {
                    Frame::Welcome(_) => self.welcomed.store(true, Ordering::Release),
                    Frame::Reply(_) => {
                        let started = connection
                            .in_flight
                            .lock()
                            .expect("not poisoned")
                            .pop_front()
                            .ok_or("a reply nobody asked for")?;
                        let latency = now.duration_since(started).as_nanos().max(1) as u64;
                        let _ = histogram.record(latency);
                        answered += 1;
                    }
                    Frame::Error(err) => return Err(format!("error frame: {}", err.message)),
                    _ => return Err("unexpected frame".into()),
                }
            }
            if answered == 0 {
                continue;
            }
            self.replies.fetch_add(answered as u64, Ordering::Relaxed);
            self.outstanding
                .fetch_sub(answered as u64, Ordering::AcqRel);
            let closed_loop = self.rate_per_s.load(Ordering::Acquire) == 0;
            if closed_loop && self.active.load(Ordering::Acquire) {
                let now = Instant::now();
                self.send(connection, answered, |_| now)?;
            }
            if histogram.len() > 4096 || self.outstanding.load(Ordering::Acquire) == 0 {
                let _ = self
                    .latency_ns
                    .lock()
                    .expect("not poisoned")
                    .add(&histogram);
                histogram.reset();
            }
        }
    }
}

/// One client connection's sending half and the start times of its calls in flight.
struct Connection {
    sender: Mutex<Sender>,
    in_flight: Mutex<VecDeque<Instant>>,
}

struct Sender {
    stream: TcpStream,
    source: CallSource,
    seq: u64,
    args: Vec<u8>,
    out: Vec<u8>,
}

impl Drop for LoadClients {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Release);
    }
}
