//! A guest whose handler breaks the canonical ABI, to test that the host reports a malformed output instead of
//! trusting it. It exports the core function behind `jig:function/handler@0.1.0#handle` by hand rather than
//! (wit-bindgen only describes the world here), and answers with a result the host cannot lift:
//!
//! * payload starting with `d`: a result discriminant that is neither `ok` nor `err`;
//! * anything else: `ok` with a list pointer far outside linear memory.

// Describes the `function` world, exports included, to the component linker; nothing here calls the bindings.
wit_bindgen::generate!({ path: "../../../sdk/wit", world: "function" });

/// The result area: discriminant (u8, padded to 4), list pointer, list length.
#[cfg(target_arch = "wasm32")]
static mut RESULT: [u32; 3] = [0; 3];

/// # Safety
/// Called by the component's canonical-ABI glue with a payload it allocated with `cabi_realloc`.
#[cfg(target_arch = "wasm32")]
#[unsafe(export_name = "jig:function/handler@0.1.0#handle")]
pub unsafe extern "C" fn handle(payload: *mut u8, len: usize) -> *mut u8 {
    let first = if len > 0 { unsafe { *payload } } else { 0 };
    let result = if first == b'd' { [7, 0, 0] } else { [0, 0xFFFF_FF00, 1000] };
    unsafe {
        RESULT = result;
        &raw mut RESULT as *mut u8
    }
}
