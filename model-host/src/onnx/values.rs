//! jig's tensors as ONNX Runtime's values and back: inputs read in place where their bytes allow, outputs
//! written into places or shared from ONNX Runtime's buffers, with no copy either way.

use ort::value::{DynTensor, TensorElementType, ValueType};

use super::{ModelError, TensorSpec};
use crate::{DType, Tensor};

/// Where a tensor value's data starts, without asking for its type and shape (which allocates).
pub(super) fn tensor_data(value: &ort::value::DynValue) -> Option<*const u8> {
    use ort::AsPointer;
    let mut data = std::ptr::null_mut();
    // SAFETY: `value` is a live value; for one that is not a tensor ONNX Runtime returns an error status.
    let status = unsafe { (ort::api().GetTensorMutableData)(value.ptr().cast_mut(), &mut data) };
    if !status.0.is_null() {
        // SAFETY: a non-null status is an error ONNX Runtime allocated for the caller to release.
        unsafe { (ort::api().ReleaseStatus)(status.0) };
        return None;
    }
    Some(data.cast::<u8>().cast_const())
}

/// An ONNX Runtime tensor over `place`'s bytes, which a run writes in place.
///
/// # Safety
/// The bytes must stay alive, and nothing else may touch them, until the value and every clone of it is dropped.
pub(super) unsafe fn value_over(place: &mut TensorViewMut<'_>) -> Result<ort::value::DynValue, String> {
    use ort::AsPointer;
    let api = ort::api();
    let shape: Vec<i64> = place.shape.iter().map(|&d| d as i64).collect();
    let info = ort::memory::MemoryInfo::default();
    let mut value = std::ptr::null_mut();
    // SAFETY: the pointer and length describe `place`'s bytes, which hold exactly `shape`'s elements of the
    // dtype (a `TensorViewMut` is checked when built); ONNX Runtime does not take ownership of them.
    let status = unsafe {
        (api.CreateTensorWithDataAsOrtValue)(
            info.ptr(),
            place.data.as_mut_ptr().cast(),
            place.data.len(),
            shape.as_ptr(),
            shape.len(),
            element_of(place.dtype).into(),
            &mut value,
        )
    };
    if !status.0.is_null() {
        // SAFETY: a non-null status is an error ONNX Runtime allocated; its message lives until it is released.
        let message =
            unsafe { std::ffi::CStr::from_ptr((api.GetErrorMessage)(status.0)) }.to_string_lossy().into_owned();
        unsafe { (api.ReleaseStatus)(status.0) };
        return Err(message);
    }
    let value = std::ptr::NonNull::new(value).ok_or("ONNX Runtime returned no tensor")?;
    // SAFETY: a tensor value just created, owned by nobody else; releasing it leaves the bytes alone.
    Ok(unsafe { ort::value::DynValue::from_ptr(value, Some(&ort::memory::Allocator::default())) })
}

/// A tensor's parts, borrowed: what [`Model::run_views`](super::Model::run_views) reads in place.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    pub(super) dtype: DType,
    pub(super) shape: &'a [u64],
    pub(super) data: &'a [u8],
}

impl<'a> TensorView<'a> {
    /// A view of `tensor`.
    pub fn of(tensor: &'a Tensor) -> TensorView<'a> {
        TensorView { dtype: tensor.dtype(), shape: tensor.shape(), data: tensor.data() }
    }

    /// A view of `data` as a `dtype` tensor of `shape`; `None` unless `data` holds exactly that many elements.
    pub fn new(dtype: DType, shape: &'a [u64], data: &'a [u8]) -> Option<TensorView<'a>> {
        (dtype.bytes_for(shape)? == data.len()).then_some(TensorView { dtype, shape, data })
    }
}

/// A tensor's parts with its bytes borrowed mutably: where [`Model::run_into`](super::Model::run_into) writes
/// an output.
#[derive(Debug)]
pub struct TensorViewMut<'a> {
    pub(super) dtype: DType,
    pub(super) shape: &'a [u64],
    pub(super) data: &'a mut [u8],
}

impl<'a> TensorViewMut<'a> {
    /// `data` as a `dtype` tensor of `shape`; `None` unless `data` holds exactly that many elements.
    pub fn new(dtype: DType, shape: &'a [u64], data: &'a mut [u8]) -> Option<TensorViewMut<'a>> {
        (dtype.bytes_for(shape)? == data.len()).then_some(TensorViewMut { dtype, shape, data })
    }
}

pub(super) fn tensor_spec(model: &str, io: &'static str, name: &str, ty: &ValueType) -> Result<TensorSpec, ModelError> {
    let unsupported = || ModelError::UnsupportedType { model: model.into(), io, name: name.into(), ty: ty.to_string() };
    match ty {
        ValueType::Tensor { ty: element, shape, .. } => Ok(TensorSpec {
            name: name.into(),
            dtype: dtype_of(*element).ok_or_else(unsupported)?,
            shape: shape.iter().map(|&d| u64::try_from(d).ok()).collect(),
        }),
        _ => Err(unsupported()),
    }
}

pub(super) fn dtype_of(element: TensorElementType) -> Option<DType> {
    Some(match element {
        TensorElementType::Float32 => DType::F32,
        TensorElementType::Float16 => DType::F16,
        TensorElementType::Float64 => DType::F64,
        TensorElementType::Uint8 => DType::U8,
        TensorElementType::Int8 => DType::I8,
        TensorElementType::Uint16 => DType::U16,
        TensorElementType::Int16 => DType::I16,
        TensorElementType::Int32 => DType::I32,
        TensorElementType::Int64 => DType::I64,
        TensorElementType::Bool => DType::Bool,
        _ => return None,
    })
}

pub(super) fn element_of(dtype: DType) -> TensorElementType {
    match dtype {
        DType::F32 => TensorElementType::Float32,
        DType::F16 => TensorElementType::Float16,
        DType::F64 => TensorElementType::Float64,
        DType::U8 => TensorElementType::Uint8,
        DType::I8 => TensorElementType::Int8,
        DType::U16 => TensorElementType::Uint16,
        DType::I16 => TensorElementType::Int16,
        DType::I32 => TensorElementType::Int32,
        DType::I64 => TensorElementType::Int64,
        DType::Bool => TensorElementType::Bool,
    }
}

/// `tensor` as an ONNX Runtime input: a view of its bytes, read in place, where its element type has a Rust
/// equivalent and the bytes are aligned for it; else a copy.
pub(super) fn ort_input<'a>(tensor: &TensorView<'a>) -> ort::Result<ort::session::SessionInputValue<'a>> {
    match ort_view(tensor)? {
        Some(view) => Ok(view),
        None => Ok(to_ort(tensor)?.into()),
    }
}

/// A view of `tensor`'s bytes as an ONNX Runtime input, read in place; `None` where its element type has no Rust
/// equivalent or the bytes are not aligned for it.
pub(super) fn ort_view<'a>(tensor: &TensorView<'a>) -> ort::Result<Option<ort::session::SessionInputValue<'a>>> {
    use ort::value::TensorRefMut;

    /// A view of `tensor`'s bytes as elements of `T`, or `None` when they are not aligned for `T`.
    fn view<'a, T: ort::value::PrimitiveTensorElementType + std::fmt::Debug>(
        tensor: &TensorView<'a>,
    ) -> ort::Result<Option<ort::session::SessionInputValue<'a>>> {
        let data = tensor.data;
        if data.is_empty() || !(data.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Ok(None);
        }
        let shape = ort::value::Shape::new(tensor.shape.iter().map(|&d| d as i64));
        // SAFETY: the bytes hold exactly shape.product() elements of T (a `TensorView` is checked when built) at
        // an address aligned for T, on the CPU; ONNX Runtime only reads an input; and the view lives for 'a, as
        // long as the bytes.
        let view: TensorRefMut<'a, T> =
            unsafe { TensorRefMut::from_raw(ort::memory::MemoryInfo::default(), data.as_ptr() as *mut _, shape)? };
        Ok(Some(view.into()))
    }

    match tensor.dtype {
        DType::F32 => view::<f32>(tensor),
        DType::F64 => view::<f64>(tensor),
        DType::U8 => view::<u8>(tensor),
        DType::I8 => view::<i8>(tensor),
        DType::U16 => view::<u16>(tensor),
        DType::I16 => view::<i16>(tensor),
        DType::I32 => view::<i32>(tensor),
        DType::I64 => view::<i64>(tensor),
        DType::Bool => view::<bool>(tensor),
        DType::F16 => Ok(None),
    }
}

/// An ONNX Runtime tensor holding a copy of `tensor`.
pub(super) fn to_ort(tensor: &TensorView<'_>) -> ort::Result<DynTensor> {
    let mut value = ort_tensor(tensor)?;
    let data = tensor.data;
    if !data.is_empty() {
        // SAFETY: the value was allocated on the CPU for exactly this dtype and shape, so it holds data.len()
        // bytes; the regions cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), value.data_ptr_mut().cast::<u8>(), data.len()) };
    }
    Ok(value)
}

/// An ONNX Runtime tensor on the CPU of `tensor`'s element type and shape, its bytes not yet written.
pub(super) fn ort_tensor(tensor: &TensorView<'_>) -> ort::Result<DynTensor> {
    let shape: Vec<i64> = tensor.shape.iter().map(|&d| d as i64).collect();
    DynTensor::new(&ort::memory::Allocator::default(), element_of(tensor.dtype), shape)
}

/// The bytes of an output ONNX Runtime allocated on the CPU, owned with the value that holds them.
struct OrtBytes {
    _value: ort::value::DynTensor,
    data: *const u8,
    len: usize,
}

// SAFETY: the bytes belong to the value, which may move between threads (`ort` values are `Send`); nothing
// writes them once the run that produced them has returned.
unsafe impl Send for OrtBytes {}

impl AsRef<[u8]> for OrtBytes {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `data` points at `len` bytes owned by `_value`, which lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }
}

/// An output as a [`Tensor`] that shares ONNX Runtime's buffer: no copy.
pub(super) fn from_ort(model: &str, value: ort::value::DynValue) -> Result<Tensor, ModelError> {
    let failed = |detail: String| ModelError::Run { model: model.into(), detail };
    let (dtype, shape) = match value.dtype() {
        ValueType::Tensor { ty, shape, .. } => (
            dtype_of(*ty).ok_or_else(|| failed(format!("an output has unsupported type {ty}")))?,
            shape.iter().map(|&d| d.max(0) as u64).collect::<Vec<u64>>(),
        ),
        other => return Err(failed(format!("an output is a {other}, not a tensor"))),
    };
    let len = shape.iter().product::<u64>() as usize * dtype.size();
    let tensor = value.downcast::<ort::value::DynTensorValueType>().map_err(|e| failed(e.to_string()))?;
    if len == 0 {
        return Tensor::new(dtype, shape, Vec::new()).map_err(|e| failed(e.to_string()));
    }
    let data = tensor.data_ptr().cast::<u8>();
    let bytes = jig_wire::Bytes::from_owner(OrtBytes { _value: tensor, data, len });
    Tensor::new(dtype, shape, bytes).map_err(|e| failed(e.to_string()))
}
