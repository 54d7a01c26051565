//! Agent and memory-pool discovery: the GPU, its VRAM pool and whether the
//! host reaches it (large BAR), the system pool, the access grants each needs,
//! and the HDP flush registers.

mod support;

use sigretire_hsa::Runtime;
use sigretire_rocr_standin::{Config as Machine, Standin};

fn runtime(machine: Machine) -> (Standin, std::sync::Arc<Runtime>) {
    let standin = Standin::new(machine).unwrap();
    let runtime = Runtime::load_from(standin.library_path()).unwrap();
    (standin, runtime)
}

#[test]
fn a_large_bar_gpu_offers_vram_signals_with_host_access_granted() {
    let (_standin, runtime) = runtime(Machine::default());
    let device = runtime.device(0).unwrap();
    assert_eq!(device.agent(), runtime.gpu_agents()[0]);
    assert_eq!(device.name(), "gfx942");
    assert!(device.product_name().contains("stand-in"));
    assert_eq!(device.queue_size_limits(), (64, 1 << 17));
    assert!(device.has_large_bar());
    let vram = device.vram_pool().expect("a VRAM pool");
    assert!(vram.fine_grained, "the fine-grained pool is preferred");
    assert_eq!(vram.granule, 4096);
    // The CPU agent must be granted access to each block (DISALLOWED_BY_DEFAULT).
    assert_eq!(vram.grants(), &[runtime.cpu_agent()]);
    let system = device.system_pool().expect("a system pool");
    assert!(system.fine_grained);
    // The GPU must be granted access to system memory blocks.
    assert_eq!(system.grants(), &[device.agent()]);
    assert!(device.hdp_flush().is_some());
    assert!(format!("{device:?}").contains("large_bar: true"));
}

#[test]
fn without_a_large_bar_there_is_no_vram_pool_for_signals() {
    let (_standin, runtime) = runtime(Machine {
        large_bar: false,
        ..Machine::default()
    });
    let device = runtime.device(0).unwrap();
    assert!(!device.has_large_bar());
    assert!(device.vram_pool().is_none());
    assert!(device.system_pool().is_some());
}

#[test]
fn a_gpu_without_vram_or_hdp_registers_is_described_as_such() {
    let (_standin, runtime) = runtime(Machine {
        device_pool: false,
        hdp_registers: false,
        system_pool: false,
        ..Machine::default()
    });
    let device = runtime.device(0).unwrap();
    assert!(!device.has_large_bar());
    assert!(device.vram_pool().is_none());
    assert!(device.system_pool().is_none());
    assert!(device.hdp_flush().is_none());
}

#[test]
fn peers_are_granted_access_so_gpu_waiters_on_other_devices_can_read() {
    let (_standin, runtime) = runtime(Machine {
        gpus: 3,
        ..Machine::default()
    });
    let gpus = runtime.gpu_agents().to_vec();
    assert_eq!(gpus.len(), 3);
    let device = runtime.device(1).unwrap();
    assert_eq!(device.index(), 1);
    assert_eq!(
        device.vram_pool().unwrap().grants(),
        &[runtime.cpu_agent(), gpus[0], gpus[2]]
    );
    assert_eq!(
        device.system_pool().unwrap().grants(),
        &[gpus[1], gpus[0], gpus[2]]
    );
}

#[test]
fn the_system_clock_runs_at_the_reported_frequency() {
    let (_standin, runtime) = runtime(Machine::default());
    assert_eq!(runtime.timestamp_frequency(), 1_000_000_000);
    let a = runtime.system_timestamp().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let b = runtime.system_timestamp().unwrap();
    let elapsed = sigretire_hsa::system_duration(b - a, runtime.timestamp_frequency());
    assert!(
        elapsed >= std::time::Duration::from_millis(2),
        "{elapsed:?}"
    );
}
