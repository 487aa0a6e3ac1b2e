# SPDX-License-Identifier: MIT
# The vmmx Python package: pure Python over libvmmx's exported API (ctypes),
# installed into $(pythondir) when configure found a python, with the
# vmmx-torch-bench command.  `pip install ./python` installs the same files.
vmmxpydir = $(pythondir)/vmmx
vmmx_py_sources = %D%/vmmx/__init__.py %D%/vmmx/_lib.py %D%/vmmx/_args.py %D%/vmmx/_plan.py %D%/vmmx/cupy.py
# The tools (vmmx-torch-bench, vmmx-plot), a package of their own beside the library's
vmmxtoolsdir = $(pythondir)/vmmx_tools
vmmx_tools_sources = %D%/vmmx_tools/__init__.py %D%/vmmx_tools/bench.py %D%/vmmx_tools/bench_hf.py \
	%D%/vmmx_tools/plot.py
# vmmx.torch by concern: the allocator hook-up, prefetch, offload, the stepper, memory helpers
vmmxtorchdir = $(pythondir)/vmmx/torch
vmmx_torch_sources = %D%/vmmx/torch/__init__.py %D%/vmmx/torch/_alloc.py %D%/vmmx/torch/_mem.py \
	%D%/vmmx/torch/_prefetch.py %D%/vmmx/torch/_offload.py %D%/vmmx/torch/_stepper.py \
	%D%/vmmx/torch/_sleep.py
if HAVE_PYTHON
vmmxpy_PYTHON = $(vmmx_py_sources)
vmmxtorch_PYTHON = $(vmmx_torch_sources)
vmmxtools_PYTHON = $(vmmx_tools_sources)
nodist_vmmxpy_PYTHON = %D%/vmmx/_build.py
bin_SCRIPTS += %D%/vmmx-torch-bench
endif
EXTRA_DIST += $(vmmx_py_sources) $(vmmx_torch_sources) $(vmmx_tools_sources) %D%/pyproject.toml %D%/README.md %D%/sitedir.py %D%/_backend/vmmx_backend.py docs/FRAMEWORKS.md \
	%D%/tests/conftest.py %D%/tests/test_bench.py %D%/tests/test_core.py %D%/tests/test_core_args.py %D%/tests/test_core_state.py %D%/tests/test_lib_layout.py \
	%D%/tests/test_torch.py %D%/tests/test_torch_iface.py %D%/tests/test_cupy.py %D%/tests/test_plan.py \
	%D%/tests/test_sleep.py %D%/tests/test_torch_sleep.py \
	%D%/tests/run.py %D%/tests/subproc.py
CLEANFILES += %D%/vmmx/_build.py %D%/vmmx-torch-bench

# Where make install puts libvmmx, for the package to find it without VMMX_LIBRARY.
%D%/vmmx/_build.py: Makefile
	$(AM_V_GEN)$(MKDIR_P) %D%/vmmx && \
	printf '# SPDX-License-Identifier: MIT\n# Written by make: where make install puts libvmmx.\nLIBDIR = "%s"\n' \
		'$(libdir)' > $@

%D%/vmmx-torch-bench: Makefile
	$(AM_V_GEN)$(MKDIR_P) %D% && \
	printf '#!%s\n# SPDX-License-Identifier: MIT\nimport sys\nsys.path.insert(0, "%s")\nfrom vmmx_tools.bench import main\nsys.exit(main())\n' \
		'$(PYTHON)' '$(pythondir)' > $@ && chmod +x $@
