//! The channel a parent and its worker take turns on once the model is loaded: one frame at a time in each
//! direction, in a region both map, so that a batch's request and answer cost no system call while the side
//! waiting for them polls. A round trip of two small frames took 0.5 µs this way against 5.5 µs through the
//! socket (8.5 and 2.9 µs beside a thread that keeps a core busy), on the 2-vCPU machine of BENCHMARKS.md.
//!
//! The region has two halves, one per direction, each a [`Header`] (a sequence number the sender moves, the
//! frame's length and when it was sent, and a flag the receiver raises before it sleeps) and a body holding the
//! frame (the bincode encoding of [`super::protocol`], without the socket's length prefix). The two sides take
//! turns — the parent sends a request only after the answer to the last one, and the worker answers only the
//! request it has read — so a body is never written while its reader reads it.
//!
//! **Waiting.** The receiver polls its half's sequence number for a while (at least [`SPIN`]), yielding its
//! core between polls to whichever thread has work (the sender may be running on it); then it raises its flag
//! and blocks reading the socket. A sender that finds the flag raised writes one byte to the socket, the doorbell.
//! Both sides use sequentially consistent operations on the flag and the sequence number, so either the sleeper
//! sees the frame or the sender sees the flag. The socket stays the liveness signal: when a peer dies the
//! kernel closes it, and a sleeping receiver reads the end of the stream. A receiver that polled but found a frame
//! only long after it was sent ([`STARVED`]), twice in a row, shares its core with a thread that does not yield,
//! and sleeps at once for a while ([`STARVED_FOR`], longer each time it is found starved again) instead of polling.

use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::protocol::{decode, send_all};
use crate::shm::Shm;

/// How long a receiver polls for the next frame before it sleeps, at least: the next batch of a busy instance
/// comes within this. Waking from sleep costs each side 10–20 µs on a VM.
pub const SPIN: Duration = Duration::from_micros(100);

/// A polling receiver that finds a frame this long after it was sent waited for its core behind a thread that
/// does not yield (ONNX Runtime's intra-op threads spin for tens of milliseconds after a run): polling, it sees
/// each frame only when the scheduler next takes that thread off the core (4 ms a batch in the worker bench,
/// against 0.1 ms asleep, woken by the doorbell). Found polling otherwise, a frame is a few microseconds old.
const STARVED: Duration = Duration::from_micros(250);

/// Late frames in a row that show a receiver starved (one alone may be an interrupt, or the VM's host).
const LATE_IN_A_ROW: u32 = 2;

/// How long a starved receiver first sleeps at once for each frame, before it polls again; each time it is found
/// starved again on polling, twice as long, up to [`STARVED_FOR_AT_MOST`]. Starvation is mostly brief: on the
/// 2-vCPU machine of BENCHMARKS.md the scheduler moved the polling parent onto the core of ONNX Runtime's
/// spinning thread, and off again, about every 80 ms, and a parent that then slept for a whole second paid a
/// doorbell's wake-up on every batch of it.
const STARVED_FOR: Duration = Duration::from_millis(10);

/// The longest a starved receiver sleeps before it polls again: a thread that stays beside a spinner re-polls
/// (two frames a scheduler tick late) once a second.
const STARVED_FOR_AT_MOST: Duration = Duration::from_secs(1);

/// Frames in a row found polling in time after which a receiver is no longer taken to be starved: its next
/// sleep, if any, starts at [`STARVED_FOR`] again.
const FED_IN_A_ROW: u32 = 64;

/// Each direction's share of the region.
const HALF: usize = 1 << 18;

/// The header's share of a half: a cache line, which the body's first bytes then do not share.
const HEADER: usize = 64;

/// The largest frame a mailbox carries: requests and answers name a few tensors and regions, a few hundred bytes.
pub const CAPACITY: usize = HALF - HEADER;

/// The start of a half. Every access to it, on both sides, is atomic.
#[repr(C)]
struct Header {
    /// Moved by the sender after each frame.
    seq: AtomicU32,
    /// The frame's length in bytes.
    len: AtomicU32,
    /// Raised by the receiver before it sleeps on the socket; taken down by whoever finds it raised.
    asleep: AtomicU32,
    /// When the frame was sent: the system's monotonic clock, in nanoseconds.
    sent: AtomicU64,
}

/// One side's end of a worker's channel.
#[derive(Debug)]
pub struct Mailbox {
    shm: Shm,
    /// Where this side's outgoing half starts.
    outgoing: usize,
    /// Where the peer's half starts.
    incoming: usize,
    /// The incoming sequence number of the last frame read.
    seen: u32,
    /// Frames in a row found polling [`STARVED`] after they were sent.
    late: u32,
    /// Frames in a row found polling in time.
    fed: u32,
    /// How long this side sleeps at once when next found starved, in nanoseconds.
    starved_for: u64,
    /// When this side may poll again (the monotonic clock, as [`monotonic_ns`]): until then it sleeps for frames
    /// at once, after [`LATE_IN_A_ROW`] late ones.
    poll_from: u64,
}

/// How polling for a frame ended.
enum Polled {
    /// The sequence number moved to `seq`; `late` when the frame had waited [`STARVED`] to be seen.
    Moved { seq: u32, late: bool },
    /// Nothing came within the time given.
    Quiet,
}

impl Mailbox {
    /// The parent's end: a new region, whose path the worker is given to open.
    pub fn create() -> io::Result<Mailbox> {
        Ok(Mailbox::new(Shm::create(2 * HALF)?, 0, HALF))
    }

    /// The worker's end of the parent's region at `path`.
    pub fn open(path: &Path) -> io::Result<Mailbox> {
        let mut mailbox = Mailbox::new(Shm::open(path, 2 * HALF as u64)?, HALF, 0);
        mailbox.seen = mailbox.header(mailbox.incoming).seq.load(Ordering::SeqCst);
        Ok(mailbox)
    }

    fn new(shm: Shm, outgoing: usize, incoming: usize) -> Mailbox {
        let starved_for = STARVED_FOR.as_nanos() as u64;
        Mailbox { shm, outgoing, incoming, seen: 0, late: 0, fed: 0, starved_for, poll_from: 0 }
    }

    /// The region's name, until [`Mailbox::unlink`].
    pub fn path(&self) -> Option<&Path> {
        self.shm.path()
    }

    /// Remove the region's name once the worker has opened it.
    pub fn unlink(&mut self) {
        self.shm.unlink();
    }

    fn header(&self, half: usize) -> &Header {
        // SAFETY: the region is 2 × HALF bytes, page-aligned, and mapped as long as `self` lives; a half starts
        // with a `Header`, atomics that both processes only ever access atomically.
        unsafe { &*self.shm.as_ptr().add(half).cast::<Header>() }
    }

    /// Put `msg` in the outgoing half, and ring the doorbell on `socket` if the peer sleeps.
    pub fn send<T: Serialize>(&mut self, msg: &T, socket: &UnixStream) -> io::Result<()> {
        // SAFETY: the body lies within the region; the peer reads it only after the sequence number moves below,
        // and has finished reading the last frame (the two sides take turns).
        let body = unsafe { std::slice::from_raw_parts_mut(self.shm.as_ptr().add(self.outgoing + HEADER), CAPACITY) };
        let len = bincode::serde::encode_into_slice(msg, body, bincode::config::standard()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("cannot put a message in the {CAPACITY}-byte mailbox: {e}"),
            )
        })?;
        let header = self.header(self.outgoing);
        header.len.store(len as u32, Ordering::Relaxed);
        header.sent.store(monotonic_ns(), Ordering::Relaxed);
        header.seq.fetch_add(1, Ordering::SeqCst);
        if header.asleep.swap(0, Ordering::SeqCst) != 0 {
            send_all(socket, &[1])?;
        }
        Ok(())
    }

    /// The peer's next frame, polled for up to `spin` and then slept for; `Ok(None)` when the peer closed the
    /// socket first. A frame that does not decode, or a length beyond the body, is `InvalidData`.
    pub fn receive<T: DeserializeOwned>(
        &mut self,
        socket: &mut impl Read,
        buf: &mut Vec<u8>,
        spin: Duration,
    ) -> io::Result<Option<T>> {
        let Some(seq) = self.wait(socket, spin)? else {
            return Ok(None);
        };
        self.seen = seq;
        let len = self.header(self.incoming).len.load(Ordering::Relaxed) as usize;
        if len > CAPACITY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a frame of {len} bytes exceeds the {CAPACITY}-byte mailbox"),
            ));
        }
        buf.clear();
        buf.resize(len, 0);
        // SAFETY: within the region. Copied out before decoding, so that what is decoded cannot change under it.
        unsafe { std::ptr::copy_nonoverlapping(self.shm.as_ptr().add(self.incoming + HEADER), buf.as_mut_ptr(), len) };
        decode(buf).map(Some)
    }

    /// The incoming sequence number once it has moved past the last frame read, or `None` if the peer closed the
    /// socket first. Polls for up to `spin` (unless starved lately), then sleeps.
    fn wait(&mut self, socket: &mut impl Read, spin: Duration) -> io::Result<Option<u32>> {
        let started = monotonic_ns();
        let spin = if started < self.poll_from { Duration::ZERO } else { spin };
        if let Polled::Moved { seq, late } = self.poll(started, spin) {
            self.starving(late);
            return Ok(Some(seq));
        }
        let header = self.header(self.incoming);
        let moved = || Some(header.seq.load(Ordering::SeqCst)).filter(|&seq| seq != self.seen);
        header.asleep.store(1, Ordering::SeqCst);
        if let Some(seq) = moved() {
            // The frame came as the flag went up. If the sender took the flag down, its doorbell is on the way:
            // read it now, so that it does not wake the next sleep early.
            if header.asleep.swap(0, Ordering::SeqCst) == 0 && !doorbell(socket)? {
                return Ok(None);
            }
            return Ok(Some(seq));
        }
        if !doorbell(socket)? {
            return Ok(None);
        }
        moved().map(Some).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "a doorbell without a frame"))
    }

    /// Count a frame found polling, `late` or in time: [`LATE_IN_A_ROW`] late ones start a sleep at once of
    /// `starved_for`, which doubles each time up to [`STARVED_FOR_AT_MOST`], until [`FED_IN_A_ROW`] frames in time.
    fn starving(&mut self, late: bool) {
        if !late {
            self.late = 0;
            self.fed = self.fed.saturating_add(1);
            if self.fed == FED_IN_A_ROW {
                self.starved_for = STARVED_FOR.as_nanos() as u64;
            }
            return;
        }
        self.fed = 0;
        self.late += 1;
        if self.late == LATE_IN_A_ROW {
            self.late = 0;
            self.poll_from = monotonic_ns() + self.starved_for;
            self.starved_for = (self.starved_for * 2).min(STARVED_FOR_AT_MOST.as_nanos() as u64);
        }
    }

    /// Poll the incoming sequence number for up to `spin` from `started` (as [`monotonic_ns`]), giving the core
    /// away between polls: when the two sides share a core, the sender runs only then (polling in bursts of 64
    /// between yields made each hand-over 1.5 µs slower in the worker bench).
    fn poll(&self, started: u64, spin: Duration) -> Polled {
        let header = self.header(self.incoming);
        let spin = u64::try_from(spin.as_nanos()).unwrap_or(u64::MAX);
        let mut now = started;
        loop {
            let seq = header.seq.load(Ordering::SeqCst);
            if seq != self.seen {
                // A frame sent before the wait began is not late: the receiver was busy, not starved.
                let waited = now.saturating_sub(header.sent.load(Ordering::Relaxed).max(started));
                return Polled::Moved { seq, late: waited > STARVED.as_nanos() as u64 };
            }
            if now - started >= spin {
                return Polled::Quiet;
            }
            std::thread::yield_now();
            now = monotonic_ns();
        }
    }
}

/// The system's monotonic clock (`CLOCK_MONOTONIC`, which `Instant` reads too), in nanoseconds: comparable
/// between processes, as `Instant`s are not.
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Read one doorbell byte: `false` at the end of the stream.
fn doorbell(socket: &mut impl Read) -> io::Result<bool> {
    let mut byte = [0u8];
    loop {
        match socket.read(&mut byte) {
            Ok(0) => return Ok(false),
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn pair() -> (Mailbox, UnixStream, Mailbox, UnixStream) {
        let mut parent = Mailbox::create().unwrap();
        let worker = Mailbox::open(parent.path().unwrap()).unwrap();
        parent.unlink();
        let (a, b) = UnixStream::pair().unwrap();
        // A doorbell that never comes fails the test instead of hanging it.
        for socket in [&a, &b] {
            socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        }
        (parent, a, worker, b)
    }

    #[test]
    fn frames_go_both_ways_many_times() {
        let (mut parent, mut ps, mut worker, mut ws) = pair();
        let mut buf = Vec::new();
        for k in 0..1000u64 {
            parent.send(&(k, format!("request {k}")), &ps).unwrap();
            let got: (u64, String) = worker.receive(&mut ws, &mut buf, SPIN).unwrap().unwrap();
            assert_eq!(got, (k, format!("request {k}")));
            worker.send(&(k + 1), &ws).unwrap();
            assert_eq!(parent.receive::<u64>(&mut ps, &mut buf, SPIN).unwrap(), Some(k + 1));
        }
    }

    #[test]
    fn sleeping_receivers_are_woken_by_the_doorbell_and_take_every_frame_once() {
        let (mut parent, mut ps, mut worker, mut ws) = pair();
        // Past SPIN the receiver sleeps on the socket: every third frame on each side comes after that.
        let pause = |k: u32| {
            if k.is_multiple_of(3) {
                std::thread::sleep(SPIN * 5);
            }
        };
        let echo = std::thread::spawn(move || {
            let mut buf = Vec::new();
            while let Some(k) = worker.receive::<u32>(&mut ws, &mut buf, SPIN).unwrap() {
                pause(k + 1);
                worker.send(&(k * 2), &ws).unwrap();
            }
            ws
        });
        let mut buf = Vec::new();
        for k in 0..30u32 {
            pause(k);
            parent.send(&k, &ps).unwrap();
            assert_eq!(parent.receive::<u32>(&mut ps, &mut buf, SPIN).unwrap(), Some(k * 2));
        }
        ps.shutdown(std::net::Shutdown::Write).unwrap();
        let mut ws = echo.join().unwrap();
        for socket in [&mut ps, &mut ws] {
            socket.set_nonblocking(true).unwrap();
            let mut rest = [0u8; 8];
            assert!(!matches!(socket.read(&mut rest), Ok(n) if n > 0), "no doorbell byte was left unread");
        }
    }

    /// A receiver on the core of a thread that never yields (as ONNX Runtime's spinning intra-op threads do) sees
    /// each frame only when the scheduler takes that thread off the core; after two such late frames it stops
    /// polling (here for 10 s) and sleeps until the doorbell.
    #[test]
    fn a_receiver_starved_by_a_thread_that_does_not_yield_sleeps_instead_of_polling() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        let core = crate::device::cpu_cores()[0];
        let stop = Arc::new(AtomicBool::new(false));
        let spinner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                crate::device::pin_current_thread(&[core]).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let (mut parent, ps, mut worker, mut ws) = pair();
        let receiver = std::thread::spawn(move || {
            crate::device::pin_current_thread(&[core]).unwrap();
            let mut buf = Vec::new();
            while worker.receive::<u32>(&mut ws, &mut buf, Duration::from_secs(10)).unwrap().is_some() {}
        });
        // A frame every 2 ms until the receiver is seen asleep (it polls for 10 s otherwise), then one to wake it.
        let asleep = (0..1000u32).find(|&k| {
            std::thread::sleep(Duration::from_millis(2));
            let asleep = parent.header(parent.outgoing).asleep.load(Ordering::SeqCst) != 0;
            parent.send(&k, &ps).unwrap();
            asleep
        });
        drop((parent, ps));
        let received = receiver.join();
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        received.unwrap();
        assert!(asleep.is_some(), "the starved receiver kept polling through 1000 frames");
    }

    /// Found starved again and again, a receiver sleeps twice as long each time, up to a second; once it has
    /// found [`FED_IN_A_ROW`] frames in time, it sleeps [`STARVED_FOR`] again when next starved.
    #[test]
    fn a_receiver_starved_again_sleeps_longer_and_one_fed_again_starts_short() {
        let (mut parent, ..) = pair();
        // Starve `m` (two late frames) and check how long it then sleeps at once, give or take a slow clock read.
        let sleeps = |m: &mut Mailbox, ms: u64, why: &str| {
            let before = monotonic_ns();
            (0..LATE_IN_A_ROW).for_each(|_| m.starving(true));
            let slept = Duration::from_nanos(m.poll_from - before);
            let want = Duration::from_millis(ms);
            assert!(want <= slept && slept < want + Duration::from_millis(50), "{why}: slept {slept:?}, not {want:?}");
        };
        for (k, ms) in [10, 20, 40, 80, 160, 320, 640, 1000, 1000].into_iter().enumerate() {
            sleeps(&mut parent, ms, &format!("starvation {k}"));
        }
        (0..FED_IN_A_ROW - 1).for_each(|_| parent.starving(false));
        sleeps(&mut parent, 1000, "one frame short of fed: still starved");
        (0..FED_IN_A_ROW).for_each(|_| parent.starving(false));
        sleeps(&mut parent, 10, "fed again");
        parent.starving(true);
        parent.starving(false);
        let before = parent.poll_from;
        parent.starving(true);
        assert_eq!(parent.poll_from, before, "late frames count only in a row");
    }

    #[test]
    fn a_peer_that_closes_its_socket_ends_a_sleeping_wait() {
        let (parent, ps, mut worker, mut ws) = pair();
        let waiting = std::thread::spawn(move || worker.receive::<u32>(&mut ws, &mut Vec::new(), SPIN).unwrap());
        std::thread::sleep(SPIN * 10);
        drop((parent, ps));
        assert_eq!(waiting.join().unwrap(), None);
    }

    #[test]
    fn oversized_and_malformed_frames_are_errors() {
        let (mut parent, mut ps, mut worker, mut ws) = pair();
        let err = parent.send(&vec![0u8; CAPACITY], &ps).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");

        // A peer that announces more than the body holds.
        worker.header(worker.outgoing).len.store(CAPACITY as u32 + 1, Ordering::SeqCst);
        worker.header(worker.outgoing).seq.fetch_add(1, Ordering::SeqCst);
        let err = parent.receive::<u32>(&mut ps, &mut Vec::new(), SPIN).unwrap_err();
        assert!(err.to_string().contains("exceeds"), "{err}");

        // Bytes that are not a frame of the expected type.
        parent.send(&u64::MAX, &ps).unwrap();
        let err = worker.receive::<bool>(&mut ws, &mut Vec::new(), SPIN).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");

        // A doorbell with no frame behind it.
        (&ps).write_all(&[1]).unwrap();
        let err = worker.receive::<u32>(&mut ws, &mut Vec::new(), SPIN).unwrap_err();
        assert!(err.to_string().contains("doorbell"), "{err}");
    }
}
