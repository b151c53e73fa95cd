//! Conversions between the wire types of `jig:function` and the runtime's tensors and errors.

use super::imports::Output;
use super::jig::function::types as wire;
use crate::models::{DType, InferError, Tensor};

impl From<wire::Dtype> for DType {
    fn from(d: wire::Dtype) -> Self {
        match d {
            wire::Dtype::F32 => DType::F32,
            wire::Dtype::F16 => DType::F16,
            wire::Dtype::F64 => DType::F64,
            wire::Dtype::U8 => DType::U8,
            wire::Dtype::I8 => DType::I8,
            wire::Dtype::U16 => DType::U16,
            wire::Dtype::I16 => DType::I16,
            wire::Dtype::I32 => DType::I32,
            wire::Dtype::I64 => DType::I64,
            wire::Dtype::Bool => DType::Bool,
        }
    }
}

impl From<DType> for wire::Dtype {
    fn from(d: DType) -> Self {
        match d {
            DType::F32 => wire::Dtype::F32,
            DType::F16 => wire::Dtype::F16,
            DType::F64 => wire::Dtype::F64,
            DType::U8 => wire::Dtype::U8,
            DType::I8 => wire::Dtype::I8,
            DType::U16 => wire::Dtype::U16,
            DType::I16 => wire::Dtype::I16,
            DType::I32 => wire::Dtype::I32,
            DType::I64 => wire::Dtype::I64,
            DType::Bool => wire::Dtype::Bool,
        }
    }
}

impl From<Tensor> for Output {
    fn from(t: Tensor) -> Self {
        let (dtype, shape, data) = t.into_parts();
        Output { dtype: dtype.into(), shape, data }
    }
}

impl From<InferError> for wire::InferError {
    fn from(e: InferError) -> Self {
        match e {
            InferError::UnknownSlot(m) => wire::InferError::UnknownSlot(m),
            InferError::InvalidInput(m) => wire::InferError::InvalidInput(m),
            InferError::DeadlineExceeded(m) => wire::InferError::DeadlineExceeded(m),
            InferError::Overloaded(m) => wire::InferError::Overloaded(m),
            InferError::Dropped(m) => wire::InferError::Dropped(m),
            InferError::Failed(m) => wire::InferError::Failed(m),
        }
    }
}

impl From<wire::InferError> for InferError {
    fn from(e: wire::InferError) -> Self {
        match e {
            wire::InferError::UnknownSlot(m) => InferError::UnknownSlot(m),
            wire::InferError::InvalidInput(m) => InferError::InvalidInput(m),
            wire::InferError::DeadlineExceeded(m) => InferError::DeadlineExceeded(m),
            wire::InferError::Overloaded(m) => InferError::Overloaded(m),
            wire::InferError::Dropped(m) => InferError::Dropped(m),
            wire::InferError::Failed(m) => InferError::Failed(m),
        }
    }
}
