//! What can go wrong loading and invoking a function. Every error names the function and says what to do.

use std::path::PathBuf;
use std::time::Duration;

use super::models::InferError;

/// A function could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("function `{function}`: cannot read {}: {error}", path.display())]
    Read { function: String, path: PathBuf, error: std::io::Error },

    #[error(
        "function `{function}`: the .wasm is a core WebAssembly module, not a component; build it for the \
         `wasm32-wasip2` target (cargo build --target wasm32-wasip2) so it is a component"
    )]
    CoreModule { function: String },

    #[error("function `{function}`: not a valid WebAssembly component: {detail}")]
    Invalid { function: String, detail: String },

    #[error(
        "function `{function}`: imports {import}, which jig does not provide; glue may import only \
         `jig:function` and the WASI interfaces the Rust standard library needs (no sockets or HTTP): {detail}"
    )]
    UnsupportedImport { function: String, import: String, detail: String },

    #[error(
        "function `{function}`: its imports do not match what jig provides (was it built against another \
         version of the jig:function contract? rebuild it with this jig-sdk): {detail}"
    )]
    Link { function: String, detail: String },

    #[error(
        "function `{function}`: does not export `jig:function/handler@0.1.0` with `handle`; declare the handler \
         with `jig_sdk::export!`: {detail}"
    )]
    MissingHandler { function: String, detail: String },

    #[error("function `{function}`: memory limit {limit} bytes is above the runtime's maximum {max} bytes")]
    MemoryLimitTooLarge { function: String, limit: usize, max: usize },
}

/// An invocation of a function failed. The store is dropped; the next invocation starts fresh.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// The glue returned an error of its own.
    #[error("function `{function}` failed: {error}")]
    Failed { function: String, error: FunctionError },

    /// The glue trapped (a Rust panic traps after printing its message to stderr, shown here).
    #[error("function `{function}` trapped: {trap}{}", stderr_suffix(.stderr))]
    Trap { function: String, trap: String, stderr: String },

    #[error(
        "function `{function}` ran past its deadline ({budget:?} after it started); raise the request's timeout \
         or the function's limit if it needs more time"
    )]
    DeadlineExceeded { function: String, budget: Duration },

    #[error(
        "function `{function}` tried to grow its memory past its limit of {limit} bytes; raise \
         `memory` in its limits if it needs more"
    )]
    MemoryLimit { function: String, limit: usize },

    /// The glue broke the component ABI: an output the host cannot read (bad pointer, length or discriminant).
    #[error("function `{function}` returned a malformed output: {detail}")]
    MalformedOutput { function: String, detail: String },

    /// The glue asked the host for more than it allows (too many or too large emits, outputs, log lines).
    #[error("function `{function}` exceeded a host limit: {detail}")]
    HostLimit { function: String, detail: String },

    /// Instantiation failed (for example every instance slot of the pool is in use).
    #[error("function `{function}` could not be instantiated: {detail}")]
    Instantiate { function: String, detail: String },
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
    #[error("invalid input: {0}")]
    InvalidInput(String),
    #[error("model call failed: {0}")]
    Model(InferError),
    #[error("internal error: {0}")]
    Internal(String),
}
