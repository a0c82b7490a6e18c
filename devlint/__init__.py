"""devlint: a checker for PyTorch training code that must run unchanged on a CPU and on an
accelerator, and that must use mixed precision correctly.

The static linter (this package, minus :mod:`devlint.runtime`) never imports torch.
"""

__version__ = "0.1.0"
