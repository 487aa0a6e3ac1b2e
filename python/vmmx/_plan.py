# SPDX-License-Identifier: MIT
"""What :func:`vmmx.torch.offload` streams: the plan, on sizes alone.

Pure functions over a model described by its units' parameter sizes in
bytes, in registration order, so that the choices can be tested without
PyTorch or a GPU.  The offloader (``vmmx.torch``) measures the sizes and
the room, calls :func:`choose`, and moves what it says.
"""
import collections

# Units whose streamed part is smaller than this never stream: their copy and hooks
# would cost more than the room they give.
MIN_STREAM = 1 << 20
# The candidates to stream hold this many times the bytes that must stream (the largest
# units first, :func:`largest`): room to spread the choice evenly over the model.
SPREAD = 1.5

Plan = collections.namedtuple("Plan", "piece deficit streamed")
Plan.__doc__ = """piece: the slot size; deficit: the bytes that must stream; streamed:
[(unit index, [indices of the parameters that stream])] in unit order (the others of
such a unit stay on the GPU)."""


def align(n, a=256):
    return (n + a - 1) // a * a


def part(sizes, piece):
    """Indices of the parameters a slot of ``piece`` bytes holds, the largest first,
    returned in their order."""
    take, used = set(), 0
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        if used + align(sizes[i]) <= piece:
            take.add(i)
            used += align(sizes[i])
    return sorted(take)


def prefixes(sizes):
    """The slot sizes a unit's largest parameters fill, one more each time."""
    out, used = [], 0
    for n in sorted(sizes, reverse=True):
        used += align(n)
        out.append(used)
    return out


def largest(items, size, need):
    """The items of the largest sizes whose bytes reach ``need`` (all if they never
    do), in their order.  Streaming large units only means fewer copies and fewer
    hooks per pass for the same bytes: each costs the CPU tens of microseconds,
    which a pass bound by the CPU (decoding one token) pays in full."""
    for floor in sorted({size(x) for x in items}, reverse=True):
        if sum(size(x) for x in items if size(x) >= floor) >= need:
            return [x for x in items if size(x) >= floor]
    return list(items)


def piece_for(units, total, room, headroom, nslots, min_stream=MIN_STREAM):
    """(slot size, bytes to stream): the slot size that streams the fewest bytes.

    Each slot costs device room, so it is streamed bytes too: a unit need not
    stream whole.  For each size a unit's largest parameters can fill
    (:func:`part`), smallest first, the deficit is what does not fit beside the
    headroom and the slots; the first size whose parts (those of at least
    ``min_stream`` bytes: the others never stream) cover it wins, else the
    largest (stream all that can be)."""
    sizes = sorted({c for u in units for c in prefixes(u) if c >= min_stream}) or \
        sorted({c for u in units for c in prefixes(u)})
    for c in sizes:
        deficit = total - (room - headroom - nslots * c)
        parts = (sum(u[i] for i in part(u, c)) for u in units)
        if sum(n for n in parts if n >= min_stream) >= deficit:
            return c, deficit
    return sizes[-1], total - (room - headroom - nslots * sizes[-1])


def choose(units, total, room, headroom, nslots, min_stream=MIN_STREAM, spread=SPREAD):
    """The plan for ``units`` (lists of parameter sizes, the units that may move)
    when the model's parameters take ``total`` bytes and ``room`` bytes of device
    memory are theirs, ``headroom`` of it left for activations and ``nslots``
    slots taken from it.  Nothing streams when everything fits.

    The streamed units are the largest (:func:`largest`) spread evenly over the
    model, in proportion to their bytes, until the deficit is covered; rounding
    takes the last ones."""
    if not units or total <= room - headroom:
        return Plan(0, 0, [])
    piece, deficit = piece_for(units, total, room, headroom, nslots, min_stream)
    parts = [part(u, piece) for u in units]
    size = [sum(u[i] for i in p) for u, p in zip(units, parts)]
    cands = largest([k for k in range(len(units)) if size[k] >= min_stream],
                    lambda k: size[k], deficit * spread)
    streamed, got, quota = [], 0, 0.0
    mov = sum(size[k] for k in cands)
    for k in cands:
        quota += deficit * size[k] / mov
        if quota >= size[k] / 2 and got < deficit:
            streamed.append(k)
            got += size[k]
            quota -= size[k]
    for k in reversed(range(len(units))):
        if got >= deficit:
            break
        if size[k] >= min_stream and k not in streamed:
            streamed.append(k)
            got += size[k]
    return Plan(piece, deficit, [(k, parts[k]) for k in sorted(streamed)])
