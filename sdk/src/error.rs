//! Errors a function returns to the host, mapped onto the WIT `error` variant.

use crate::bindings::jig::function::types as wire;

/// Why a model call failed, as the host reports it. See `infer-error` in `sdk/wit/function.wit`.
pub use wire::InferError;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a function failed. The host reports it with the function's name; the gateway maps
/// [`Error::InvalidInput`] to a client error and the others to server errors.
#[derive(Debug, Clone)]
pub enum Error {
    /// The payload or configuration is unusable; the caller must fix it.
    InvalidInput(String),
    /// A model call failed and the function gave up.
    Model(InferError),
    /// Anything else went wrong inside the function.
    Internal(String),
}

impl Error {
    /// The payload or configuration is unusable.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Error::InvalidInput(message.into())
    }

    /// Something went wrong inside the function.
    pub fn internal(message: impl Into<String>) -> Self {
        Error::Internal(message.into())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::InvalidInput(m) => write!(f, "invalid input: {m}"),
            Error::Model(e) => write!(f, "model call failed: {}", describe_infer_error(e)),
            Error::Internal(m) => write!(f, "internal error: {m}"),
        }
    }
}

impl std::error::Error for Error {}

/// One line describing an [`InferError`].
pub fn describe_infer_error(error: &InferError) -> String {
    match error {
        InferError::UnknownSlot(m) => format!("unknown model slot: {m}"),
        InferError::InvalidInput(m) => format!("invalid model input: {m}"),
        InferError::DeadlineExceeded(m) => format!("deadline exceeded: {m}"),
        InferError::Overloaded(m) => format!("overloaded: {m}"),
        InferError::Dropped(m) => format!("dropped: {m}"),
        InferError::Failed(m) => format!("model failed: {m}"),
    }
}

impl From<InferError> for Error {
    fn from(e: InferError) -> Self {
        Error::Model(e)
    }
}

impl From<jig_wire::envelope::EnvelopeError> for Error {
    fn from(e: jig_wire::envelope::EnvelopeError) -> Self {
        Error::invalid_input(e.to_string())
    }
}

impl From<serde_json::Error> for Error {
    /// JSON that does not parse came from the caller.
    fn from(e: serde_json::Error) -> Self {
        Error::InvalidInput(format!("malformed JSON: {e}"))
    }
}

impl From<::image::ImageError> for Error {
    /// Undecodable images come from the caller; encoder failures are ours.
    fn from(e: ::image::ImageError) -> Self {
        match e {
            ::image::ImageError::Decoding(_) | ::image::ImageError::Unsupported(_) => {
                Error::InvalidInput(format!("image: {e}"))
            }
            // An image too large to hold in a function's memory: the caller's to shrink.
            ::image::ImageError::Limits(_) => Error::InvalidInput(format!("image: {e}: the image is too large")),
            other => Error::Internal(format!("image: {other}")),
        }
    }
}

impl From<Error> for wire::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::InvalidInput(m) => wire::Error::InvalidInput(m),
            Error::Model(e) => wire::Error::Model(e),
            Error::Internal(m) => wire::Error::Internal(m),
        }
    }
}
