//! # jig-runtime
//!
//! The function runtime: runs glue — WebAssembly components targeting the `jig:function` world — once per
//! request, sandboxed.
//!
//! * **Compile once.** [`Runtime::load`] compiles a component with Cranelift and caches the compiled
//!   artifact on disk under the SHA-256 of its bytes (and the engine's compatibility hash), so a restart
//!   or a second deploy of the same glue skips compilation. Linking is checked at load time
//!   ([`wasmtime::component::InstancePre`]): a component importing anything the host does not provide is
//!   refused then, not at the first request.
//! * **Fresh instance per invocation.** [`Function::invoke`] instantiates into a new store from the pooling
//!   allocator (a few microseconds), so no state leaks between requests and a crashed invocation cannot
//!   affect the next one.
//! * **Limits.** Each store has a memory limit ([`FunctionLimits::memory`]); the request's deadline is
//!   enforced by epoch interruption while the guest computes (an epoch ticks every
//!   [`RuntimeConfig::epoch_tick`] while invocations run; at each tick a running guest yields to the
//!   executor, and traps once the deadline passed) and by a timer while it waits on the host (`infer`).
//! * **Bounded concurrency.** At most [`RuntimeConfig::max_invocations`] invocations hold an instance at once;
//!   more wait for a slot (until their deadline) instead of failing.
//! * **Memory that falls back after a burst.** Instances come from two pools: the first
//!   [`RuntimeConfig::resident_slots`] invocations at once get slots that keep their linear memory resident
//!   between invocations (no page faults for the next one); invocations beyond them get slots that hand their
//!   memory back to the OS when they end. So what stays resident once a load is over is bounded by
//!   `resident_slots`, not by the most invocations that ever ran at once.
//! * **Host calls.** `infer` is async and goes to the function's [`ModelHost`]; many concurrent invocations'
//!   calls can therefore form one batch. `emit`ted payloads are collected into the [`Outcome`].

#![deny(missing_docs)]

mod cache;
mod error;
mod host;
pub mod models;
mod ticker;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jig_wire::Spare;
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, UpdateDeadline};
use wasmtime_wasi::WasiView;

pub use error::{FunctionError, InvokeError, LoadError};
pub use models::{InferError, InferRequest, ModelHost, NoModels};

use host::{DeadlinePassed, FunctionPre, HostLimitExceeded, InvocationState};

/// Settings of a [`Runtime`], shared by all functions it loads.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Where compiled components are cached; `None` compiles every load.
    pub cache_dir: Option<PathBuf>,
    /// Invocations that may run at once, each in a WebAssembly instance of the pooling allocator's slots.
    /// Each slot reserves address space, not memory.
    pub max_invocations: u32,
    /// The largest memory limit a function may ask for.
    pub max_memory: usize,
    /// Bytes of each linear memory of a resident slot ([`RuntimeConfig::resident_slots`]) kept resident and
    /// zeroed with `memset` between instances instead of being returned to the OS. A request that moves a few
    /// megabytes (an image) into its instance then pays no page faults: 8 MiB covers a 1920×1080 RGB frame's
    /// worth of guest heap. Costs up to this much resident memory per resident slot once used.
    pub memory_keep_resident: usize,
    /// Instance slots that keep [`RuntimeConfig::memory_keep_resident`] of their memory resident between
    /// invocations (at least one, at most `max_invocations`). Invocations beyond this many at once run in
    /// slots of a second pool that give all their memory back to the OS when the invocation ends (the next
    /// one there pays the page faults). wasmtime 48 never releases what a pooled slot keeps resident, so without
    /// the second pool every slot used at the peak of a burst (one per request in flight, waiting for its
    /// models) would keep its memory for good. (wasmtime 50's `Engine::release_idle_pool_memory` releases it on
    /// request, for a runtime gone idle; it needs Rust 1.97, past this workspace's `rust-version`.)
    pub resident_slots: u32,
    /// How often a running guest is checked against its deadline (and yields to the async executor).
    pub epoch_tick: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cache_dir: None,
            max_invocations: 1000,
            max_memory: 4 << 30,
            memory_keep_resident: 8 << 20,
            resident_slots: 16,
            epoch_tick: Duration::from_millis(1),
        }
    }
}

/// Per-function limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionLimits {
    /// Bytes of linear memory one invocation may use.
    pub memory: usize,
    /// The longest an invocation may run, whatever the request's deadline.
    pub timeout: Duration,
    /// Payloads one invocation may `emit`.
    pub max_emits: usize,
    /// Bytes one invocation may `emit`, all payloads together.
    pub max_emit_bytes: usize,
}

impl Default for FunctionLimits {
    fn default() -> Self {
        FunctionLimits {
            memory: 128 << 20,
            timeout: Duration::from_secs(30),
            max_emits: 10_000,
            max_emit_bytes: 256 << 20,
        }
    }
}

/// What a function is loaded with besides its code.
#[derive(Clone)]
pub struct FunctionOptions {
    /// Its memory, time and emit limits.
    pub limits: FunctionLimits,
    /// Static configuration the guest reads with `config(key)`.
    pub config: BTreeMap<String, String>,
    /// Serves the function's `infer` calls.
    pub models: Arc<dyn ModelHost>,
}

impl Default for FunctionOptions {
    fn default() -> Self {
        FunctionOptions { limits: FunctionLimits::default(), config: BTreeMap::new(), models: Arc::new(NoModels) }
    }
}

/// A payload a function sent to one of its output ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emission {
    /// The port, as the glue named it.
    pub port: String,
    /// The bytes emitted.
    pub payload: Vec<u8>,
}

/// The result of a successful invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What the handler returned.
    pub output: Vec<u8>,
    /// What it emitted, in order.
    pub emitted: Vec<Emission>,
    /// How long its `infer` calls waited for models.
    pub in_models: Duration,
    /// The glue's own time: the CPU time of instantiating it and running its handler, which wasmtime does
    /// inside the invocation's polls, on whichever thread polls it (waits for models and for a core are not
    /// counted; a model small enough to run on the caller's thread is).
    pub glue: Duration,
}

/// Compiles, links and runs functions. Cheap to share behind an `Arc`; one per process is typical.
pub struct Runtime {
    /// The pool of [`RuntimeConfig::resident_slots`] slots that keep memory resident; functions are compiled
    /// for its engine.
    resident: Pool,
    /// The pool of the other `max_invocations - resident_slots` slots, which keep nothing resident; `None`
    /// when there are none.
    overflow: Option<Pool>,
    config: RuntimeConfig,
    /// Advances the engines' epochs while invocations run; functions loaded from the runtime hold it too.
    ticker: Arc<ticker::Ticker>,
    /// Buffers that large tensors lifted out of guests' memory reuse (see [`host`]'s `infer`).
    spare: Arc<Spare>,
}

/// An engine whose pooling allocator holds the instances of one pool, the linker for it, and one permit per
/// slot, held from instantiation until the store is dropped, so invocations beyond the slots wait for one
/// instead of failing.
struct Pool {
    engine: Engine,
    linker: Linker<InvocationState>,
    slots: Arc<Semaphore>,
}

impl Pool {
    /// A pool of `slots` instance slots, each keeping `keep_resident` bytes of its linear memory resident.
    fn new(config: &RuntimeConfig, slots: u32, keep_resident: usize) -> anyhow::Result<Self> {
        let engine = build_engine(config, slots, keep_resident)?;
        let mut linker = Linker::new(&engine);
        link_wasi(&mut linker)?;
        host::link(&mut linker)?;
        Ok(Pool { engine, linker, slots: Arc::new(Semaphore::new(slots as usize)) })
    }

    /// `component`, compiled for this pool's engine, linked and checked.
    fn link(&self, name: &str, component: &Component) -> Result<Linked, LoadError> {
        let function = name.to_string();
        let pre = self
            .linker
            .instantiate_pre(component)
            .map_err(|e| LoadError::Link { function: function.clone(), detail: format!("{e:#}") })?;
        let pre =
            FunctionPre::new(pre).map_err(|e| LoadError::MissingHandler { function, detail: format!("{e:#}") })?;
        Ok(Linked { pre, slots: self.slots.clone() })
    }

    /// Bytes that slots not in use keep resident.
    fn idle_resident_bytes(&self) -> usize {
        self.engine.pooling_allocator_metrics().map_or(0, |m| m.unused_memory_bytes_resident())
    }
}

/// A function linked into one pool, with the pool's slot permits.
#[derive(Clone)]
struct Linked {
    pre: FunctionPre<InvocationState>,
    slots: Arc<Semaphore>,
}

/// WASI interfaces linked for the standard library (inert, see [`host`]); anything else a guest imports
/// besides `jig:function` is refused at load time.
const WASI_PROVIDED: &[&str] = &[
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
];

impl Runtime {
    /// A runtime with its engines (a resident pool and, beyond it, an overflow pool), linkers and epoch ticker.
    pub fn new(config: RuntimeConfig) -> anyhow::Result<Self> {
        let resident_slots = config.resident_slots.max(1).min(config.max_invocations);
        let resident = Pool::new(&config, resident_slots, config.memory_keep_resident)?;
        let overflow = match config.max_invocations - resident_slots {
            0 => None,
            slots => Some(Pool::new(&config, slots, 0)?),
        };

        let engines: Vec<Engine> =
            [Some(&resident), overflow.as_ref()].into_iter().flatten().map(|p| p.engine.clone()).collect();
        let ticker = ticker::Ticker::start(engines, config.epoch_tick, ticker::PARK_AFTER)?;
        Ok(Runtime { resident, overflow, config, ticker, spare: Arc::default() })
    }

    /// The wasmtime engine functions are compiled for (that of the resident slots; each function is copied into
    /// the overflow slots' engine as it loads).
    pub fn engine(&self) -> &Engine {
        &self.resident.engine
    }

    /// Bytes of linear memory that instance slots not in use keep resident for later invocations: at most
    /// [`RuntimeConfig::memory_keep_resident`] per memory of the [`RuntimeConfig::resident_slots`], however many
    /// invocations ran at once before.
    pub fn idle_resident_bytes(&self) -> usize {
        self.resident.idle_resident_bytes() + self.overflow.as_ref().map_or(0, Pool::idle_resident_bytes)
    }

    /// Load the component at `path` as function `name`.
    pub fn load_file(&self, name: &str, path: &Path, options: FunctionOptions) -> Result<Function, LoadError> {
        let wasm = std::fs::read(path).map_err(|error| LoadError::Read {
            function: name.to_string(),
            path: path.to_path_buf(),
            error,
        })?;
        self.load(name, &wasm, options)
    }

    /// Compile (or fetch from the cache), link and check `wasm` — a component's binary, or its text format —
    /// as function `name`.
    pub fn load(&self, name: &str, wasm: &[u8], options: FunctionOptions) -> Result<Function, LoadError> {
        let function = name.to_string();
        if options.limits.memory > self.config.max_memory {
            return Err(LoadError::MemoryLimitTooLarge {
                function,
                limit: options.limits.memory,
                max: self.config.max_memory,
            });
        }
        if wasmtime::wasmparser::Parser::is_core_wasm(wasm) {
            return Err(LoadError::CoreModule { function });
        }
        // Anything else that is not text would reach the text parser and fail there, in its words.
        if !wasm.starts_with(b"\0asm") && std::str::from_utf8(wasm).is_err() {
            return Err(LoadError::NotWasm { function });
        }
        let invalid = |e: wasmtime::Error| LoadError::Invalid { function: function.clone(), detail: format!("{e:#}") };
        let component =
            cache::compile(&self.resident.engine, self.config.cache_dir.as_deref(), wasm).map_err(invalid)?;

        // Refuse by name first: an import outside the contract is refused even when it happens to link.
        if let Some(import) = self.unsupported_import(&component) {
            let detail = match self.resident.linker.instantiate_pre(&component) {
                Err(e) => format!("{e:#}"),
                Ok(_) => "jig refuses it even though it declares nothing the host would have to provide".into(),
            };
            return Err(LoadError::UnsupportedImport { function, import, detail });
        }
        let resident = self.resident.link(name, &component)?;
        let overflow = match &self.overflow {
            None => None,
            Some(pool) => {
                // The same compiled code, loaded into the other engine (their settings differ only in what the
                // pooling allocator keeps resident), rather than compiled a second time.
                let compiled = component.serialize().map_err(invalid)?;
                // SAFETY: the bytes are an artifact this process's wasmtime serialized a moment ago; wasmtime
                // checks that the engine's settings are compatible with it.
                let copy = unsafe { Component::deserialize(&pool.engine, &compiled) }.map_err(invalid)?;
                Some(pool.link(name, &copy)?)
            }
        };
        Ok(Function {
            inner: Arc::new(FunctionInner {
                name: name.into(),
                resident,
                overflow,
                limits: options.limits,
                config: Arc::new(options.config),
                models: options.models,
                spare: self.spare.clone(),
                ticker: self.ticker.clone(),
            }),
        })
    }

    /// The first import of `component` that is neither `jig:function` nor a linked WASI interface.
    fn unsupported_import(&self, component: &Component) -> Option<String> {
        component.component_type().imports(&self.resident.engine).map(|(name, _)| name.to_string()).find(|name| {
            let unversioned = name.split('@').next().unwrap_or(name);
            !(unversioned.starts_with("jig:function/") || WASI_PROVIDED.contains(&unversioned))
        })
    }
}

/// An engine whose pooling allocator has `slots` instance slots, each keeping `keep_resident` bytes of its linear
/// memory resident between instances (and its tables, when that is not zero). Engines that differ only in these
/// run the same compiled code.
fn build_engine(config: &RuntimeConfig, slots: u32, keep_resident: usize) -> anyhow::Result<Engine> {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true).epoch_interruption(true);

    let mut pool = PoolingAllocationConfig::default();
    // A Rust component has one linear memory and a handful of core instances and tables (its own plus the
    // canonical-ABI shims); the multipliers leave room for that.
    pool.total_component_instances(slots)
        .total_core_instances(slots.saturating_mul(8))
        .total_memories(slots.saturating_mul(2))
        .total_tables(slots.saturating_mul(4))
        .total_stacks(slots)
        .max_memories_per_component(2)
        .max_tables_per_component(4)
        .max_memory_size(config.max_memory)
        .linear_memory_keep_resident(keep_resident)
        // An instance takes a slot that last ran the same function (its memory image still mapped), else the
        // least recently used slot, and a never-used one only when no used one is free: the slots that ever
        // kept memory resident are no more than ran at once (a component has one memory, but the pool has room
        // for two per instance), and a redeploy that loads the functions anew takes over its predecessor's.
        .max_unused_warm_slots(0)
        .table_keep_resident(if keep_resident > 0 { 64 << 10 } else { 0 })
        // Reset only the pages an instance dirtied (Linux ≥ 6.7; elsewhere the first `keep_resident` bytes).
        .pagemap_scan(wasmtime::Enabled::Auto);
    wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    match Engine::new(&wasm) {
        Ok(engine) => Ok(engine),
        // The pool reserves virtual address space up front; where that fails (small address spaces, strict
        // overcommit settings), allocate on demand instead: slower instantiation, same behaviour.
        Err(e) => {
            tracing::warn!("pooling allocator unavailable ({e:#}); falling back to on-demand allocation");
            wasm.allocation_strategy(InstanceAllocationStrategy::OnDemand);
            Engine::new(&wasm).map_err(|e| anyhow::anyhow!("{e:#}"))
        }
    }
}

/// Link the WASI interfaces named in [`WASI_PROVIDED`]: what `wasmtime_wasi::p2::add_to_linker_async` links,
/// minus sockets.
fn link_wasi(linker: &mut Linker<InvocationState>) -> anyhow::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random};
    use wasmtime_wasi::random::{WasiRandom, WasiRandomView};
    use wasmtime_wasi_io::bindings::wasi::io;

    struct HasTable;
    impl wasmtime::component::HasData for HasTable {
        type Data<'a> = &'a mut wasmtime::component::ResourceTable;
    }
    fn table(s: &mut InvocationState) -> &mut wasmtime::component::ResourceTable {
        s.ctx().table
    }

    let l = linker;
    io::error::add_to_linker::<_, HasTable>(l, table)?;
    io::poll::add_to_linker::<_, HasTable>(l, table)?;
    io::streams::add_to_linker::<_, HasTable>(l, table)?;
    cli::environment::add_to_linker::<_, WasiCli>(l, InvocationState::cli)?;
    cli::exit::add_to_linker::<_, WasiCli>(l, InvocationState::cli)?;
    cli::stdin::add_to_linker::<_, WasiCli>(l, InvocationState::cli)?;
    cli::stdout::add_to_linker::<_, WasiCli>(l, InvocationState::cli)?;
    cli::stderr::add_to_linker::<_, WasiCli>(l, InvocationState::cli)?;
    cli::terminal_input::add_to_linker::<_, WasiCli>(l, InvocationState::cli)?;
    cli::terminal_output::add_to_linker::<_, WasiCli>(l, InvocationState::cli)?;
    cli::terminal_stdin::add_to_linker::<_, WasiCli>(l, InvocationState::cli)?;
    cli::terminal_stdout::add_to_linker::<_, WasiCli>(l, InvocationState::cli)?;
    cli::terminal_stderr::add_to_linker::<_, WasiCli>(l, InvocationState::cli)?;
    clocks::monotonic_clock::add_to_linker::<_, WasiClocks>(l, InvocationState::clocks)?;
    clocks::wall_clock::add_to_linker::<_, WasiClocks>(l, InvocationState::clocks)?;
    random::random::add_to_linker::<_, WasiRandom>(l, InvocationState::random)?;
    random::insecure::add_to_linker::<_, WasiRandom>(l, InvocationState::random)?;
    random::insecure_seed::add_to_linker::<_, WasiRandom>(l, InvocationState::random)?;
    filesystem::types::add_to_linker::<_, WasiFilesystem>(l, InvocationState::filesystem)?;
    filesystem::preopens::add_to_linker::<_, WasiFilesystem>(l, InvocationState::filesystem)?;
    Ok(())
}

/// A loaded function: compiled, linked, ready to invoke. Cheap to clone.
#[derive(Clone)]
pub struct Function {
    inner: Arc<FunctionInner>,
}

struct FunctionInner {
    name: Arc<str>,
    /// Linked into the runtime's resident slots.
    resident: Linked,
    /// Linked into its overflow slots, if it has any.
    overflow: Option<Linked>,
    limits: FunctionLimits,
    config: Arc<BTreeMap<String, String>>,
    models: Arc<dyn ModelHost>,
    spare: Arc<Spare>,
    ticker: Arc<ticker::Ticker>,
}

impl FunctionInner {
    /// A slot to instantiate in, and the function as linked into its pool: a resident slot when one is free,
    /// else an overflow slot, else whichever frees up first.
    async fn slot(&self) -> Result<(&Linked, OwnedSemaphorePermit), AcquireError> {
        let resident = &self.resident;
        if let Ok(permit) = resident.slots.clone().try_acquire_owned() {
            return Ok((resident, permit));
        }
        let Some(overflow) = &self.overflow else {
            return Ok((resident, resident.slots.clone().acquire_owned().await?));
        };
        if let Ok(permit) = overflow.slots.clone().try_acquire_owned() {
            return Ok((overflow, permit));
        }
        tokio::select! {
            biased;
            permit = resident.slots.clone().acquire_owned() => Ok((resident, permit?)),
            permit = overflow.slots.clone().acquire_owned() => Ok((overflow, permit?)),
        }
    }
}

impl Function {
    /// The same function (compiled once, sharing its concurrency slots) calling its models through `models`:
    /// how an app routes one class of requests to the instances planned for it.
    pub fn with_models(&self, models: Arc<dyn ModelHost>) -> Function {
        let f = &*self.inner;
        Function {
            inner: Arc::new(FunctionInner {
                name: f.name.clone(),
                resident: f.resident.clone(),
                overflow: f.overflow.clone(),
                limits: f.limits,
                config: f.config.clone(),
                models,
                spare: f.spare.clone(),
                ticker: f.ticker.clone(),
            }),
        }
    }

    /// The name it was loaded under, as errors and logs give it.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The limits each invocation runs under.
    pub fn limits(&self) -> FunctionLimits {
        self.inner.limits
    }

    /// Run the handler on `payload` in a fresh instance. The invocation ends by `deadline` (or the function's
    /// timeout, whichever is sooner). Call it inside a Tokio runtime with the time driver enabled.
    pub async fn invoke(&self, payload: &[u8], deadline: Option<Instant>) -> Result<Outcome, InvokeError> {
        let f = &*self.inner;
        let started = Instant::now();
        let timeout = started + f.limits.timeout;
        let deadline = deadline.map_or(timeout, |d| d.min(timeout));

        // Held until the store (and so the instance) is dropped, after everything declared below.
        let (linked, _slot) = match tokio::time::timeout_at(deadline.into(), f.slot()).await {
            Err(_elapsed) => return Err(self.deadline_exceeded(started, deadline)),
            Ok(Ok(slot)) => slot,
            Ok(Err(closed)) => {
                return Err(InvokeError::Instantiate { function: f.name.to_string(), detail: closed.to_string() });
            }
        };
        // The epoch advances while this invocation holds its slot: its guest yields and meets its deadline.
        let _running = f.ticker.running();
        let state = InvocationState::new(
            f.name.clone(),
            deadline,
            f.models.clone(),
            f.spare.clone(),
            f.config.clone(),
            f.limits,
        );
        let mut store = Store::new(linked.pre.engine(), state);
        store.limiter(|s| s as &mut dyn wasmtime::ResourceLimiter);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if Instant::now() >= deadline { Err(DeadlinePassed.into()) } else { Ok(UpdateDeadline::Yield(1)) }
        });

        let mut cpu = Duration::ZERO;
        let instantiated = cpu_timed(&mut cpu, linked.pre.instantiate_async(&mut store));
        let instance = match tokio::time::timeout_at(deadline.into(), instantiated).await {
            Err(_elapsed) => return Err(self.deadline_exceeded(started, deadline)),
            Ok(Err(e)) => {
                return Err(InvokeError::Instantiate { function: f.name.to_string(), detail: format!("{e:#}") });
            }
            Ok(Ok(instance)) => instance,
        };
        let handler = instance.jig_function_handler();
        let handled = cpu_timed(&mut cpu, handler.call_handle(&mut store, payload));
        let result = tokio::time::timeout_at(deadline.into(), handled).await;
        let state = store.into_data();
        state.log_stdio();
        match result {
            Err(_elapsed) => Err(self.deadline_exceeded(started, deadline)),
            Ok(Ok(Ok(output))) => Ok(Outcome { output, emitted: state.emitted, in_models: state.in_models, glue: cpu }),
            Ok(Ok(Err(error))) => Err(InvokeError::Failed { function: f.name.to_string(), error: error.into() }),
            Ok(Err(e)) => Err(self.classify_failure(e, &state, started, deadline)),
        }
    }

    fn deadline_exceeded(&self, started: Instant, deadline: Instant) -> InvokeError {
        InvokeError::DeadlineExceeded {
            function: self.inner.name.to_string(),
            budget: deadline.saturating_duration_since(started),
        }
    }

    /// Turn an error out of the guest call into the [`InvokeError`] that says what happened.
    fn classify_failure(
        &self,
        e: wasmtime::Error,
        state: &InvocationState,
        started: Instant,
        deadline: Instant,
    ) -> InvokeError {
        let function = self.inner.name.to_string();
        if e.is::<DeadlinePassed>() || e.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt) {
            return self.deadline_exceeded(started, deadline);
        }
        if let Some(limit) = e.downcast_ref::<HostLimitExceeded>() {
            return InvokeError::HostLimit { function, detail: limit.0.clone() };
        }
        if state.memory_refused {
            return InvokeError::MemoryLimit { function, limit: self.inner.limits.memory };
        }
        if e.is::<wasmtime::Trap>() {
            let stderr = String::from_utf8_lossy(&state.stderr.contents()).into_owned();
            return InvokeError::Trap { function, trap: format!("{e:#}"), stderr: tail(&stderr, 2048) };
        }
        InvokeError::MalformedOutput { function, detail: format!("{e:#}") }
    }
}

/// The last `max` bytes of `s`, cut at a character boundary.
fn tail(s: &str, max: usize) -> String {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_string()
}

impl From<host::jig::function::types::Error> for FunctionError {
    fn from(e: host::jig::function::types::Error) -> Self {
        use host::jig::function::types::Error as Wire;
        match e {
            Wire::InvalidInput(m) => FunctionError::InvalidInput(m),
            Wire::Model(e) => FunctionError::Model(e.into()),
            Wire::Internal(m) => FunctionError::Internal(m),
        }
    }
}

/// `future`, adding the CPU time its polls take to `cpu`, on whichever thread polls it.
async fn cpu_timed<F: std::future::Future>(cpu: &mut Duration, future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        let before = cpu_time::ThreadTime::try_now();
        let poll = future.as_mut().poll(cx);
        *cpu += before.and_then(|t| t.try_elapsed()).unwrap_or_default();
        poll
    })
    .await
}
