# SPDX-License-Identifier: MIT
"""How vmmx.torch's stepper and offloader meet (Offloader.where, param_home,
param_stepped, release_deferred, copy_stream, stop_stepping, units_by_param;
_Stepper.steps, resident), without PyTorch: the package is imported in a
fresh process over a stand-in ``torch`` module, and the methods run on units
made by hand.  The GPU behaviour they serve is tested in test_torch.py."""
from subproc import child

CODE = r"""
import json, sys
from unittest import mock
for name in ("torch", "torch.cuda", "torch.cuda.memory", "torch.optim", "torch.nn",
             "torch.autograd"):
    sys.modules[name] = mock.MagicMock()
from vmmx.torch._offload import Offloader, _Unit
from vmmx.torch._stepper import _Stepper

class P:  # a parameter: compared by identity, as the offloader does
    pass

class Off(Offloader):
    def __init__(self):  # no model: the fields the methods read
        self.released, self.units, self.streamed, self.slots = [], [], [], []
        self.side, self.stepper = "side", "stepper"
    def _release(self, u):
        self.released.append(u.index)
        u.deferred, u.pending = False, set()

def unit(index, params, streamed=True, active=False):
    u = _Unit.__new__(_Unit)
    u.index, u.streamed, u.active, u.deferred = index, streamed, active, False
    u.params = [(p, 0, 0, 0) for p in params]
    u.src = ["src%d.%d" % (index, i) for i in range(len(params))]
    u.pending, u.wb_stream = set(), None
    return u

out = {}
off = Off()
a, b, c = P(), P(), P()
u0, u1, u2 = unit(0, [a, b], active=True), unit(1, [c]), unit(2, [P()], streamed=False)
off.units, off.streamed = [u0, u1, u2], [u0, u1]
by = off.units_by_param()
out["by"] = [by[id(a)].index, by[id(b)].index, by[id(c)].index, len(by)]
out["where"] = [off.where(u0), off.where(u1), off.where(u2), off.where(None)]
out["home"] = [off.param_home(u0, b), off.param_home(u0, a)]
# u0: backward done with it while a and b await their steps
u0.pending, u0.deferred = {id(a), id(b)}, True
off.param_stepped(u0, a, "s1")
out["after_a"] = [list(off.released), u0.wb_stream, sorted(u0.pending) == [id(b)]]
off.param_stepped(u0, b, "s2")
out["after_b"] = [list(off.released), u0.wb_stream]
# not deferred: stepping the last parameter does not release
u1.pending = {id(c)}
off.param_stepped(u1, c, "s3")
out["not_deferred"] = list(off.released)
# end of backward: only the deferred streamed units go
u1.deferred = True
u2.deferred = True  # not streamed: not the offloader's to release
off.release_deferred()
out["deferred"] = list(off.released)
out["copy_stream"] = [off.copy_stream()]
off.slots = ["slot"]
out["copy_stream"].append(off.copy_stream())
off.stop_stepping()
out["stepper"] = off.stepper
st = _Stepper.__new__(_Stepper)
st.group, st.unit = {id(a): 0}, {id(a): u0, id(c): u1}
out["steps"] = [st.steps(a), st.steps(c)]
st.resident(c)
st.resident(b)  # not there: nothing to do
out["unit"] = sorted(st.unit) == [id(a)]
print(json.dumps(out))
"""


def test_stepper_and_offloader_interface():
    out = child(CODE)
    assert out["by"] == [0, 0, 1, 4], out
    assert out["where"] == ["slot", "home", None, None], out
    assert out["home"] == ["src0.1", "src0.0"], out
    assert out["after_a"] == [[], "s1", True], out        # b still awaits its step
    assert out["after_b"] == [[0], "s2"], out              # released after the last one
    assert out["not_deferred"] == [0], out                 # backward still uses u1
    assert out["deferred"] == [0, 1], out                  # u1 now; u2 is resident
    assert out["copy_stream"] == [None, "side"], out
    assert out["stepper"] is None, out
    assert out["steps"] == [True, False] and out["unit"], out
