//! Devices: how many there are, what one is called, and whether it can carry
//! completion signals.
//!
//! A completion signal here is a 64-bit word in pinned host memory that the
//! GPU writes with a stream memory operation and other streams wait on. That
//! needs three capabilities, checked once when a context is created
//! ([`DeviceInfo::require_signal_support`]) so that a device without them is
//! a typed error, never a failure in the middle of a submission.

use crate::driver::initialize;
use crate::error::{Error, Result, check};
use crate::version::CudaVersion;
use cudarc::driver::sys::{self, CUdevice, CUdevice_attribute};

/// What the backend knows about a device.
///
/// ```
/// use sigretire_cuda::{CudaVersion, DeviceInfo};
///
/// let info = DeviceInfo {
///     ordinal: 0,
///     name: "NVIDIA H200".into(),
///     compute_capability: (9, 0),
///     driver: CudaVersion::new(13, 0),
///     can_map_host_memory: true,
///     unified_addressing: true,
///     stream_mem_ops_64: true,
///     wait_value_nor: true,
/// };
/// assert!(info.require_signal_support().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device's ordinal (as `CUDA_VISIBLE_DEVICES` numbers them).
    pub ordinal: u32,
    /// The device's name (`NVIDIA H200`).
    pub name: String,
    /// Major and minor compute capability (9.0 for Hopper).
    pub compute_capability: (u32, u32),
    /// The CUDA version the driver supports.
    pub driver: CudaVersion,
    /// `CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY`: pinned host memory can be
    /// mapped into the device's address space.
    pub can_map_host_memory: bool,
    /// `CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING`: host and device share one
    /// address space, so a signal's device pointer equals its host pointer.
    pub unified_addressing: bool,
    /// `CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS`: the stream can
    /// write and wait on 64-bit words.
    pub stream_mem_ops_64: bool,
    /// `CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR`: reported only
    /// (the backend waits with `EQ`, which every device supports).
    pub wait_value_nor: bool,
}

impl DeviceInfo {
    /// Reads the device's name, capability and attributes.
    pub(crate) fn query(ordinal: u32, device: CUdevice) -> Result<Self> {
        let attribute = |attribute| query_attribute(device, attribute);
        Ok(Self {
            ordinal,
            name: query_name(device)?,
            compute_capability: (
                attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32,
                attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32,
            ),
            driver: crate::driver::driver_version()?,
            can_map_host_memory: attribute(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
            )? != 0,
            unified_addressing: attribute(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
            )? != 0,
            stream_mem_ops_64: attribute(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
            )? != 0,
            wait_value_nor: attribute(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR,
            )? != 0,
        })
    }

    /// Whether the device can carry completion signals: a typed error
    /// naming the first missing capability otherwise.
    ///
    /// ```
    /// use sigretire_cuda::{CudaVersion, DeviceInfo, Error};
    ///
    /// let old = DeviceInfo {
    ///     ordinal: 1,
    ///     name: "Old GPU".into(),
    ///     compute_capability: (6, 0),
    ///     driver: CudaVersion::new(12, 0),
    ///     can_map_host_memory: true,
    ///     unified_addressing: true,
    ///     stream_mem_ops_64: false,
    ///     wait_value_nor: false,
    /// };
    /// let Err(Error::MissingCapability { ordinal, missing, .. }) = old.require_signal_support() else {
    ///     panic!("a device without 64-bit stream memory operations cannot carry signals");
    /// };
    /// assert_eq!((ordinal, missing), (1, "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS"));
    /// ```
    pub fn require_signal_support(&self) -> Result<()> {
        let missing = |missing, why| {
            Err(Error::MissingCapability {
                ordinal: self.ordinal,
                name: self.name.clone(),
                missing,
                why,
            })
        };
        if !self.can_map_host_memory {
            return missing(
                "CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY",
                "completion signals need (they live in mapped, pinned host memory)",
            );
        }
        if !self.stream_mem_ops_64 {
            return missing(
                "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS",
                "completion signals need (the GPU writes and waits on 64-bit words)",
            );
        }
        Ok(())
    }
}

/// How many CUDA devices the driver sees.
///
/// ```no_run
/// println!("{} CUDA device(s)", sigretire_cuda::device_count()?);
/// # Ok::<(), sigretire_cuda::Error>(())
/// ```
pub fn device_count() -> Result<u32> {
    initialize()?;
    let mut count = 0;
    // SAFETY: the driver is loaded and initialised (`initialize`); the
    // pointer is to a live local.
    check("cuDeviceGetCount", unsafe {
        sys::cuDeviceGetCount(&mut count)
    })?;
    Ok(count.max(0) as u32)
}

/// The driver's handle of device `ordinal`, or [`Error::NoDevice`].
pub(crate) fn device_handle(ordinal: u32) -> Result<CUdevice> {
    let found = match device_count() {
        Err(Error::NoDevice { .. }) => 0,
        other => other?,
    };
    if ordinal >= found {
        return Err(Error::NoDevice {
            requested: ordinal,
            found,
        });
    }
    let mut device = 0;
    // SAFETY: initialised (via `device_count`), the ordinal is in range, and
    // the pointer is to a live local.
    check("cuDeviceGet", unsafe {
        sys::cuDeviceGet(&mut device, ordinal as i32)
    })?;
    Ok(device)
}

fn query_attribute(device: CUdevice, attribute: CUdevice_attribute) -> Result<i32> {
    let mut value = 0;
    // SAFETY: `device` came from `cuDeviceGet`; the pointer is to a live local.
    check("cuDeviceGetAttribute", unsafe {
        sys::cuDeviceGetAttribute(&mut value, attribute, device)
    })?;
    Ok(value)
}

fn query_name(device: CUdevice) -> Result<String> {
    let mut buffer = [0u8; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL included, into the
    // buffer, which lives across the call; `device` came from `cuDeviceGet`.
    check("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(buffer.as_mut_ptr().cast(), buffer.len() as i32, device)
    })?;
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    Ok(String::from_utf8_lossy(&buffer[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> DeviceInfo {
        DeviceInfo {
            ordinal: 0,
            name: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            driver: CudaVersion::new(13, 0),
            can_map_host_memory: true,
            unified_addressing: true,
            stream_mem_ops_64: true,
            wait_value_nor: true,
        }
    }

    #[test]
    fn a_capable_device_passes() {
        assert_eq!(h200().require_signal_support(), Ok(()));
        let no_nor = DeviceInfo {
            wait_value_nor: false,
            ..h200()
        };
        assert_eq!(no_nor.require_signal_support(), Ok(()), "NOR is not needed");
    }

    #[test]
    fn missing_stream_memory_operations_are_a_typed_error() {
        let device = DeviceInfo {
            stream_mem_ops_64: false,
            ..h200()
        };
        let Err(Error::MissingCapability { missing, .. }) = device.require_signal_support() else {
            panic!("expected a missing capability");
        };
        assert_eq!(missing, "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS");
    }

    #[test]
    fn unmappable_host_memory_is_a_typed_error() {
        let device = DeviceInfo {
            can_map_host_memory: false,
            ..h200()
        };
        let error = device.require_signal_support().unwrap_err();
        assert!(error.to_string().contains("CAN_MAP_HOST_MEMORY"), "{error}");
        assert!(error.to_string().contains("NVIDIA H200"), "{error}");
    }

    #[test]
    fn asking_for_a_device_without_the_driver_is_a_typed_error() {
        match device_handle(0) {
            Err(Error::LibraryMissing) => assert!(!crate::library_present()),
            Err(Error::NoDevice { requested: 0, .. }) | Ok(_) => assert!(crate::library_present()),
            Err(other) => println!("driver present but unusable: {other}"),
        }
    }
}
