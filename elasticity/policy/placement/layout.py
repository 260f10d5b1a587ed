"""The MPI-aware job controller's layout (Liu and Guitart, Algorithm 2): ranks to workers, and what each requests.

Ranks are dealt round-robin, so the counts differ by at most one; a worker with n_i of the job's N_t ranks
requests n_i/N_t of the job's CPU and memory, and the hostfile gives it n_i slots. With exclusive CPUs a
worker's CPU becomes whole cores (what the kubelet's static CPU manager pins) and its limit equals its request.
"""

from __future__ import annotations

from dataclasses import dataclass

MILLI = 1000


@dataclass(frozen=True)
class Worker:
    index: int
    ranks: tuple[int, ...]
    cpu_milli: int
    memory_bytes: int

    @property
    def slots(self) -> int:
        return len(self.ranks)


@dataclass(frozen=True)
class JobLayout:
    """Every worker of one job, in index order."""

    workers: tuple[Worker, ...]

    @property
    def ranks(self) -> int:
        return sum(w.slots for w in self.workers)

    def hostfile(self, hostnames: list[str]) -> str:
        """Open MPI hostfile lines: each worker's hostname with slots = its rank count."""
        if len(hostnames) != len(self.workers):
            raise ValueError(f"{len(hostnames)} hostnames for {len(self.workers)} workers")
        return "".join(f"{host} slots={w.slots}\n" for host, w in zip(hostnames, self.workers, strict=True))

    def worker_of(self, rank: int) -> int:
        for worker in self.workers:
            if rank in worker.ranks:
                return worker.index
        raise KeyError(f"rank {rank} is not in this job")


def round_robin(ranks: int, workers: int) -> tuple[tuple[int, ...], ...]:
    """Rank r goes to worker r mod N_w."""
    if not 1 <= workers <= ranks:
        raise ValueError(f"{workers} workers cannot hold {ranks} ranks (between 1 and {ranks})")
    return tuple(tuple(range(w, ranks, workers)) for w in range(workers))


def mpi_aware_layout(ranks: int, workers: int, job_cpu_milli: int, job_memory_bytes: int) -> JobLayout:
    """Algorithm 2: worker i with n_i ranks requests cpu*n_i/N_t and memory*n_i/N_t (rounded so they sum exactly)."""
    if job_cpu_milli < 0 or job_memory_bytes < 0:
        raise ValueError("job requests must not be negative")
    dealt = round_robin(ranks, workers)
    out = []
    given_cpu = given_memory = 0
    seen = 0
    for index, members in enumerate(dealt):
        seen += len(members)
        # cumulative rounding: the shares add up to the job's totals exactly
        cpu = job_cpu_milli * seen // ranks - given_cpu
        memory = job_memory_bytes * seen // ranks - given_memory
        given_cpu += cpu
        given_memory += memory
        out.append(Worker(index, members, cpu, memory))
    return JobLayout(tuple(out))


def exclusive_cpus(worker: Worker) -> int:
    """Whole cores for a worker under exclusive CPUs: its request rounded up, at least one."""
    return max(1, -(-worker.cpu_milli // MILLI))
