# SPDX-License-Identifier: MIT
"""offload's plan (vmmx._plan) on fake models described by their parameter sizes:
no PyTorch, no GPU, so these run on CI."""
from vmmx import _plan

MiB = 1 << 20
GiB = 1 << 30
Q = 4096 * 4096 * 2          # a Llama-2-7B attention projection, bf16
M = 4096 * 11008 * 2         # an MLP projection
NORM = 4096 * 2
VOCAB = 32000 * 4096 * 2


def llama7b():
    """Units in registration order: per layer q, k, v, o, gate, up, down, two norms;
    the embedding first and the head last."""
    units = [[VOCAB]]
    for _ in range(32):
        units += [[Q], [Q], [Q], [Q], [M], [M], [M], [NORM], [NORM]]
    return units + [[NORM], [VOCAB]]


def total(units):
    return sum(sum(u) for u in units)


def streamed_bytes(units, plan):
    return sum(units[k][i] for k, idx in plan.streamed for i in idx)


def test_everything_fits_nothing_streams():
    units = llama7b()
    plan = _plan.choose(units, total(units), room=20 * GiB, headroom=GiB, nslots=2)
    assert plan == _plan.Plan(0, 0, [])


def test_7b_at_one_and_a_half_times_the_cap_streams_the_largest_units_spread_evenly():
    units = llama7b()
    cap = int(12.90 * GiB / 1.5)
    plan = _plan.choose(units, total(units), room=cap, headroom=cap // 8, nslots=2)
    assert plan.piece == M  # one MLP projection a slot
    assert plan.deficit == total(units) - (cap - cap // 8 - 2 * M)
    got = streamed_bytes(units, plan)
    assert plan.deficit <= got < plan.deficit + M  # the deficit, not a unit more
    # only the largest units (the MLP projections): fewer copies and hooks per pass
    assert {units[k][0] for k, _ in plan.streamed} == {M}
    assert len(plan.streamed) == -(-plan.deficit // M)
    # spread over the model: as many in each half of the layers, within one
    layer = [(k - 1) // 9 for k, _ in plan.streamed]
    first = sum(1 for x in layer if x < 16)
    assert abs(first - (len(layer) - first)) <= 1, layer


def test_a_slot_holds_part_of_a_unit_when_that_streams_fewer_bytes():
    # 20 units of a 32 MiB and an 8 MiB parameter, 800 MiB past a 640 MiB cap
    units = [[32 * MiB, 8 * MiB]] * 20
    plan = _plan.choose(units, total(units), room=640 * MiB, headroom=64 * MiB, nslots=2)
    assert plan.piece == 32 * MiB
    assert plan.streamed and all(idx == [0] for _, idx in plan.streamed)
    assert streamed_bytes(units, plan) >= plan.deficit


def test_units_under_a_mebibyte_never_stream():
    # a slot of 512 KiB would stream the fewest bytes, but such units never stream:
    # the slot is sized for the units that do
    units = [[512 * 1024]] * 100 + [[4 * MiB]] * 10
    plan = _plan.choose(units, total(units), room=70 * MiB, headroom=8 * MiB, nslots=2)
    assert plan.piece == 4 * MiB
    assert plan.streamed and all(units[k][0] == 4 * MiB for k, _ in plan.streamed)
    assert streamed_bytes(units, plan) >= plan.deficit


def test_more_slots_stream_more_bytes():
    units = llama7b()
    cap = int(12.90 * GiB / 1.5)
    two = _plan.choose(units, total(units), room=cap, headroom=cap // 8, nslots=2)
    four = _plan.choose(units, total(units), room=cap, headroom=cap // 8, nslots=4)
    assert four.deficit - two.deficit == 2 * M  # each slot is device room too
    assert streamed_bytes(units, four) > streamed_bytes(units, two)


def test_a_deficit_past_every_unit_streams_all_it_can():
    units = [[8 * MiB]] * 4 + [[256 * 1024]] * 4
    plan = _plan.choose(units, total(units), room=4 * MiB, headroom=0, nslots=2)
    assert plan.piece == 8 * MiB
    assert [k for k, _ in plan.streamed] == [0, 1, 2, 3]


def test_part_prefixes_largest():
    assert _plan.align(1) == 256 and _plan.align(256) == 256 and _plan.align(257) == 512
    assert _plan.part([10, 300, 100], 512) == [1]  # aligned: 512, then 256 more
    assert _plan.part([10, 300, 100], 768) == [1, 2]
    assert _plan.prefixes([10, 300, 100]) == [512, 768, 1024]
    assert _plan.largest([1, 5, 5, 3], lambda x: x, 9) == [5, 5]
    assert _plan.largest([1, 5, 5, 3], lambda x: x, 12) == [5, 5, 3]
    assert _plan.largest([1, 2], lambda x: x, 100) == [1, 2]
