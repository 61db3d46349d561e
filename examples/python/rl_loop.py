"""An RL loop on the data queue: rollout producers put groups of samples per prompt; the
trainer reads GRPO batches (whole groups of N samples of one prompt) as columns.

    lakeshore serve --target :memory: &                 # a server with the data routes
    LAKESHORE_URL=http://127.0.0.1:7077 python examples/python/rl_loop.py
"""

from __future__ import annotations

import asyncio
import random

import numpy as np

from lakeshore.data import GRPOGroupNSampler, Queue

N = 4  # samples per prompt
PROMPTS = 32
STEPS = 4
BATCH = 8 * N  # 8 prompts per step


async def rollout(worker: int, q: Queue) -> None:
    """A producer: for each of its prompts, N sampled completions with their rewards."""
    for p in range(worker, PROMPTS, 4):
        group = [
            {
                "prompt": f"prompt-{p}",
                "tokens": [random.randrange(50_000) for _ in range(16)],
                "reward": random.random(),
            }
            for _ in range(N)
        ]
        await q.put_batch(group, partition_id="rollouts")
        await asyncio.sleep(0.01)
    await q.flush()


async def trainer(q: Queue) -> None:
    reader = q.reader()
    sampler = GRPOGroupNSampler(n_samples_per_prompt=N, group_field="prompt")
    for step in range(STEPS):
        batch = await reader.get_batch(
            fields=["prompt", "tokens", "reward"], batch_size=BATCH, task_name="actor_train",
            partition_id="rollouts", sampler=sampler, timeout=30,
        )
        rewards = batch["reward"].reshape(-1, N)  # one row per prompt: zero-copy numpy
        advantages = (rewards - rewards.mean(axis=1, keepdims=True)) / (rewards.std(axis=1, keepdims=True) + 1e-6)
        tokens = batch["tokens"]  # (BATCH, 16) int64
        print(f"step {step}: {len(batch)} samples, tokens {tokens.shape}, |advantage| {np.abs(advantages).mean():.3f}")


async def main() -> None:
    producers = [Queue("rl-demo", batch_size=N) for _ in range(4)]
    await asyncio.gather(*(rollout(i, q) for i, q in enumerate(producers)), trainer(Queue("rl-demo")))


if __name__ == "__main__":
    asyncio.run(main())
