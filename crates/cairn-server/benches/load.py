#!/usr/bin/env python3
"""Load generator for `cairn serve`: runs per second and p50/p99 latency of `POST /runs/wait`.

Each request is a stateless run of a 3-step script against a fake OpenAI server: a model call
that answers with one `ls {"path": "/"}` tool call, the tool, a model call that answers "done".
Cells: SQLite with one worker, PostgreSQL with one and with two workers (two `cairn serve`
processes on one database, clients spread across them), each at 1, 16 and 64 concurrent
clients. A cell ends after --requests runs or --time-cap seconds, whichever comes first.

Needs Python 3.11+ with httpx (e.g. /var/cache/cairn-ci/venv/bin/python) and the fake server
`fakellm.py` of ../shared/bench (stdlib only; run from there, not copied). For PostgreSQL, the
database of --pg is dropped and created afresh per configuration with `psql` (through the
maintenance database --pg-admin-db), so no other tables are touched.

    cargo build --release -p cairn-cli
    /var/cache/cairn-ci/venv/bin/python crates/cairn-server/benches/load.py \
        --cairn target/release/cairn --fakellm ../shared/bench/fakellm.py \
        --pg postgres://cairn:cairn@127.0.0.1:5432/cairn_bench

Prints one JSON line per cell on stderr and a Markdown table on stdout. Peak RSS is VmHWM of
/proc/PID/status of each server process, read after each cell (so it is the peak so far in that
process); server CPU is utime+stime from /proc/PID/stat over the cell, per run; "client CPU
share" is this script's own CPU time over the cell's wall time (near 1 would mean the load
generator, not the server, sets the pace).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

PROMPT = '[scenario:loop steps=1 tool=ls args={"path": "/"}] go'
BODY = {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": PROMPT}]}}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def pct(sorted_xs: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    if not sorted_xs:
        return float("nan")
    k = max(0, min(len(sorted_xs) - 1, int(-(-p * len(sorted_xs) // 100)) - 1))
    return sorted_xs[k]


@dataclass
class Proc:
    popen: subprocess.Popen
    url: str
    pid: int = field(init=False)

    def __post_init__(self) -> None:
        self.pid = self.popen.pid

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def start_fakellm(path: str, python: str, tmp: Path) -> Proc:
    port_file = tmp / "fakellm.port"
    p = subprocess.Popen([python, path, "--port", "0", "--port-file", str(port_file)],
                         stdout=subprocess.DEVNULL, stderr=open(tmp / "fakellm.err", "w"))
    deadline = time.time() + 20
    while not port_file.exists():
        if p.poll() is not None or time.time() > deadline:
            raise SystemExit(f"fakellm did not start: {(tmp / 'fakellm.err').read_text()}")
        time.sleep(0.05)
    return Proc(p, f"http://127.0.0.1:{port_file.read_text().strip()}/v1")


def start_serve(cairn: str, db: str, llm: str, tmp: Path, name: str, max_runs: int) -> Proc:
    home = tmp / f"home-{name}"
    work = tmp / f"work-{name}"
    home.mkdir()
    work.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "OPENAI_BASE_URL": llm,
           "OPENAI_API_KEY": "sk-fake", "NO_COLOR": "1"}
    p = subprocess.Popen([cairn, "serve", "--port", "0", "-m", "openai:fake", "--yes", "--db", db,
                          "--max-runs", str(max_runs)],
                         cwd=work, env=env, stdout=subprocess.PIPE,
                         stderr=open(tmp / f"serve-{name}.err", "w"), text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    if not line.startswith("listening on "):
        p.kill()
        raise SystemExit(f"cairn serve did not start: {line!r} "
                         f"{(tmp / f'serve-{name}.err').read_text()}")
    return Proc(p, line.split("listening on ", 1)[1].strip())


def psql(admin_url: str, sql: str) -> None:
    subprocess.run(["psql", admin_url, "-v", "ON_ERROR_STOP=1", "-qc", sql], check=True,
                   stdout=subprocess.DEVNULL)


def fresh_pg(url: str, admin_db: str) -> None:
    u = urlsplit(url)
    name = u.path.lstrip("/")
    if not name.replace("_", "").isalnum():
        raise SystemExit(f"unexpected database name {name!r}")
    admin = urlunsplit(u._replace(path="/" + admin_db, query=""))
    psql(admin, f"drop database if exists {name} with (force)")
    psql(admin, f"create database {name}")


async def one(client: httpx.AsyncClient) -> tuple[float, str | None]:
    t0 = time.perf_counter()
    try:
        r = await client.post("/runs/wait", json=BODY)
        dt = time.perf_counter() - t0
        if r.status_code != 200:
            return dt, f"HTTP {r.status_code}: {r.text[:200]}"
        v = r.json()
        msgs = v.get("messages") or []
        if v.get("run", {}).get("status") != "success" or not msgs or msgs[-1].get("content") != "done" \
                or not any(m.get("type") == "tool" for m in msgs):
            return dt, f"unexpected answer: {json.dumps(v)[:300]}"
        return dt, None
    except httpx.HTTPError as e:
        return time.perf_counter() - t0, f"{type(e).__name__}: {e}"


async def cell(servers: list[Proc], concurrency: int, requests: int, time_cap: float) -> dict:
    # One client (one keep-alive connection) per concurrent user, spread over the servers:
    # a shared httpx pool of 64 connections costs the client ~8 ms of CPU per request (its
    # pool bookkeeping), which made the load generator the bottleneck.
    clients = [httpx.AsyncClient(base_url=servers[i % len(servers)].url, timeout=120,
                                 limits=httpx.Limits(max_connections=1,
                                                     max_keepalive_connections=1))
               for i in range(concurrency)]
    try:
        # Warm-up: open the connections, fill caches; not counted.
        await asyncio.gather(*(one(c) for c in clients for _ in range(2)))
        cpu0 = {s.pid: cpu_s(s.pid) for s in servers}
        self0 = time.process_time()
        lat: list[float] = []
        errors: list[str] = []
        issued = 0
        t0 = time.perf_counter()
        deadline = t0 + time_cap

        async def client_loop(i: int) -> None:
            nonlocal issued
            c = clients[i]
            while issued < requests and time.perf_counter() < deadline:
                issued += 1
                dt, err = await one(c)
                lat.append(dt)
                if err:
                    errors.append(err)

        await asyncio.gather(*(client_loop(i) for i in range(concurrency)))
        wall = time.perf_counter() - t0
        cpu = sum(cpu_s(s.pid) - cpu0[s.pid] for s in servers)
        client_cpu = time.process_time() - self0
    finally:
        for c in clients:
            await c.aclose()
    lat.sort()
    n = len(lat)
    return {"clients": concurrency, "runs": n, "errors": len(errors),
            "first_error": errors[0] if errors else None, "wall_s": round(wall, 3),
            "runs_per_s": round(n / wall, 1) if wall else 0.0,
            "p50_ms": round(pct(lat, 50) * 1000, 1), "p99_ms": round(pct(lat, 99) * 1000, 1),
            "srv_cpu_ms_per_run": round(cpu * 1000 / n, 2) if n else None,
            "client_cpu_share": round(client_cpu / wall, 2) if wall else None,
            "vmhwm_mb": [round(status_kb(s.pid, "VmHWM") / 1024, 1) for s in servers],
            "vmrss_mb": [round(status_kb(s.pid, "VmRSS") / 1024, 1) for s in servers],
            "load": loadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cairn", required=True, help="the cairn binary (a release build)")
    ap.add_argument("--fakellm", required=True, help="path of ../shared/bench/fakellm.py")
    ap.add_argument("--fakellm-python", default=sys.executable)
    ap.add_argument("--pg", help="PostgreSQL URL of a database to recreate (omit: SQLite only)")
    ap.add_argument("--pg-admin-db", default="postgres")
    ap.add_argument("--clients", default="1,16,64")
    ap.add_argument("--requests", type=int, default=300, help="runs per cell")
    ap.add_argument("--time-cap", type=float, default=60.0, help="seconds per cell")
    ap.add_argument("--max-runs", type=int, default=64)
    ap.add_argument("--configs", default="sqlite,pg1,pg2")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the servers' logs and files")
    a = ap.parse_args()
    cairn = str(Path(a.cairn).resolve())
    clients = [int(c) for c in a.clients.split(",")]
    configs = [c for c in a.configs.split(",") if c]
    if any(c.startswith("pg") for c in configs) and not a.pg:
        configs = [c for c in configs if not c.startswith("pg")]

    tmp = Path(tempfile.mkdtemp(prefix="cairn-load-"))
    llm = start_fakellm(a.fakellm, a.fakellm_python, tmp)
    rows = []
    try:
        for ci, conf in enumerate(configs):
            if conf == "sqlite":
                db, workers = str(tmp / "cairn.db"), 1
            else:
                assert a.pg
                fresh_pg(a.pg, a.pg_admin_db)
                db, workers = a.pg, int(conf[2:] or 1)
            servers: list[Proc] = []
            try:
                for w in range(workers):
                    servers.append(start_serve(cairn, db, llm.url, tmp, f"{ci}-{conf}-{w}", a.max_runs))
                for c in clients:
                    llm_cpu0 = cpu_s(llm.pid)
                    r = asyncio.run(cell(servers, c, a.requests, a.time_cap))
                    r["fakellm_cpu_ms_per_run"] = round((cpu_s(llm.pid) - llm_cpu0) * 1000
                                                        / max(1, r["runs"]), 2)
                    r["db"] = "SQLite" if conf == "sqlite" else "PostgreSQL"
                    r["workers"] = workers
                    print(json.dumps(r), file=sys.stderr, flush=True)
                    rows.append(r)
            finally:
                for s in servers:
                    s.stop()
    finally:
        llm.stop()
        if a.keep_tmp:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    print("| database | workers | clients | runs | errors | wall s | runs/s | p50 ms | p99 ms "
          "| server CPU ms/run | fake model CPU ms/run | client CPU share | peak RSS MB (VmHWM) | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['db']} | {r['workers']} | {r['clients']} | {r['runs']} | {r['errors']} "
              f"| {r['wall_s']} | {r['runs_per_s']} | {r['p50_ms']} | {r['p99_ms']} "
              f"| {r['srv_cpu_ms_per_run']} | {r['fakellm_cpu_ms_per_run']} | {r['client_cpu_share']} "
              f"| {' + '.join(str(m) for m in r['vmhwm_mb'])} | {r['load']} |")
    if any(r["errors"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
