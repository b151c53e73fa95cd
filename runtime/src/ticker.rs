//! The epoch ticker: a thread that advances the engines' epoch every [`RuntimeConfig::epoch_tick`] while
//! invocations run, so that a running guest yields to the executor and meets its deadline, and that parks once
//! none has run for [`PARK_AFTER`]. A ticker that never parked woke a thousand times a second in an idle gateway,
//! a few per cent of a core for nothing; one that parked whenever no invocation ran served a glue-only app
//! (photo-crops) 13–20% less on 2 cores (2026-11-28): under load it keeps ticking as before.
//!
//! [`RuntimeConfig::epoch_tick`]: crate::RuntimeConfig::epoch_tick

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::Duration;

use wasmtime::Engine;

/// The ticker's thread, stopped once the runtime and every function loaded from it are gone.
pub(crate) struct Ticker {
    shared: Arc<Shared>,
    thread: Thread,
}

/// What the ticker's thread and the invocations share.
struct Shared {
    /// Invocations holding a [`Running`].
    running: AtomicUsize,
    stop: AtomicBool,
}

/// An invocation in progress: the ticker ticks while one is held.
pub(crate) struct Running {
    ticker: Arc<Ticker>,
}

/// How long the ticker goes on ticking after the last invocation ended, before it parks.
pub(crate) const PARK_AFTER: Duration = Duration::from_secs(1);

impl Ticker {
    /// A ticker of `engines`' epochs every `tick`, parked until the first invocation runs, and again once none
    /// has run for `park_after`.
    pub(crate) fn start(engines: Vec<Engine>, tick: Duration, park_after: Duration) -> std::io::Result<Arc<Ticker>> {
        let shared = Arc::new(Shared { running: AtomicUsize::new(0), stop: AtomicBool::new(false) });
        let on_thread = shared.clone();
        let idle_ticks = (park_after.as_secs_f64() / tick.as_secs_f64().max(1e-6)).ceil() as u64;
        let thread = std::thread::Builder::new().name("jig-epoch".into()).spawn(move || {
            let mut idle = idle_ticks; // ticks since one with an invocation running: parked from the start
            while !on_thread.stop.load(Ordering::Acquire) {
                if on_thread.running.load(Ordering::Acquire) > 0 {
                    idle = 0;
                } else if idle >= idle_ticks {
                    // An `unpark` since the load above makes this return at once.
                    std::thread::park();
                    continue;
                } else {
                    idle += 1;
                }
                std::thread::sleep(tick);
                engines.iter().for_each(Engine::increment_epoch);
            }
        })?;
        Ok(Arc::new(Ticker { shared, thread: thread.thread().clone() }))
    }

    /// Held for as long as an invocation runs: the first one wakes the ticker.
    pub(crate) fn running(self: &Arc<Self>) -> Running {
        if self.shared.running.fetch_add(1, Ordering::AcqRel) == 0 {
            self.thread.unpark();
        }
        Running { ticker: self.clone() }
    }

    /// Whether no invocation holds the ticker (for tests).
    #[cfg(test)]
    fn idle(&self) -> bool {
        self.shared.running.load(Ordering::Acquire) == 0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.ticker.shared.running.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The epoch `engine` is at: a store whose deadline is one epoch past now traps (or not) after `wait`.
    fn advances(engine: &Engine, ticker: &Arc<Ticker>, running: bool, wait: Duration) -> bool {
        let mut store = wasmtime::Store::new(engine, ());
        store.set_epoch_deadline(1);
        let _held = running.then(|| ticker.running());
        std::thread::sleep(wait);
        let module = wasmtime::Module::new(engine, "(module (func (export \"f\")))").unwrap();
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
        let f = instance.get_typed_func::<(), ()>(&mut store, "f").unwrap();
        f.call(&mut store, ()).is_err()
    }

    #[test]
    fn the_epoch_advances_while_an_invocation_runs_and_not_while_none_does() {
        let engine = Engine::new(wasmtime::Config::new().epoch_interruption(true)).unwrap();
        let ticker = Ticker::start(vec![engine.clone()], Duration::from_millis(1), Duration::from_millis(50)).unwrap();
        assert!(!advances(&engine, &ticker, false, Duration::from_millis(50)), "the epoch moved with nothing running");
        assert!(advances(&engine, &ticker, true, Duration::from_millis(50)), "the epoch stood still while running");
        assert!(ticker.idle(), "the last invocation's end leaves the ticker idle");
        // Parked again, 50 ms after the end (and however late the thread is scheduled): the epoch stands still.
        std::thread::sleep(Duration::from_millis(300));
        assert!(!advances(&engine, &ticker, false, Duration::from_millis(50)), "the epoch moved after the end");
    }
}
