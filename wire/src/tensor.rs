//! The tensor that crosses the `infer` boundary between glue and models.
//!
//! Its bytes are a shared, immutable [`Bytes`] buffer, so a tensor moves from the glue through a model
//! instance's queue, into ONNX Runtime and back without a copy: cloning shares the buffer, a batch's output is
//! split into requests' outputs as views of it, and an output can be memory ONNX Runtime allocated
//! ([`Bytes::from_owner`]).

use bytes::Bytes;

/// Element type of a tensor; the same set as `dtype` in `sdk/wit/function.wit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float (half).
    F16,
    /// 64-bit IEEE float.
    F64,
    /// Unsigned byte.
    U8,
    /// Signed byte.
    I8,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// A byte that is 0 (false) or 1 (true).
    Bool,
}

impl DType {
    /// Every element type, in the order of `dtype` in `sdk/wit/function.wit`.
    pub const ALL: [DType; 10] = [
        DType::F32,
        DType::F16,
        DType::F64,
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::Bool,
    ];

    /// The Open Inference Protocol's names of [`DType::ALL`], in that order: what a message about a name jig
    /// does not serve lists.
    pub const OIP_NAMES: [&'static str; 10] = {
        let mut names = [""; 10];
        let mut i = 0;
        while i < names.len() {
            names[i] = Self::ALL[i].oip_name();
            i += 1;
        }
        names
    };

    /// The Open Inference Protocol's name of this element type (`FP32`, `INT64`, …). The one table of them: the
    /// v2 codec, bundles' `[tensors]` and tensor envelopes (in glue too, through `jig-sdk`) all read it, here in
    /// the lowest crate they share.
    pub const fn oip_name(self) -> &'static str {
        match self {
            DType::F32 => "FP32",
            DType::F16 => "FP16",
            DType::F64 => "FP64",
            DType::U8 => "UINT8",
            DType::I8 => "INT8",
            DType::U16 => "UINT16",
            DType::I16 => "INT16",
            DType::I32 => "INT32",
            DType::I64 => "INT64",
            DType::Bool => "BOOL",
        }
    }

    /// The element type the Open Inference Protocol names `name` (`FP32` → `F32`), if jig serves it.
    pub fn from_oip_name(name: &str) -> Option<DType> {
        Self::ALL.into_iter().find(|d| d.oip_name() == name)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::F16 | DType::U16 | DType::I16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// Bytes a tensor of this type and `shape` holds; `None` when that overflows `usize`.
    pub fn bytes_for(self, shape: &[u64]) -> Option<usize> {
        shape.iter().try_fold(self.size(), |n, &d| n.checked_mul(usize::try_from(d).ok()?))
    }
}

/// A dense, row-major tensor of little-endian elements. Construction checks that the bytes match the shape, so
/// a `Tensor` is always well-formed. Cloning shares the bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<u64>,
    data: Bytes,
}

/// Why bytes do not form a tensor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TensorError {
    /// The shape's byte count overflows `usize`.
    #[error("tensor shape {shape:?} has more elements than fit in memory")]
    TooLarge {
        /// The shape given.
        shape: Vec<u64>,
    },
    /// The bytes are not exactly the shape's elements.
    #[error("tensor of dtype {dtype:?} and shape {shape:?} needs {expected} bytes of data, got {actual}")]
    LengthMismatch {
        /// The element type given.
        dtype: DType,
        /// The shape given.
        shape: Vec<u64>,
        /// Bytes the dtype and shape need.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
    /// A bool element is neither 0 nor 1.
    #[error("a bool tensor holds a byte other than 0 or 1 at element {index}")]
    InvalidBool {
        /// The first such element.
        index: usize,
    },
}

impl Tensor {
    /// A tensor from raw little-endian bytes (a `Vec<u8>`, or shared [`Bytes`]); fails unless `data` holds
    /// exactly product(shape) valid elements.
    pub fn new(dtype: DType, shape: Vec<u64>, data: impl Into<Bytes>) -> Result<Self, TensorError> {
        let data = data.into();
        let expected = dtype.bytes_for(&shape).ok_or_else(|| TensorError::TooLarge { shape: shape.clone() })?;
        if data.len() != expected {
            return Err(TensorError::LengthMismatch { dtype, shape, expected, actual: data.len() });
        }
        if dtype == DType::Bool
            && let Some(index) = data.iter().position(|&b| b > 1)
        {
            return Err(TensorError::InvalidBool { index });
        }
        Ok(Tensor { dtype, shape, data })
    }

    /// An `f32` tensor of `shape` holding `values`.
    pub fn from_f32(shape: Vec<u64>, values: &[f32]) -> Result<Self, TensorError> {
        Self::new(DType::F32, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dimensions, outermost first; empty for a scalar.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The raw little-endian bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The bytes as a shared buffer: a view that keeps them alive, for handing on without a copy.
    pub fn bytes(&self) -> &Bytes {
        &self.data
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// Whether it has no elements (some dimension is 0).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The parts, for moving the bytes elsewhere without a copy (`Vec::from` the bytes copies only when they
    /// are shared or not a `Vec`'s).
    pub fn into_parts(self) -> (DType, Vec<u64>, Bytes) {
        (self.dtype, self.shape, self.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_checks_length_overflow_and_bools() {
        assert!(Tensor::new(DType::F32, vec![2, 3], vec![0; 24]).is_ok());
        assert_eq!(
            Tensor::new(DType::F32, vec![2, 3], vec![0; 23]),
            Err(TensorError::LengthMismatch { dtype: DType::F32, shape: vec![2, 3], expected: 24, actual: 23 })
        );
        assert!(matches!(Tensor::new(DType::I64, vec![u64::MAX, 4], vec![]), Err(TensorError::TooLarge { .. })));
        assert_eq!(Tensor::new(DType::Bool, vec![3], vec![0, 1, 2]), Err(TensorError::InvalidBool { index: 2 }));
        assert_eq!(Tensor::new(DType::U8, vec![], vec![5]).unwrap().len(), 1, "a scalar has one element");
    }

    #[test]
    fn every_element_type_has_one_protocol_name_that_reads_back() {
        for (i, d) in DType::ALL.into_iter().enumerate() {
            assert_eq!(DType::from_oip_name(d.oip_name()), Some(d));
            assert_eq!(DType::OIP_NAMES[i], d.oip_name());
        }
        let mut names = DType::OIP_NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DType::ALL.len(), "names are distinct");
        assert_eq!(DType::from_oip_name("F32"), None, "jig's own name is not the protocol's");
    }
}
