//! GPU memory through NVML, loaded at run time (nvml-wrapper dlopens
//! libnvidia-ml), so leakspy runs on machines without NVIDIA drivers: there
//! `GpuSampler::init` returns the note to write instead of an error.

use leakspy_trace::{GpuDevice, GpuProc, GpuSample};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;

pub const NO_GPU_NOTE: &str = "no NVIDIA GPU/driver: GPU memory not sampled";

pub struct GpuSampler {
    nvml: Nvml,
    count: u32,
}

impl GpuSampler {
    /// NVML with at least one device, or the message of a note saying why not.
    pub fn init() -> Result<Self, String> {
        let nvml = Nvml::init().map_err(|e| format!("{NO_GPU_NOTE} ({e})"))?;
        let count = nvml
            .device_count()
            .map_err(|e| format!("{NO_GPU_NOTE} (device count: {e})"))?;
        if count == 0 {
            return Err(format!("{NO_GPU_NOTE} (NVML sees no device)"));
        }
        Ok(GpuSampler { nvml, count })
    }

    /// Memory of every device, and of the processes of `tree` on it.
    /// A device that fails to answer is left out of this sample.
    pub fn sample(&self, t: f64, tree: &[u32]) -> GpuSample {
        let mut devices = Vec::with_capacity(self.count as usize);
        for index in 0..self.count {
            let Ok(dev) = self.nvml.device_by_index(index) else {
                continue;
            };
            let Ok(mem) = dev.memory_info() else {
                continue;
            };
            let mut procs: Vec<GpuProc> = Vec::new();
            let listed = dev
                .running_compute_processes()
                .into_iter()
                .chain(dev.running_graphics_processes())
                .flatten();
            for p in listed {
                if !tree.contains(&p.pid) || procs.iter().any(|q| q.pid == p.pid) {
                    continue;
                }
                let used = match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => b,
                    UsedGpuMemory::Unavailable => 0,
                };
                procs.push(GpuProc { pid: p.pid, used });
            }
            devices.push(GpuDevice {
                index,
                name: dev.name().unwrap_or_default(),
                used: mem.used,
                total: mem.total,
                procs,
            });
        }
        GpuSample { t, devices }
    }
}
