//! Tensors: construction from typed slices and typed, shaped views.
//!
//! A [`Tensor`] owns little-endian bytes (WebAssembly is little-endian, so they are the values' native
//! representation). [`Tensor::view`] gives a typed [`TensorView`] that borrows the bytes when they are aligned for
//! the element type and copies them otherwise.

use std::borrow::Cow;

use crate::bindings::jig::function::types as wire;
use crate::{Error, Result};

/// Element type of a tensor.
pub use wire::Dtype as DType;

impl DType {
    /// The Open Inference Protocol's name of this element type (`FP32`, `INT64`, …), by which a tensor envelope
    /// ([`crate::envelope::TensorMeta`]) names it: the host's one table of them, [`jig_wire::DType::oip_name`].
    pub fn oip_name(self) -> &'static str {
        host(self).oip_name()
    }

    /// The element type the Open Inference Protocol names `name`; otherwise an invalid-input error that lists the
    /// names there are.
    pub fn from_oip_name(name: &str) -> Result<Self> {
        jig_wire::DType::from_oip_name(name).map(guest).ok_or_else(|| {
            Error::invalid_input(format!("`datatype` \"{name}\" is none of {}", jig_wire::DType::OIP_NAMES.join(", ")))
        })
    }

    /// Bytes per element ([`jig_wire::DType::size`]).
    pub fn size(self) -> usize {
        host(self).size()
    }
}

/// The host's element type that is `dtype`: the two mirror `dtype` in `wit/function.wit`, variant for variant.
fn host(dtype: DType) -> jig_wire::DType {
    match dtype {
        DType::F32 => jig_wire::DType::F32,
        DType::F16 => jig_wire::DType::F16,
        DType::F64 => jig_wire::DType::F64,
        DType::U8 => jig_wire::DType::U8,
        DType::I8 => jig_wire::DType::I8,
        DType::U16 => jig_wire::DType::U16,
        DType::I16 => jig_wire::DType::I16,
        DType::I32 => jig_wire::DType::I32,
        DType::I64 => jig_wire::DType::I64,
        DType::Bool => jig_wire::DType::Bool,
    }
}

/// The element type that is the host's `dtype`; see [`host`].
fn guest(dtype: jig_wire::DType) -> DType {
    match dtype {
        jig_wire::DType::F32 => DType::F32,
        jig_wire::DType::F16 => DType::F16,
        jig_wire::DType::F64 => DType::F64,
        jig_wire::DType::U8 => DType::U8,
        jig_wire::DType::I8 => DType::I8,
        jig_wire::DType::U16 => DType::U16,
        jig_wire::DType::I16 => DType::I16,
        jig_wire::DType::I32 => DType::I32,
        jig_wire::DType::I64 => DType::I64,
        jig_wire::DType::Bool => DType::Bool,
    }
}

/// A Rust type that can be the element of a tensor.
pub trait Element: bytemuck::Pod {
    /// The tensor dtype holding this type.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => { $(impl Element for $t { const DTYPE: DType = DType::$d; })* };
}
element!(f32 => F32, f64 => F64, u8 => U8, i8 => I8, u16 => U16, i16 => I16, i32 => I32, i64 => I64);

/// A dense, row-major tensor.
///
/// The wire record itself, behind a wrapper that glue builds only with bytes matching the shape (one from the
/// host is checked when viewed), so that [`infer`](crate::infer) hands the host the caller's tensors where they
/// lie, with no copy.
#[derive(Debug, Clone)]
#[repr(transparent)]
pub struct Tensor(wire::Tensor);

impl PartialEq for Tensor {
    fn eq(&self, other: &Self) -> bool {
        (self.0.dtype, &self.0.shape, &self.0.data) == (other.0.dtype, &other.0.shape, &other.0.data)
    }
}

impl Tensor {
    /// A tensor from raw little-endian bytes; fails unless `data` holds exactly product(shape) elements.
    pub fn new(dtype: DType, shape: &[u64], data: Vec<u8>) -> Result<Self> {
        let expected = element_count(shape)
            .and_then(|n| n.checked_mul(dtype.size()))
            .ok_or_else(|| Error::invalid_input(format!("tensor shape {shape:?} is too large")))?;
        if data.len() != expected {
            return Err(Error::invalid_input(format!(
                "tensor of dtype {dtype:?} and shape {shape:?} needs {expected} bytes, got {}",
                data.len()
            )));
        }
        Ok(Self::from_parts(dtype, shape, data))
    }

    /// The wire records of `tensors`, as they lie.
    pub(crate) fn as_wire(tensors: &[Tensor]) -> &[wire::Tensor] {
        // SAFETY: `Tensor` is `repr(transparent)` over `wire::Tensor`, so a slice of one is a slice of the other.
        unsafe { &*(std::ptr::from_ref(tensors) as *const [wire::Tensor]) }
    }

    /// A tensor over `data`, which the caller made to fit `shape`.
    pub(crate) fn from_parts(dtype: DType, shape: &[u64], data: Vec<u8>) -> Self {
        debug_assert_eq!(element_count(shape).map(|n| n * dtype.size()), Some(data.len()));
        Tensor(wire::Tensor { dtype, shape: shape.to_vec(), data })
    }

    /// A tensor of `shape` holding `values`.
    ///
    /// # Panics
    /// If `values.len()` is not the product of `shape`: that is a bug in the calling glue.
    pub fn from_slice<T: Element>(shape: &[u64], values: &[T]) -> Self {
        assert_eq!(
            element_count(shape),
            Some(values.len()),
            "tensor shape {shape:?} does not match {} values",
            values.len()
        );
        Self::from_parts(T::DTYPE, shape, bytemuck::cast_slice(values).to_vec())
    }

    /// An `f32` tensor; see [`Tensor::from_slice`].
    pub fn from_f32(shape: &[u64], values: &[f32]) -> Self {
        Self::from_slice(shape, values)
    }

    /// A `u8` tensor; see [`Tensor::from_slice`].
    pub fn from_u8(shape: &[u64], values: &[u8]) -> Self {
        Self::from_slice(shape, values)
    }

    /// An `i64` tensor; see [`Tensor::from_slice`].
    pub fn from_i64(shape: &[u64], values: &[i64]) -> Self {
        Self::from_slice(shape, values)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The dimensions, outermost first.
    pub fn shape(&self) -> &[u64] {
        &self.0.shape
    }

    /// The raw little-endian bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0.data
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.0.data.len() / self.0.dtype.size()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.0.data.is_empty()
    }

    /// A typed view of the elements; fails if the tensor's dtype is not `T`'s or its bytes do not match its shape
    /// (a tensor from the host is checked here, not trusted).
    pub fn view<T: Element>(&self) -> Result<TensorView<'_, T>> {
        if self.0.dtype != T::DTYPE {
            return Err(Error::internal(format!(
                "expected a tensor of dtype {:?}, got {:?} (shape {:?})",
                T::DTYPE,
                self.0.dtype,
                self.0.shape
            )));
        }
        if element_count(&self.0.shape).and_then(|n| n.checked_mul(self.0.dtype.size())) != Some(self.0.data.len()) {
            return Err(Error::internal(format!(
                "tensor of shape {:?} carries {} bytes of {:?}",
                self.0.shape,
                self.0.data.len(),
                self.0.dtype
            )));
        }
        let values = match bytemuck::try_cast_slice(&self.0.data) {
            Ok(aligned) => Cow::Borrowed(aligned),
            Err(_) => Cow::Owned(bytemuck::pod_collect_to_vec(&self.0.data)),
        };
        Ok(TensorView { shape: &self.0.shape, values })
    }
}

/// Elements of a [`Tensor`] as `T`, with its shape.
#[derive(Debug, Clone)]
pub struct TensorView<'a, T: Element> {
    shape: &'a [u64],
    values: Cow<'a, [T]>,
}

impl<T: Element> TensorView<'_, T> {
    /// The dimensions, outermost first.
    pub fn shape(&self) -> &[u64] {
        self.shape
    }

    /// All elements in row-major order.
    pub fn as_slice(&self) -> &[T] {
        &self.values
    }

    /// The element at a multi-dimensional `index`, or `None` when it is out of bounds or has the wrong rank.
    pub fn get(&self, index: &[u64]) -> Option<T> {
        if index.len() != self.shape.len() {
            return None;
        }
        let mut flat = 0u64;
        for (&i, &dim) in index.iter().zip(self.shape) {
            if i >= dim {
                return None;
            }
            flat = flat * dim + i;
        }
        self.values.get(usize::try_from(flat).ok()?).copied()
    }

    /// The elements of row `i` of the outermost dimension (e.g. one item of a batch).
    pub fn row(&self, i: usize) -> Option<&[T]> {
        let rows = usize::try_from(*self.shape.first()?).ok()?;
        if i >= rows {
            return None;
        }
        let width = self.values.len() / rows;
        self.values.get(i * width..(i + 1) * width)
    }
}

/// Product of `shape`, or `None` on overflow.
fn element_count(shape: &[u64]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
}

impl From<Tensor> for wire::Tensor {
    fn from(t: Tensor) -> Self {
        t.0
    }
}

impl From<wire::Tensor> for Tensor {
    fn from(t: wire::Tensor) -> Self {
        Tensor(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_round_trip_values_and_index_row_major() {
        let t = Tensor::from_f32(&[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let v = t.view::<f32>().unwrap();
        assert_eq!(v.get(&[1, 2]), Some(5.0));
        assert_eq!(v.get(&[2, 0]), None);
        assert_eq!(v.row(1), Some(&[3.0, 4.0, 5.0][..]));
        assert!(t.view::<i64>().is_err(), "dtype mismatch must be an error");
    }

    #[test]
    fn new_rejects_data_that_does_not_match_the_shape() {
        assert!(Tensor::new(DType::F32, &[2, 2], vec![0; 15]).is_err());
        assert!(Tensor::new(DType::I64, &[u64::MAX, 2], vec![]).is_err());
        assert_eq!(Tensor::new(DType::I64, &[2], vec![0; 16]).unwrap().len(), 2);
    }

    #[test]
    fn element_types_take_the_hosts_protocol_names_and_read_them_back() {
        for host_type in jig_wire::DType::ALL {
            let dtype = guest(host_type);
            assert_eq!(host(dtype), host_type);
            assert_eq!(dtype.oip_name(), host_type.oip_name());
            assert_eq!(DType::from_oip_name(dtype.oip_name()).unwrap(), dtype);
        }
        assert_eq!(DType::F32.oip_name(), "FP32");
        let err = DType::from_oip_name("F32").unwrap_err().to_string();
        assert!(err.contains("`datatype` \"F32\" is none of FP32, FP16"), "{err}");
    }

    #[test]
    fn unaligned_bytes_are_copied_into_a_view() {
        let mut bytes = [0u8; 9];
        bytes[1..].copy_from_slice(bytemuck::cast_slice(&[1.5f32, -2.0]));
        let t = Tensor::new(DType::F32, &[2], bytes[1..].to_vec()).unwrap();
        assert_eq!(t.view::<f32>().unwrap().as_slice(), &[1.5, -2.0]);
    }
}
