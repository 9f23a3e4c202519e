"""What a study says before and while its jobs run: the plan, the time left, a status line.

``hierarchy study`` used to print nothing until its first job finished (95 s for the committee
study). Now :func:`plan_line` says, before the first job, how many jobs there are, their sizes
and how the time will be estimated; :class:`Estimate` measures the work done per second as jobs
finish and gives the time left; the runner calls back while it waits, so a status line shows
the jobs finished and the time elapsed even inside a long job.

The work of a job is counted in units that scale like its cost: an SGD ensemble of ``runs``
networks in dimension ``n`` to time ``t`` takes ``~ t n`` steps of ``O(n)`` each, so
``runs n^2 t``; the ODE (seconds) counts 0; an attention job (degree, flow, seed) counts 1.
The time left is the compute seconds the finished jobs took per unit, times the units left,
over the workers running them: a measurement, not a model of the machine, and none before
the first job that counts.
"""

import time

from hierarchy.study.jobs import DIMENSION, ODE

#: seconds between two status lines while the runner waits for jobs
STATUS_INTERVAL = 5.0


def job_units(config, job):
    """The work of ``job`` in the units of the module docstring."""
    if job.kind == DIMENSION:
        return float(config["study"]["runs"]) * float(job.dimension) ** 2 * \
            float(config["solve"]["t_final"])
    return 0.0 if job.kind == ODE else 1.0


def plan_line(config, jobs, done, where):
    """The line printed before the first job: jobs, their sizes, reused ones, and ``where``
    they run (``in this process``, ``on 2 local worker processes`` ...)."""
    todo = [job for job in jobs if job not in done]
    ensembles = [job for job in todo if job.kind == DIMENSION]
    parts = []
    if ensembles:
        sizes = ", ".join(f"{job.dimension:g}" for job in ensembles)
        total = sum(job_units(config, job) for job in ensembles)
        largest = max(ensembles, key=lambda job: job.dimension)
        parts.append(f"{len(ensembles)} SGD ensemble{'s' * (len(ensembles) > 1)} of "
                     f"{config['study']['runs']} runs at N = {sizes} to "
                     f"t = {float(config['solve']['t_final']):g} (work grows as N^2: N = "
                     f"{largest.dimension:g} is {100 * job_units(config, largest) / total:.0f} % "
                     "of it)")
    others = {}
    for job in todo:
        if job.kind != DIMENSION:
            others[job.kind] = others.get(job.kind, 0) + 1
    parts += [f"{count} {kind} job{'s' * (count > 1)}" for kind, count in others.items()]
    if not parts:
        return f"study plan: nothing to run ({len(done)} jobs reused)"
    reused = f" ({len(done)} reused)" if done else ""
    return (f"study plan: {len(todo)} job{'s' * (len(todo) != 1)} to run{reused}, {where}: "
            + "; ".join(parts) + "; estimated time: measured as the jobs finish")


class Estimate:
    """The time left, from the work done so far (see the module docstring)."""

    def __init__(self, config, jobs, done, workers=1):
        self.units = {job: job_units(config, job) for job in jobs}
        self.left = sum(units for job, units in self.units.items() if job not in done)
        self.done, self.seconds, self.workers = 0.0, 0.0, max(int(workers), 1)
        self.start = time.perf_counter()

    def finished(self, job, seconds):
        """Count ``job`` as done in ``seconds`` of its own compute time."""
        units = self.units.get(job, 0.0)
        self.done += units
        self.seconds += float(seconds) if units and seconds == seconds else 0.0
        self.left = max(self.left - units, 0.0)

    @property
    def elapsed(self):
        return time.perf_counter() - self.start

    def seconds_left(self):
        """The time left in seconds; None before any counted work is done."""
        if self.done <= 0.0:
            return None
        return self.seconds / self.done * self.left / self.workers

    def text(self):
        """``about 40 s left``, or ``time left: after the first job``."""
        left = self.seconds_left()
        return "time left: measured after the first job" if left is None else \
            f"about {left:.0f} s left"
