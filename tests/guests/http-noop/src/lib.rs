//! Answers every request with 200 and an empty body: the `wasmtime serve` counterpart of a jig app whose one
//! task is the no-op `echo` glue, for `cargo bench -p jig --bench gateway`.

use wasip2::http::types::{Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam};

#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct Noop;

impl wasip2::exports::http::incoming_handler::Guest for Noop {
    fn handle(_request: IncomingRequest, response_out: ResponseOutparam) {
        let response = OutgoingResponse::new(Fields::new());
        let body = response.body().expect("a new response has a body");
        ResponseOutparam::set(response_out, Ok(response));
        OutgoingBody::finish(body, None).expect("an empty body finishes");
    }
}

// Exported for WebAssembly only: the export names (`wasi:http/...#handle`) cannot be linked into a native
// shared library, which `cargo build --workspace` would otherwise try.
#[cfg(target_arch = "wasm32")]
wasip2::http::proxy::export!(Noop);
