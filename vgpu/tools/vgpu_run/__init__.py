"""vgpu-run's implementation (the command itself is vgpu/tools/vgpu-run)."""
