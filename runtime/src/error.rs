//! What can go wrong loading and invoking a function. Every error names the function and says what to do.

use std::path::PathBuf;
use std::time::Duration;

use super::models::InferError;

/// A function could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The component file cannot be read.
    #[error("function `{function}`: cannot read {}: {error}", path.display())]
    Read {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// The component file.
        path: PathBuf,
        /// The system's answer.
        error: std::io::Error,
    },

    /// The file is a core module, not a component.
    #[error(
        "function `{function}`: the .wasm is a core WebAssembly module, not a component; build it for the \
         `wasm32-wasip2` target (cargo build --target wasm32-wasip2) so it is a component"
    )]
    CoreModule {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
    },

    /// The bytes are neither WebAssembly's binary format nor its text: not a build of the glue at all.
    #[error(
        "function `{function}`: the glue file is not WebAssembly (it does not start with `\\0asm`); give the \
         component cargo builds for the `wasm32-wasip2` target"
    )]
    NotWasm {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
    },

    /// The bytes are not a valid component.
    #[error("function `{function}`: not a valid WebAssembly component: {detail}")]
    Invalid {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// What wasmtime reported.
        detail: String,
    },

    /// The component imports what jig does not provide.
    #[error(
        "function `{function}`: imports {import}, which jig does not provide; glue may import only \
         `jig:function` and the WASI interfaces the Rust standard library needs (no sockets or HTTP): {detail}"
    )]
    UnsupportedImport {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// The import jig does not provide.
        import: String,
        /// What wasmtime reported.
        detail: String,
    },

    /// The imports do not match this jig's `jig:function` contract.
    #[error(
        "function `{function}`: its imports do not match what jig provides (was it built against another \
         version of the jig:function contract? rebuild it with this jig-sdk): {detail}"
    )]
    Link {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// What wasmtime reported.
        detail: String,
    },

    /// The component exports no handler.
    #[error(
        "function `{function}`: does not export `jig:function/handler@0.1.0` with `handle`; declare the handler \
         with `jig_sdk::export!`: {detail}"
    )]
    MissingHandler {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// What wasmtime reported.
        detail: String,
    },

    /// The function asks for more memory than the runtime allows.
    #[error("function `{function}`: memory limit {limit} bytes is above the runtime's maximum {max} bytes")]
    MemoryLimitTooLarge {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// The limit asked for, bytes.
        limit: usize,
        /// The runtime's `max_memory`, bytes.
        max: usize,
    },
}

/// An invocation of a function failed. The store is dropped; the next invocation starts fresh.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// The glue returned an error of its own.
    #[error("function `{function}` failed: {error}")]
    Failed {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// What the glue returned.
        error: FunctionError,
    },

    /// The glue trapped (a Rust panic traps after printing its message to stderr, shown here).
    #[error("function `{function}` trapped: {trap}{}", stderr_suffix(.stderr))]
    Trap {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// The trap wasmtime raised.
        trap: String,
        /// The last 2 KiB of the guest's standard error, where a panic message lands.
        stderr: String,
    },

    /// The request's deadline or the function's timeout passed while it ran.
    #[error(
        "function `{function}` ran past its deadline ({budget:?} after it started); raise the request's timeout \
         or the function's limit if it needs more time"
    )]
    DeadlineExceeded {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// How long it had, from its start to the deadline.
        budget: Duration,
    },

    /// The glue tried to grow its memory past its limit.
    #[error(
        "function `{function}` tried to grow its memory past its limit of {limit} bytes; raise \
         `memory` in its limits if it needs more"
    )]
    MemoryLimit {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// Its memory limit, bytes.
        limit: usize,
    },

    /// The glue broke the component ABI: an output the host cannot read (bad pointer, length or discriminant).
    #[error("function `{function}` returned a malformed output: {detail}")]
    MalformedOutput {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// What the host could not read.
        detail: String,
    },

    /// The glue asked the host for more than it allows (too many or too large emits, outputs, log lines).
    #[error("function `{function}` exceeded a host limit: {detail}")]
    HostLimit {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// Which limit, and how to raise it.
        detail: String,
    },

    /// Instantiation failed (for example every instance slot of the pool is in use).
    #[error("function `{function}` could not be instantiated: {detail}")]
    Instantiate {
        /// The function, named `APP/TASK` (the file's stem under `jig run`).
        function: String,
        /// Why instantiation failed.
        detail: String,
    },
}

impl InvokeError {
    /// The function the error is about.
    pub fn function(&self) -> &str {
        match self {
            InvokeError::Failed { function, .. }
            | InvokeError::Trap { function, .. }
            | InvokeError::DeadlineExceeded { function, .. }
            | InvokeError::MemoryLimit { function, .. }
            | InvokeError::MalformedOutput { function, .. }
            | InvokeError::HostLimit { function, .. }
            | InvokeError::Instantiate { function, .. } => function,
        }
    }
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.trim().is_empty() { String::new() } else { format!("; its stderr ended with: {}", stderr.trim()) }
}

/// An error the glue returned; mirrors `error` in `sdk/wit/function.wit`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FunctionError {
    /// The payload or configuration is unusable; the caller must fix it.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A model call (`infer`) failed.
    #[error("model call failed: {0}")]
    Model(InferError),
    /// The glue failed for a reason of its own.
    #[error("internal error: {0}")]
    Internal(String),
}
