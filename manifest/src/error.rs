//! The crate's errors: [`InvalidBundle`], a bundle that cannot be used, and [`InvalidName`], a name jig does not
//! take. Both carry a message that says what is wrong and what to do.

/// A bundle that cannot be used: the message names the file and field and says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidBundle(pub String);

/// A name jig does not take for an app or task; the message says what it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidName(pub String);

pub(crate) type Result<T> = std::result::Result<T, InvalidBundle>;

pub(crate) fn invalid(message: impl Into<String>) -> InvalidBundle {
    InvalidBundle(message.into())
}
