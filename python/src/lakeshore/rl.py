"""Rollouts as jobs, trajectories as records (issue 26, item 8): the job plane runs the
rollouts, the data queue (:mod:`lakeshore.data`) holds what they produce::

    from lakeshore.data import Backpressure, Queue as DataQueue
    from lakeshore.rl import RolloutPool, Weights, rollout

    @rollout(queue="rollouts", data_queue="trajectories",
             backpressure=Backpressure(task_name="train", max_unconsumed=256, on_full="block"))
    def play(policy, prompts: int, seed: int):
        for record in sample(policy.weights, prompts, seed):   # policy.version: its version
            yield record                  # → the data queue, tagged weight_version=policy.version

    # the trainer
    weights = Weights(DataQueue("trajectories"))
    await weights.publish(0, initial)                      # scope key, then set_version(0)
    pool = RolloutPool.for_window(play, max_unconsumed=256, records_per_job=64,
                                  payload=lambda i: {"prompts": 8, "seed": i})
    await pool.top_up()                                    # N rollout jobs in flight
    ...                                                    # get_batch(max_staleness=k, lease=…), step, commit
    await weights.publish(step, new_weights)               # workers reload at their next job

    # a rollout worker (any process that reaches the plane)
    run_worker(queues=[play])

- :class:`Weights` publishes a policy version's weights under a scope key
  (:func:`lakeshore.scope`; ``{key}/{version}``, wire-encoded) *before* advancing the data
  queue's current version (:meth:`lakeshore.data.Queue.set_version`), so a worker that sees
  version v always finds v's weights.
- :func:`rollout` binds a generator ``fn(policy, **kwargs)`` to a job queue (a plain
  :func:`lakeshore.udf` body): each job reads the data queue's current version, reloads the
  weights when it changed since this process's last job (one cached :class:`Policy` per
  process and data queue), runs ``fn`` and puts every yielded record to the data queue tagged
  ``weight_version=policy.version``. A put held by the queue's back-pressure waits (the job
  stays running, heartbeated): back-pressure, not failure. The job's result is
  ``{"records": n, "weight_version": v}``.
- :class:`RolloutPool` keeps N rollout jobs queued or running, N sized by the back-pressure
  window (:meth:`RolloutPool.for_window`); :meth:`RolloutPool.top_up` submits what is
  missing, with idempotent keys, numbered on from the job queue's newest jobs, so a
  restarted trainer neither loses nor doubles its rollouts.

See docs/python.md ("Rollouts as jobs") and examples/rl/.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import inspect
import itertools
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lakeshore import errors, wire
from lakeshore.data import Backpressure
from lakeshore.data import Queue as DataQueue
from lakeshore.data import _version
from lakeshore.dispatch import Dispatch, default_dispatch
from lakeshore.queue import Envelope
from lakeshore.queue import Queue as JobQueue
from lakeshore.scopes import Scope
from lakeshore.worker import UDF, JobStopped, _running_job, udf

__all__ = ["Policy", "Weights", "rollout", "RolloutPool"]

# The job whose rollout put ids (rollout.{job id}.{k}) a rollout's run has taken in this
# context: only the first run of a rollout in its own job's attempt takes them (see body).
_put_ids_taken: contextvars.ContextVar[Any] = contextvars.ContextVar("lakeshore_rollout_put_ids_taken", default=None)

_HELD_POLL = 1.0  # seconds: the longest one wait of a rollout's put held by back-pressure


@dataclasses.dataclass(frozen=True)
class Policy:
    """The weights a rollout job runs with.

    Attributes:
        version: the policy version (the data queue's current version when the job
            started); every record the job yields is tagged with it.
        weights: the value published for that version (:meth:`Weights.publish`), decoded;
            None when no weights were published for it.
    """

    version: int
    weights: Any


class Weights:
    """Policy weights by version, in a scope, next to a data queue's current version.

    Args:
        queue: the data queue whose current version the weights follow.
        scope: where the weights live (default ``Scope(queue.name)``: the default store,
            ``$LAKESHORE_STORE`` or ``file://$LAKESHORE_HOME/blobs``, which every process of
            one machine shares; use an ``s3://``/``gs://`` store across machines).
        key: the key prefix of the weights: version v is ``{key}/{v:012d}``.

    A published version's key is never rewritten (a version is immutable), so a reader
    never sees half of an update; older versions are left in place (no pruning).
    """

    def __init__(self, queue: DataQueue, scope: Scope | str | None = None, key: str = "weights") -> None:
        self.queue = queue
        self.scope = scope if isinstance(scope, Scope) else Scope(queue.name if scope is None else scope)
        self.key = key

    def _key(self, version: int) -> str:
        return f"{self.key}/{_version('version', version):012d}"

    async def publish(self, version: int, weights: Any) -> None:
        """Store ``weights`` (any wire value: numpy arrays, maps of them, bytes) as
        ``version``, then advance the data queue's current version to it. Publishing a
        version again rewrites nothing when the queue is already there (a restarted trainer
        repeats its last publish harmlessly); a version below the current one raises
        InvalidError (versions never go back)."""
        key = self._key(version)
        current = await self.queue.version()
        if version < current:
            raise errors.InvalidError(
                f"invalid version {version}: the queue {self.queue.name!r} is at version {current}; versions never go back",
                field="version",
                value=version,
                rule=f"≥ {current}",
            )
        if not (version == current and self.scope.exists(key)):
            self.scope.write_bytes(key, wire.encode(weights))
        await self.queue.set_version(version)

    def load(self, version: int) -> Any:
        """The weights published as ``version``, decoded. Raises NotFoundError when none
        were."""
        return wire.decode(self.scope.read_bytes(self._key(version)))

    def exists(self, version: int) -> bool:
        """Whether weights were published as ``version``."""
        return self.scope.exists(self._key(version))

    async def current(self) -> Policy:
        """The queue's current version with its weights (None when none were published)."""
        v = await self.queue.version()
        return Policy(v, self.load(v) if self.exists(v) else None)


# The Policy each process last loaded, by (plane, data queue, scope, key): a job reloads only
# when the queue's version moved.
_policies: dict[tuple[int, str, str, str, str], Policy] = {}
_policies_lock = threading.Lock()


async def _refresh(w: Weights) -> Policy:
    """The current Policy of ``w``, reloading its weights only when the version changed."""
    cache_key = (id(w.queue.dispatch), w.queue.name, w.scope.store, w.scope.prefix, w.key)
    v = await w.queue.version()
    with _policies_lock:
        p = _policies.get(cache_key)
    if p is not None and p.version == v:
        return p
    p = Policy(v, w.load(v) if w.exists(v) else None)
    with _policies_lock:
        _policies[cache_key] = p
    return p


def rollout(
    fn: Callable[..., Iterable[Mapping[str, Any]]] | None = None,
    *,
    data_queue: str,
    queue: str | None = None,
    dispatch: Dispatch | None = None,
    partition_id: str = "default",
    backpressure: Backpressure | None = None,
    flush_every: int | None = None,
    scope: Scope | str | None = None,
    weights_key: str = "weights",
    max_attempts: int | None = None,
    attempt_timeout: float | None = None,
    lease_ttl: float | None = None,
    mode: str | None = None,
    requires: Mapping[str, Any] | str | None = None,
) -> Any:
    """Bind a rollout generator to a job queue: ``@rollout(data_queue="trajectories")``.

    ``fn(policy, **kwargs)`` takes a :class:`Policy` first (the job's weights and version)
    and yields records (maps of field → wire value); its other parameters are the job's
    payload, as for :func:`lakeshore.udf` (``play.submit(prompts=8, seed=3)``). Returns the
    :class:`~lakeshore.UDF` (``run_worker(queues=[play])`` runs it), whose body:

    1. reads the data queue's current version and, when it moved since this process's last
       job, loads that version's weights (:class:`Weights` with ``scope`` and
       ``weights_key``);
    2. runs ``fn`` and puts each record to ``data_queue`` (partition ``partition_id``)
       tagged ``weight_version=policy.version``: all of a job's records in one put at its
       end (a group never split), or every ``flush_every`` records;
    3. under ``backpressure`` (:class:`~lakeshore.data.Backpressure`; use
       ``on_full="block"``) a put the trainer's unconsumed records hold back waits — the
       job stays running and heartbeated — until the trainer consumes, in server-side
       waits of at most 1 s (or ``timeout`` when shorter), so that a killed job stops
       about a second after its worker notices the kill (at its next heartbeat);
    4. returns ``{"records": n, "weight_version": v}``.

    ``queue`` (default: the function's name), ``dispatch`` (default: the process default,
    for the jobs and the data queue alike), ``max_attempts``, ``attempt_timeout``,
    ``lease_ttl``, ``mode`` (a compute mode of ``lakeshore.yaml``: its run declaration,
    resources and shipped code, docs/fabric.md) and ``requires`` (what each run needs
    from its worker) are :func:`lakeshore.udf`'s. A retried job runs ``fn`` again, but writes
    no record twice: put number ``k`` of every attempt carries the put id
    ``rollout.{job id}.{k}``, so a put an earlier attempt committed (its worker killed
    before the ack) is answered with its indexes, not written again; a repeat of another
    record count (an ``fn`` whose output varies) is refused by the server and taken as
    done, the earlier attempt's records standing. Put ids are kept 10 minutes
    (``PutIDRetention``): a later retry writes again. Only the worker's run of a job of
    the rollout's own queue takes these ids: a rollout called inline (by a job of another
    queue, or a second time within one job) puts with random ids, as outside a worker.

    Raises:
        InvalidError: a ``fn`` that is not a generator function, or one without a first
            parameter for the policy; a ``flush_every`` below 1.
    """
    if flush_every is not None and (not isinstance(flush_every, int) or flush_every < 1):
        raise errors.InvalidError(
            f"invalid flush_every {flush_every!r}: want an integer ≥ 1 (None: one put per job)",
            field="flush_every",
            value=flush_every,
            rule="≥ 1",
        )

    # A blocked put waits on the server at most _HELD_POLL at a time and is sent again (the
    # loop below), so that a job killed meanwhile stops within about that long: the body's
    # thread only sees JobStopped when it runs Python again.
    held = backpressure
    if backpressure is not None and backpressure.on_full == "block":
        held = dataclasses.replace(backpressure, timeout=min(_HELD_POLL, backpressure.timeout or _HELD_POLL))

    def bind(f: Callable[..., Iterable[Mapping[str, Any]]]) -> UDF[Any, Any]:
        if not (inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f)):
            raise errors.InvalidError(
                f"@rollout needs a generator function (one that yields records); {getattr(f, '__name__', f)!r} is not one",
                field="fn",
                rule="a generator function fn(policy, **kwargs)",
            )
        sig = inspect.signature(f)
        params = list(sig.parameters.values())
        if not params or params[0].kind not in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            raise errors.InvalidError(
                f"@rollout: {getattr(f, '__name__', f)!r} needs a first parameter for the Policy (fn(policy, **kwargs))",
                field="fn",
                rule="a generator function fn(policy, **kwargs)",
            )

        async def produce(kwargs: dict[str, Any], job: Any) -> dict[str, Any]:
            # The worker stops a killed job's body by raising JobStopped in its thread. Here
            # the thread runs this event loop, and the exception may land in one of the
            # loop's callbacks, which asyncio logs and swallows: such a landing cancels
            # this coroutine instead, so the body stops wherever the exception lands.
            loop, main = asyncio.get_running_loop(), asyncio.current_task()

            def stopped(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
                if isinstance(context.get("exception"), JobStopped) and main is not None:
                    main.cancel()
                    return
                loop.default_exception_handler(context)

            loop.set_exception_handler(stopped)
            d = dispatch or default_dispatch()
            dq = DataQueue(
                data_queue,
                dispatch=d,
                batch_size=flush_every or (1 << 30),
                auto_flush_interval_sec=0,
                partition_id=partition_id,
                backpressure=held,
            )
            if job is not None:
                # Batch k of every attempt of this job has the put id rollout.{job id}.{k}:
                # a batch an earlier attempt wrote (its worker killed after the put, or
                # its fn raising after a flush_every put) is answered with its indexes,
                # not written again.
                numbers = itertools.count()
                job_id = job.id
                dq._next_put_id = lambda: f"rollout.{job_id}.{next(numbers)}"
            policy = await _refresh(Weights(dq, scope, weights_key))
            n = 0

            async def put(record: Mapping[str, Any]) -> None:
                try:
                    await dq.put(record, weight_version=policy.version)
                except errors.QueueFullError:
                    pass  # buffered (with its put id): the next send goes again
                except errors.InvalidError as e:
                    if not _written_before(e):
                        raise

            gen: Any = f(policy, **kwargs)
            if inspect.isasyncgen(gen):
                rec: Any
                async for rec in gen:
                    await put(rec)
                    n += 1
            else:
                for rec in gen:
                    await put(rec)
                    n += 1
            while True:
                try:
                    await dq.flush()
                    break
                except errors.QueueFullError:
                    # Held by the trainer's unconsumed records (a blocking put's timeout, or
                    # a rejecting one): the records stay buffered; ask again shortly.
                    await asyncio.sleep(0.05)
                except errors.InvalidError as e:
                    if not _written_before(e):
                        raise
                    # That batch was dropped; the next flush sends the rest.
            return {"records": n, "weight_version": policy.version}

        name = queue or str(getattr(f, "__name__", "rollout"))

        def own_job() -> Any:
            # The job whose id names this run's puts: the running job when it is one of this
            # rollout's queue and no run of it took its ids yet in this attempt (the worker's
            # call of this body). Any other run (the rollout called inline by a job of another
            # queue, or twice by one) keeps random put ids: ids from the running job would
            # repeat those of the other run, and its records would be answered with the
            # other run's indexes and never written.
            job = _running_job.get()
            if job is None or job.queue != name or _put_ids_taken.get() is job:
                return None
            _put_ids_taken.set(job)
            return job

        @functools.wraps(f)
        def body(**kwargs: Any) -> dict[str, Any]:
            try:
                return asyncio.run(produce(kwargs, own_job()))
            except asyncio.CancelledError:
                raise JobStopped("the rollout was stopped") from None

        body.__signature__ = sig.replace(parameters=params[1:])  # type: ignore[attr-defined]
        del body.__wrapped__  # inspect.signature must see the payload's parameters only
        bound: UDF[Any, Any] = udf(
            body,
            queue=name,
            dispatch=dispatch,
            max_attempts=max_attempts,
            attempt_timeout=attempt_timeout,
            lease_ttl=lease_ttl,
            mode=mode,
            requires=requires,
        )
        return bound

    return bind(fn) if fn is not None else bind


def _written_before(e: errors.InvalidError) -> bool:
    """Whether a rollout's put was refused because an earlier attempt of its job wrote a
    batch of another size under the same put id (a fn whose records vary between
    attempts): that batch stands, and this attempt's batch of that number is not written.
    Only the code ``put_id_reused`` says so: a put id refused for its form (too long, bad
    characters) is raised, never taken for records written (as Go's ``rl.writtenBefore``)."""
    return isinstance(e, errors.PutIDReusedError)


class RolloutPool:
    """Keeps ``in_flight`` jobs of a rollout function queued or running.

    Args:
        fn: the rollout (:func:`rollout`; any :class:`~lakeshore.UDF` works).
        in_flight: how many of its jobs to keep queued or running (≥ 1).
        payload: the keyword arguments of job ``i`` (0, 1, 2, … over the job queue's
            life): ``payload(i) -> dict``.
        dispatch: the plane (default: the function's, else the process default).
        key_prefix: job ``i`` is submitted with key ``{key_prefix}{i}``, so a repeated
            top-up (a trainer restarted between a submit and its answer) makes no second
            job.

    Raises:
        InvalidError: ``in_flight`` below 1.
    """

    def __init__(
        self,
        fn: UDF[Any, Any],
        in_flight: int,
        payload: Callable[[int], Mapping[str, Any]],
        *,
        dispatch: Dispatch | None = None,
        key_prefix: str = "rollout-",
    ) -> None:
        if not isinstance(in_flight, int) or isinstance(in_flight, bool) or in_flight < 1:
            raise errors.InvalidError(
                f"invalid in_flight {in_flight!r}: want an integer ≥ 1", field="in_flight", value=in_flight, rule="≥ 1"
            )
        self.fn = fn
        self.in_flight = in_flight
        self.payload = payload
        self.key_prefix = key_prefix
        d = dispatch or fn._dispatch or default_dispatch()
        self.queue = JobQueue(fn.queue_name, dispatch=d, kind=fn._queue_kind, lease_ttl=fn._lease_ttl)
        self._options = fn.submit_options(None, self.queue.sync)

    @classmethod
    def for_window(
        cls,
        fn: UDF[Any, Any],
        max_unconsumed: int,
        records_per_job: int,
        payload: Callable[[int], Mapping[str, Any]],
        **kw: Any,
    ) -> RolloutPool:
        """A pool sized by the back-pressure window: ``max(1, max_unconsumed //
        records_per_job)`` jobs, as many as the trainer's unconsumed-record bound
        (:class:`~lakeshore.data.Backpressure` ``max_unconsumed``) holds the output of, so
        rollouts run ahead of the trainer by at most one window (more jobs would only wait
        on back-pressure). ``kw``: the constructor's."""
        if not isinstance(records_per_job, int) or records_per_job < 1:
            raise errors.InvalidError(
                f"invalid records_per_job {records_per_job!r}: want an integer ≥ 1",
                field="records_per_job",
                value=records_per_job,
                rule="≥ 1",
            )
        return cls(fn, max(1, int(max_unconsumed) // records_per_job), payload, **kw)

    async def live(self) -> tuple[int, int]:
        """``(queued + running, held)``: the pool's jobs in flight now, and how many the job
        queue holds (those not trimmed)."""
        st = await self.queue.stats()
        live = int(st.get("queued", 0)) + int(st.get("running", 0))
        return live, sum(int(v) for v in st.values())

    async def top_up(self) -> list[str]:
        """Submit jobs until ``in_flight`` are queued or running (call it after each
        trainer step: the jobs that finished are replaced); return the new jobs' ids."""
        live, _ = await self.live()
        missing = self.in_flight - live
        if missing <= 0:
            return []
        first = await self._next()
        envs = [
            Envelope(payload=self.fn.payload((), self.payload(i)), key=f"{self.key_prefix}{i}", **self._options)
            for i in range(first, first + missing)
        ]
        return await self.queue.submit_many(envs)

    async def _next(self) -> int:
        """The next job's ``i``: one more than the highest ``i`` of the jobs keyed
        ``{key_prefix}{i}`` among the queue's newest 1,000 (0 when there are none). Not the
        count of the queue's jobs: that goes back when finished jobs are trimmed (or the
        plane's retention deletes them), and the numbers it then named were used already,
        their keys freed, so their payloads were submitted again (as Go's rl.Pool)."""
        page = await self.queue.list(key_prefix=self.key_prefix, limit=1000)
        out = 0
        for inv in page.invocations:
            rest = (inv.key or "")[len(self.key_prefix) :]
            if rest.isdigit() and rest.isascii():
                out = max(out, int(rest) + 1)
        return out

    async def stop(self) -> int:
        """End the pool's jobs when training is over: cancel the queued ones and kill the
        running ones (a rollout held by back-pressure would otherwise wait for a trainer
        that no longer reads). Return how many it ended."""
        ended = 0
        for state in ("queued", "running"):
            for _ in range(100):  # pages; each pass ends what it lists
                page = await self.queue.list(state=state, limit=500)
                n = 0
                for inv in page.invocations:
                    n += int(await (self.queue.cancel(inv.id) if state == "queued" else self.queue.kill(inv.id)))
                ended += n
                if not page.next or n == 0:
                    break
        return ended
