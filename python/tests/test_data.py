"""The data queue (lakeshore.data) against a real server with the data routes.

The binary is ``$LAKESHORE_DATA_BIN``, else ``$LAKESHORE_BIN``, else the session's; the
tests skip, saying why, when it does not serve the data routes of docs/http-api.md.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from lakeshore import HttpDispatch, InvalidError
from lakeshore.data import (
    GRPOGroupNSampler,
    KVInterface,
    Queue,
    RankAwareSampler,
    SequentialSampler,
)
from tests.conftest import Server, start_server, stop_server

pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def data_server(lakeshore_bin: str) -> Iterator[Server]:
    binary = os.environ.get("LAKESHORE_DATA_BIN") or lakeshore_bin
    home = Path(tempfile.mkdtemp(prefix="ls-data-"))
    s = start_server(binary, home, "adm-data")
    try:
        probe = httpx.get(s.url + "/v1/namespaces/default/data", headers={"Authorization": "Bearer adm-data"})
        if probe.status_code == 404:
            pytest.skip(f"{binary} does not serve the data routes (branch data, docs/http-api.md 'Data queues'); "
                        "set LAKESHORE_DATA_BIN to a binary built from a tree that has them")
        yield s
    finally:
        stop_server(s)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def d(data_server: Server) -> Iterator[HttpDispatch]:
    dd = HttpDispatch(data_server.url, token=data_server.admin_token)
    yield dd
    dd.close()


def test_seed_put_flush_get(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, storage_path="./data", dispatch=d)
        await q.put({"step": 1, "reward": 0.5})
        await q.put({"step": 2, "reward": 0.8})
        await q.flush()
        records = await q.get(limit=100)
        assert records == [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.8}]
        assert await q.get(limit=100) == []  # this object read them
        await q.put({"step": 3, "obs": np.arange(3, dtype=np.float32), "toks": [1, 2]})
        (r,) = await q.get(limit=10)  # a get sends the buffer first
        assert r["step"] == 3 and r["toks"] == [1, 2]
        assert r["obs"].dtype == np.float32 and r["obs"].tolist() == [0.0, 1.0, 2.0]

    asyncio.run(main())


def test_auto_flush_batch_size_and_stats(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=3, auto_flush_interval_sec=0.2, enable_metrics=True)
        await q.put_batch([{"i": i} for i in range(3)])  # a full batch is sent at once
        other = Queue(qname, dispatch=d)
        assert len(await other.get(limit=10)) == 3
        await q.put({"i": 3})
        await asyncio.sleep(0.6)  # the interval sends it
        assert [r["i"] for r in await other.get(limit=10)] == [3]
        st = await q.stats()
        assert st["len"] == 4 and st["client"]["puts"] == 4

    asyncio.run(main())


def test_stream(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1)

        async def produce() -> None:
            for i in range(5):
                await q.put({"i": i})
                await asyncio.sleep(0.05)

        p = asyncio.create_task(produce())
        seen: list[int] = []
        async for batch in Queue(qname, dispatch=d).stream(limit=1000, wait=True, timeout=1.0):
            seen.extend(r["i"] for r in batch)
        await p
        assert seen == list(range(5))

    asyncio.run(main())


def test_meta_data_batches_and_consumption(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=1000)
        await q.put_batch(
            [{"prompt": f"p{p}", "reward": float(i), "ids": [p, i, 7]} for p in range(4) for i in range(4)],
            partition_id="train_0",
        )
        await q.flush()
        reader = q.reader()
        meta = await reader.get_meta(
            fields=["ids", "reward"], batch_size=8, task_name="actor_train", partition_id="train_0", sampler=SequentialSampler()
        )
        assert meta.size == 8 and meta.global_indexes == list(range(8)) and meta.field_names == ["ids", "reward"]
        batch = await reader.get_data(meta, partition_id="train_0")
        assert batch["reward"].dtype == np.float64 and batch["reward"].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
        assert not batch["reward"].flags["OWNDATA"]  # a view on the Arrow buffer: zero-copy
        assert batch["ids"].shape == (8, 3)  # equal-length lists: one 2-D array
        assert batch.global_indexes.tolist() == list(range(8))
        rest = await reader.get_batch(fields=["reward"], batch_size=8, task_name="actor_train", partition_id="train_0")
        assert rest.global_indexes.tolist() == list(range(8, 16))  # consumed ones are skipped
        assert await q.consumed("actor_train", "train_0") == 16
        await q.reset_consumption("actor_train", partition_id="train_0")
        again = await reader.get_batch(fields=["reward"], batch_size=4, task_name="actor_train", partition_id="train_0")
        assert again.global_indexes.tolist() == [0, 1, 2, 3]
        await q.mark_consumed("other", global_indexes=[0, 1, 2, 3], partition_id="train_0")
        nxt = await reader.get_batch(fields=["reward"], batch_size=4, task_name="other", partition_id="train_0")
        assert nxt.global_indexes.tolist() == [4, 5, 6, 7]
        # GRPO: whole groups of n per prompt; a batch size not a multiple of n is refused.
        g = await reader.get_batch(
            fields=["prompt"], batch_size=8, task_name="grpo", partition_id="train_0",
            sampler=GRPOGroupNSampler(n_samples_per_prompt=4, group_field="prompt"),
        )
        prompts = g["prompt"].tolist()
        assert len(prompts) == 8 and prompts[:4] == [prompts[0]] * 4 and prompts[4:] == [prompts[4]] * 4
        with pytest.raises(InvalidError):
            await reader.get_batch(
                fields=["prompt"], batch_size=6, task_name="grpo2", partition_id="train_0",
                sampler=GRPOGroupNSampler(n_samples_per_prompt=4, group_field="prompt"),
            )
        # Rank-aware: the ranks of one step get the same records.
        r0, r1 = q.reader(0, 2), q.reader(1, 2)
        b0 = await r0.get_batch(fields=["reward"], batch_size=2, task_name="dp", partition_id="train_0", sampler=RankAwareSampler())
        b1 = await r1.get_batch(fields=["reward"], batch_size=2, task_name="dp", partition_id="train_0", sampler=RankAwareSampler())
        assert len(b0) == 2 and len(b1) == 2
        with pytest.raises(InvalidError):
            q.reader(2, 2)

    asyncio.run(main())


def test_kv_interface(d: HttpDispatch, qname: str) -> None:
    async def main() -> None:
        q = Queue(qname, dispatch=d)
        kv = KVInterface(q)
        await kv.kv_put("sess-42", data={"reward": 1.5, "t": np.ones(2)}, partition_id="prod", tag={"status": "complete"})
        await kv.kv_batch_put(["sess-43", "sess-44"], data={"reward": [0.1, 0.2]}, partition_id="prod")
        got = await kv.kv_batch_get(["sess-42", "sess-43"], partition_id="prod")
        assert got[0]["reward"] == 1.5 and got[0]["t"].tolist() == [1.0, 1.0] and got[1] == {"reward": 0.1}
        pairs = dict(await kv.kv_list("prod"))
        assert pairs == {"sess-42": {"status": "complete"}, "sess-43": {}, "sess-44": {}}
        await kv.kv_clear(["sess-42"], partition_id="prod")
        assert set(dict(await kv.kv_list("prod"))) == {"sess-43", "sess-44"}

    asyncio.run(main())


def test_rl_loop_example(data_server: Server) -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "examples" / "python" / "rl_loop.py"
    env = dict(os.environ, LAKESHORE_URL=data_server.url, LAKESHORE_TOKEN=data_server.admin_token)
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("32 samples, tokens (32, 16)") == 4


def test_lost_put_answer_is_not_put_twice(d: HttpDispatch, qname: str) -> None:
    """A batch whose answer was lost (the server committed it, the connection broke) is
    sent again, with its put id, by the next send: the server answers the first put's
    indexes, so the queue holds the batch once and no record is lost."""

    async def main() -> None:
        q = Queue(qname, dispatch=d, batch_size=100)
        real = q._call
        lost = {"n": 0}

        async def lose_first_answer(method: str, path: str, **kw: object) -> object:
            ans = await real(method, path, **kw)
            if path == "/records" and method == "POST" and lost["n"] == 0:
                lost["n"] += 1
                raise httpx.RemoteProtocolError("the server went away before answering")
            return ans

        q._call = lose_first_answer  # type: ignore[method-assign]
        await q.put_batch([{"i": 0}, {"i": 1}])
        with pytest.raises(httpx.RemoteProtocolError):
            await q.flush()
        await q.put({"i": 2})
        await q.flush()  # the lost batch first, with its put id, then the new one
        other = Queue(qname, dispatch=d)
        got = await other.get(limit=10)
        assert [r["i"] for r in got] == [0, 1, 2]

    asyncio.run(main())
