"""GRPO on single-digit arithmetic, end to end on Lakeshore: rollout workers are jobs, their
trajectories are records of a data queue, the trainer reads them with a staleness bound,
leases each batch and commits it after its step. See examples/rl/README.md.

    python examples/rl/train.py                        # one command: the embedded plane,
                                                       # two rollout workers, the trainer
    python examples/rl/train.py worker --run demo      # a rollout worker process (as many as you like)
    python examples/rl/train.py trainer --run demo     # the trainer; restart it after a kill: it resumes

The task: a prompt is "a+b" with a, b in 0..4; the policy answers a digit 0..9 and gets
reward 1 when it is a+b (a verifiable reward). The policy is a softmax over the answers with
a table of logits per prompt (numpy only). Each rollout job samples GROUP answers for each
of PROMPTS_PER_JOB prompts with the weights of the data queue's current version; the trainer
takes BATCH_PROMPTS whole groups per step (GRPOGroupNSampler), normalises each group's
rewards into advantages, takes a policy-gradient step and publishes the next version.

Durable state, so that a trainer SIGKILLed at any point resumes: the checkpoint (step,
weights, reward curve, every consumed global index) is a KV record of the data queue,
written before the step's batch is committed; a restarted trainer commits the batch of its
last checkpoint again (idempotent), republishes its weights and goes on. A batch read but
not checkpointed is returned by its lease and read again; a checkpointed one is never read
again. Nothing is replayed and no committed step is lost.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

import lakeshore
from lakeshore.data import WEIGHT_VERSION, Backpressure, GRPOGroupNSampler, KVInterface
from lakeshore.data import Queue as DataQueue
from lakeshore.rl import Policy, RolloutPool, Weights, rollout

DIGITS = 5  # a, b in 0..DIGITS-1
ANSWERS = 10  # the policy answers 0..9
GROUP = 8  # answers sampled per prompt (GRPO's group)
PROMPTS_PER_JOB = 4  # one rollout job: 4 prompts x 8 answers = 32 records
BATCH_PROMPTS = 8  # one step: 8 groups = 64 records
WINDOW = 2 * BATCH_PROMPTS * GROUP  # back-pressure: at most 128 unconsumed records (two steps)
MAX_STALENESS = 2  # a record of version v is trained on only while current - v <= 2
LEASE = 3.0  # seconds a batch is held for the trainer before it must be committed
WAIT_NOTE = 10.0  # seconds between the trainer's notes of what it waits for
LEARNING_RATE = 2.0
TASK = "train"
CHECKPOINT = "trainer"
CHECKPOINTS = "checkpoints"  # the KV partition of the checkpoint


def names(run: str) -> tuple[str, str]:
    """The job queue of the rollouts and the data queue of the trajectories of a run."""
    return f"{run}-rollout", f"{run}-traj"


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def expected_reward(w: np.ndarray) -> float:
    """The policy's mean probability of the right answer over every prompt: its expected
    reward, exact (no sampling noise). 0.1 for the uniform policy."""
    contexts = np.arange(DIGITS * DIGITS)
    right = contexts // DIGITS + contexts % DIGITS
    return float(softmax(w)[contexts, right].mean())


def make_rollout(run: str) -> Any:
    """The rollout job of a run: a generator bound to its job queue by lakeshore.rl.rollout;
    what it yields goes to the run's data queue tagged with the policy's version."""
    jobs, data = names(run)

    @rollout(
        queue=jobs,
        data_queue=data,
        backpressure=Backpressure(task_name=TASK, max_unconsumed=WINDOW, on_full="block", timeout=2.0),
        max_attempts=100,
        lease_ttl=10.0,
    )
    def play(policy: Policy, seed: int) -> Iterator[dict[str, Any]]:
        rng = np.random.default_rng(seed)
        w = policy.weights
        for p in range(PROMPTS_PER_JOB):
            a, b = (int(x) for x in rng.integers(0, DIGITS, 2))
            context = a * DIGITS + b
            for answer in rng.choice(ANSWERS, size=GROUP, p=softmax(w[context])):
                yield {
                    "prompt": f"{seed}-{p}",  # one group per prompt instance
                    "context": context,
                    "answer": int(answer),
                    "reward": float(answer == a + b),  # the verifiable reward
                }

    return play


def grpo_step(w: np.ndarray, batch: Any) -> np.ndarray:
    """One policy-gradient step on a batch of whole groups: advantages are the rewards
    normalised within each group (GRPO)."""
    contexts, answers, rewards = batch["context"], batch["answer"], batch["reward"]
    _, group = np.unique(batch["prompt"], return_inverse=True)
    advantage = np.zeros(len(rewards))
    for g in range(group.max() + 1):
        r = rewards[group == g]
        advantage[group == g] = (r - r.mean()) / (r.std() + 1e-6)
    probs = softmax(w[contexts])
    grad_logits = -probs
    grad_logits[np.arange(len(answers)), answers] += 1.0
    grad = np.zeros_like(w)
    np.add.at(grad, contexts, advantage[:, None] * grad_logits)
    return w + LEARNING_RATE * grad / GROUP


async def train(run: str, steps: int, *, out: Path | None = None, hold: int = 0) -> dict[str, Any]:
    """The trainer: resumes from the run's checkpoint when there is one. Returns the final
    checkpoint. ``hold=s`` (the crash test's): after reading step s's batch, print its
    indexes and wait, so that a kill lands between the read and the commit."""
    jobs, data = names(run)
    q = DataQueue(data)
    kv = KVInterface(q)
    weights = Weights(q)
    pool = RolloutPool.for_window(
        make_rollout(run), max_unconsumed=WINDOW, records_per_job=PROMPTS_PER_JOB * GROUP, payload=lambda i: {"seed": i}
    )
    ckpt: dict[str, Any] = {}
    try:
        ckpt = (await kv.kv_batch_get([CHECKPOINT], partition_id=CHECKPOINTS))[0]
    except lakeshore.NotFoundError:
        pass
    if ckpt:
        step = int(ckpt["step"])
        w = np.asarray(ckpt["weights"], dtype=np.float64).reshape(DIGITS * DIGITS, ANSWERS)
        curve = [float(x) for x in ckpt["curve"]]
        batch_rewards = [float(x) for x in ckpt["batch_rewards"]]
        consumed = [int(i) for i in ckpt["consumed"]]
        # The checkpoint is the commit point: a kill between it and the batch's commit left
        # the batch leased, not consumed. Consuming it again is harmless.
        await q.mark_consumed(TASK, [int(i) for i in ckpt["last"]])
        print(f"resumed run {run!r} at step {step} ({len(consumed)} samples consumed)", flush=True)
    else:
        step, w = 0, np.zeros((DIGITS * DIGITS, ANSWERS))
        curve, batch_rewards, consumed = [expected_reward(w)], [], []
    await weights.publish(step, w)  # the weights of the current version, for the rollouts
    reader = q.reader()
    sampler = GRPOGroupNSampler(n_samples_per_prompt=GROUP, group_field="prompt")
    start = time.monotonic()
    while step < steps:
        await pool.top_up()  # keep the window's worth of rollout jobs in flight
        batch = await next_batch(run, reader, sampler, pool)
        lag = step - int(batch[WEIGHT_VERSION].min())
        if step + 1 == hold:
            print(f"holding the batch of step {hold}: {sorted(int(i) for i in batch.global_indexes)}", flush=True)
            await asyncio.sleep(3600)
        w = grpo_step(w, batch)
        step += 1
        indexes = [int(i) for i in batch.global_indexes]
        consumed += indexes
        curve.append(expected_reward(w))
        batch_rewards.append(float(batch["reward"].mean()))
        await kv.kv_put(
            CHECKPOINT,
            {
                "step": step,
                "weights": w,
                "curve": curve,
                "batch_rewards": batch_rewards,
                "consumed": consumed,
                "last": indexes,
            },
            partition_id=CHECKPOINTS,
        )
        await reader.commit(batch.meta)
        await weights.publish(step, w)
        print(
            f"step {step:3d}  batch reward {batch_rewards[-1]:.3f}  policy reward {curve[-1]:.3f}  "
            f"staleness ≤ {lag}  {time.monotonic() - start:5.1f} s",
            flush=True,
        )
    ended = await pool.stop()  # training is over: no rollout waits for a trainer any more
    stats = await q.stats()
    print(
        f"run {run!r}: {step} steps, policy reward {curve[0]:.3f} -> {curve[-1]:.3f}, "
        f"{len(consumed)} samples trained on, {stats.get('stale_dropped', 0)} dropped as stale, "
        f"{ended} rollout jobs ended",
        flush=True,
    )
    if out is not None:
        save_curve(curve, batch_rewards, out)
    return {"step": step, "curve": curve, "batch_rewards": batch_rewards, "consumed": consumed}


async def next_batch(run: str, reader: Any, sampler: GRPOGroupNSampler, pool: RolloutPool) -> Any:
    """The step's batch: whole groups, at most MAX_STALENESS versions old, leased. Waits as
    long as it takes, saying every WAIT_NOTE seconds what it waits for: a trainer started
    before its workers (or with none) used to sit silent for two minutes, then fail with a
    bare TimeoutError."""
    while True:
        try:
            return await reader.get_batch(
                ["prompt", "context", "answer", "reward", WEIGHT_VERSION],
                BATCH_PROMPTS * GROUP,
                TASK,
                sampler=sampler,
                max_staleness=MAX_STALENESS,
                lease=LEASE,
                timeout=WAIT_NOTE,
            )
        except lakeshore.TimeoutError as e:
            jobs, _ = names(run)
            live, _ = await pool.live()
            workers = [w for w in await asyncio.to_thread(lakeshore.default_dispatch().workers) if jobs in w.queues]
            hint = (
                f"no worker serves {jobs!r}: start one, `python {sys.argv[0]} worker --run {run}`"
                if not workers
                else f"{len(workers)} rollout workers serve {jobs!r}"
            )
            print(f"waiting for rollouts: {live} rollout jobs queued or running; {hint} ({e})", flush=True)


def save_curve(curve: list[float], batch_rewards: list[float], out: Path) -> None:
    """The reward curve as CSV, and as a PNG when matplotlib is installed."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "reward.csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["step", "policy_reward", "batch_reward"])
        for s, r in enumerate(curve):
            wr.writerow([s, f"{r:.4f}", f"{batch_rewards[s - 1]:.4f}" if s else ""])
    print(f"wrote {out / 'reward.csv'}", flush=True)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (the CSV has the curve)", flush=True)
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(len(curve)), curve, label="policy reward (expected)")
    ax.plot(range(1, len(curve)), batch_rewards, ".", alpha=0.6, label="batch reward (rollouts)")
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_ylim(0, 1)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "reward.png", dpi=100)
    print(f"wrote {out / 'reward.png'}", flush=True)


def worker(run: str, stop: threading.Event | None = None) -> None:
    """A rollout worker: runs the run's rollout jobs until stopped (SIGTERM drains it)."""
    play = make_rollout(run)
    lakeshore.run_worker(queues=[play], stop=stop, handle_signals=stop is None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("role", nargs="?", choices=["all", "trainer", "worker"], default="all")
    ap.add_argument("--run", help="the run's name (its queues' prefix); default: a fresh one for 'all', 'demo' otherwise")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2, help="rollout worker threads of 'all'")
    ap.add_argument("--hold", type=int, default=0, help="the crash test's: wait after reading this step's batch")
    ap.add_argument("--out", type=Path, default=Path("rl-out"), help="where the curve goes (CSV, and PNG with matplotlib)")
    args = ap.parse_args()
    if args.steps < 0:
        ap.error(f"--steps {args.steps}: use 0 or more steps")
    if args.workers < 1 and args.role == "all":
        ap.error(f"--workers {args.workers}: 'all' needs 1 or more rollout worker threads (or run 'trainer' and 'worker' processes)")
    run = args.run or (f"rl-{int(time.time())}-{os.getpid()}" if args.role == "all" else "demo")
    if args.role == "worker":
        worker(run)
        return
    if args.role == "trainer":
        asyncio.run(train(run, args.steps, out=args.out, hold=args.hold))
        return
    started = time.monotonic()
    stop = threading.Event()
    threads = [threading.Thread(target=worker, args=(run, stop), daemon=True) for _ in range(args.workers)]
    for t in threads:
        t.start()
    try:
        asyncio.run(train(run, args.steps, out=args.out))
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
    print(f"wall time {time.monotonic() - started:.1f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
