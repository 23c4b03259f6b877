"""Fresh randomness for hidden tests."""

import os

import torch

from autograder.checks.device import DEVICE, DTYPE


class Fresh:
    """A random source seeded from the operating system: new sizes and values on every run."""

    def __init__(self) -> None:
        self.seed = int.from_bytes(os.urandom(4), "little")
        self.generator = torch.Generator().manual_seed(self.seed)

    def size(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return int(torch.randint(low, high + 1, (1,), generator=self.generator))

    def tensor(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.generator, dtype=DTYPE).to(DEVICE)

    def tokens(self, *shape: int, vocab_size: int, low: int = 0) -> torch.Tensor:
        return torch.randint(low, vocab_size, shape, generator=self.generator).to(DEVICE)

    def bools(self, *shape: int, p: float = 0.6) -> torch.Tensor:
        return (torch.rand(*shape, generator=self.generator) < p).to(DEVICE)
