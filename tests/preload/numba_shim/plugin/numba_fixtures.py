# SPDX-License-Identifier: MIT
"""pytest plugin for running numba-cuda's installed tests (numba_suite.sh):
the fixture and option that numba-cuda's test classes ask for come from a
conftest.py in its source tree, which the installed package does not ship.
Without them every test errors with "fixture 'initialize_from_pytest_config'
not found", natively and under vmmx-run alike.

NumPy 2.4 removed np.row_stack, which numba-cuda's compiler still names:
every kernel compile then fails (AttributeError), in both runs.  It is
aliased to np.vstack, as the frameworks.sh numba client does."""
import numpy
import pytest

if not hasattr(numpy, "row_stack"):
    numpy.row_stack = numpy.vstack


def pytest_addoption(parser):
    try:
        parser.addoption("--dump-failed-filechecks", action="store_true",
                         help="numba-cuda: dump reproducers of failed FileCheck tests")
    except ValueError:  # numba-cuda's own conftest is loaded too
        pass


@pytest.fixture(scope="class")
def initialize_from_pytest_config(request):
    request.cls._dump_failed_filechecks = request.config.getoption("dump_failed_filechecks")
