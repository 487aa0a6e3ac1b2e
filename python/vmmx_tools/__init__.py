# SPDX-License-Identifier: MIT
"""The vmmx package's tools, kept out of the library package ``vmmx``.

``vmmx_tools.bench`` (with ``bench_hf``) is ``vmmx-torch-bench``, the PyTorch
benchmark; ``vmmx_tools.plot`` is ``vmmx-plot``, the charts of any libvmmx
tool's JSON.  They use ``vmmx`` as any program does.
"""
