//! An app as a model of the Open Inference Protocol (`[tensors]`): the tensor its entry takes and the one it
//! answers ([`AppTensors`], [`TensorDecl`]), by the protocol's names of the element types jig serves
//! ([`jig_wire::DType::OIP_NAMES`], the one table of them, which the gateway's v2 codec reads too).

use serde::{Deserialize, Serialize};

/// An app that takes a tensor and answers one (`[tensors]`), served as the v2 model `APP`: a request's input
/// reaches the entry task as a tensor envelope (its raw little-endian data, with metadata `{"datatype",
/// "shape"}`, as the bundled `forward` function takes), and the app's one output that is a tensor envelope is
/// the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppTensors {
    /// The tensor the entry task takes.
    pub input: TensorDecl,
    /// The tensor the app answers.
    pub output: TensorDecl,
}

/// A tensor of an app's v2 model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorDecl {
    /// Its name in v2 requests and answers.
    pub name: String,
    /// Its element type, by the protocol's name: one of [`jig_wire::DType::OIP_NAMES`].
    pub datatype: String,
    /// Its shape, -1 where any size goes (the batch); metadata for clients.
    #[serde(default)]
    pub shape: Vec<i64>,
}
