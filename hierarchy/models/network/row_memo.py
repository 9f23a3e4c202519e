"""Rows the joint engine (:mod:`.joint`) has integrated, given back only where integrating
them again would give the same bits (:class:`RowMemo`).

The single-field engine (:mod:`.engine`) has none: measured on tanh ``K = M = 1`` and relu/erf
``K = M = 2, 3`` (whole commands, with every lookup a miss against with the memo, in one
run), it saved nothing, because the tightened re-solve moves those trajectories (by 2e-11 on
tanh) or does not run at all (relu/erf is exact).
"""

import collections

import numpy as np

#: rows a :class:`RowMemo` keeps (about 1 kB each): a solve's calls and its output times,
#: thousands of rows, with room to spare
MEMO_ROWS = 10_000


class RowMemo:
    """Rows already integrated, given back only where integrating them again would give the
    same bits.

    An engine raises a row's order until two orders agree to every output's target, or to
    the row's highest order, and is deterministic (on any number of threads). So at targets
    no looser, output by output, a row would give again the result it gave

    1. when that result meets the new targets too: the orders below it missed the old
       targets, hence the new ones, and the row stops at the same order;
    2. when it ran to its highest order: the orders below missed the old targets, and it
       stops there again. The module says so (:data:`.joint.CAPPED`); a row that missed the
       old targets did so too (or the module could not do it: NaN with an infinite error,
       which it would not do again).

    Nothing else is served. This makes the certification's tightened re-solve free on the
    states it shares with the solve (all of them where every row is at its highest order, as
    on the XOR preset, which then repeats the solve bit for bit), and the risk and the
    stated error at an output time, asked one after the other, one pass.
    """

    def __init__(self, size=MEMO_ROWS):
        self.size = size
        self.rows = collections.OrderedDict()
        #: rows served, rows integrated (for tests and benches)
        self.hits = self.misses = 0

    @staticmethod
    def keys(*inputs):
        """Each row's inputs, bit for bit (one ``bytes`` a row): arrays with the rows along
        their first axis."""
        rows = len(inputs[0])
        flat = np.concatenate([np.asarray(a, dtype=float).reshape(rows, -1) for a in inputs],
                              axis=1)
        return [row.tobytes() for row in flat]

    def get(self, key, targets):
        """``(values, errors, order)`` of the row ``key`` at ``targets``, or None."""
        known = self.rows.get(key)
        if known is None:
            return None
        old, values, errors, order, capped = known
        if np.all(targets <= old) and (capped or np.all(errors <= targets)
                                       or not np.all(errors <= old)):
            self.rows.move_to_end(key)
            self.hits += 1
            return values, errors, order
        return None

    def put(self, key, targets, values, errors, order, capped):
        """Remember a row integrated at ``targets`` (the oldest row goes beyond :attr:`size`);
        ``capped``: it ran to its highest order."""
        self.misses += 1
        self.rows[key] = (targets.copy(), values.copy(), errors.copy(), order, bool(capped))
        self.rows.move_to_end(key)
        if len(self.rows) > self.size:
            self.rows.popitem(last=False)
