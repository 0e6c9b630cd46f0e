"""A copy of a model directory whose weights were perturbed: the "quantised or swapped" candidate
of the eval gate's real-vLLM test. Run with the vLLM venv's Python (it has torch and safetensors):
``.venv-vllm/bin/python -m tests.realvllm.perturb SRC DST SCALE``.

Every floating-point tensor gets seeded Gaussian noise of ``SCALE`` times its own standard
deviation (0.05: about what a coarse quantisation moves; the same seed gives the same copy). The
tokenizer and config files are copied as they are, so the copy serves the same tokens and names.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def perturb(src: Path, dst: Path, scale: float) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.safetensors", "lora"))
    generator = torch.Generator().manual_seed(1)
    for weights in sorted(src.glob("*.safetensors")):
        tensors = load_file(weights)
        for name, tensor in tensors.items():
            if tensor.is_floating_point() and tensor.numel() > 1:
                noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float32)
                tensors[name] = (tensor.float() + scale * tensor.float().std() * noise).to(tensor.dtype)
        save_file(tensors, dst / weights.name, metadata={"format": "pt"})
    return dst


if __name__ == "__main__":
    perturb(Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]))
