#!/usr/bin/env python3
"""The checkpoint service as real processes (docs/service.md): a cairnd controller and two managers on
127.0.0.1, their agents started on demand, applications under `cairn run` with the `service` knob set.

Cases (--case):
  two_apps           heat2d and the synthetic app checkpointing at once, each with a node killed (pull)
  push               heat2d with a node killed, push mode, snapshot = cow (the ranks write from slots the copier filled)
  agent_killed       the agent moving a version is killed (SIGKILL): a replacement finishes it
  agent_killed_push  the same in push mode: the ranks' writes queued for the killed agent are taken back, and
                     the version goes again from the start to its replacement
  manager_killed     the manager of that agent is killed: its agents go, replacements run on the other
  controller_killed  the controller is killed mid-transfer: the ranks' embedded flushers take over, and
                     the versions go through the service again once a controller is back on its port
  bad_input          malformed and wrong-key messages at the controller, an agent and a manager; an
                     application trying another's data: all refused and logged, every daemon keeps running
  three_apps         --placement interval: three synthetic applications of different sizes started one after
                     the other on two managers; each agent goes where the checkpoint traffic is least, as
                     `cairn status --json` shows and explains
  dynamic_agents     --scale-agents: the synthetic app checkpoints slowly, then fast (--burst), then slowly
                     again, its agents limited to 4 MB/s each; its agents are scaled up and down again (cairn
                     status --json shows the count and why), the ranks see the changes with cairn_probe_agents,
                     and the scale-up command starts a second manager when the first (2 agents) is full
  chain              heat2d with compress=zstd, its chain on the controller verify,compress,write and the test
                     plugin writing a second copy (tests/plugins/second_copy.c): the agents write the
                     compressed L3 copy, the plugin a second one that `cairn verify` finds good
  freed_place        one manager with room for one agent: A holds it, B finds no room (its embedded flushers
                     write); A ends, its agent stops, and once the manager reports it gone the place goes to B,
                     whose later versions go through the service
  gives_way          --scale-agents, one manager with room for two agents: A is scaled up to both; B arrives and
                     finds no room; A gives one up (2 -> 1, its `why` names B), B's agent takes the freed place,
                     and A is held at one while B runs; both results the failure-free ones
  restart_agents     heat2d through the service, then relaunched without caches with service_restart=agents:
                     the agents read, verify and fi_write each rank's L3 bytes into its regions (their logs and
                     rank 0's say so), the result the failure-free one; then, with the controller stopped, the
                     same relaunch falls back to the ranks' own read, with the same result; then with a byte
                     of the newest version flipped, the agent refuses it and the ranks restart from an older one
  manager_names      a controller started without --log (its log on stderr, nothing written where it runs), a
                     manager without --name (the host name), then a second one without --name: refused at once,
                     naming the holder and --name, exit status 1; the holder keeps its place, an application's
                     agent is placed on it, and `cairn status` finds the controller from CAIRN_SERVICE
  migrate            heat2d through the service under `cairn run --spares 1`; `cairn migrate --node 1` moves node 1's
                     newest version to the spare over the fabric (migrate_transport = auto picks it because the
                     service is configured): cairnd migrate-source reads on node 1, migrate-sink writes on node4,
                     every chunk checked on arrival; the relaunched job restarts from L1 with the failure-free result

After every scenario with an application: its result equals the failure-free one, `cairn verify` finds
every committed version good, and a relaunch without caches restarts from L3 with the same result. The
daemons must stop cleanly on SIGTERM. Ports: the controller listens on port 0 (the OS picks) and writes
its address to a file, so parallel runs never collide.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenario  # noqa: E402  (the failure-free heat2d reference, shared with the scenarios)
import service_wire as W  # noqa: E402

HEAT = list(scenario.HEAT_ARGS)
SYNTH = ["--size", "1M", "--iters", "120", "--checkpoint-every", "10"]


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def say(msg):
    print(f"service_test: {msg}", flush=True)


class Service:
    """A controller and `managers` managers; stop() sends SIGTERM and insists on clean exits."""

    def __init__(self, build, work, managers=2, manager_args=(), controller_args=(), capacity=4, log=True):
        self.build, self.work, self.capacity, self.log = build, work, capacity, log
        self.pidfiles = []  # daemons started by the scale-up command (not ours to wait for): SIGTERM at the end
        self.controller_args = list(controller_args)
        self.cairnd = os.path.join(build, "tools", "cairnd")
        self.cairn = os.path.join(build, "tools", "cairn")
        self.procs = {}
        self.port = 0
        self.manager_args = list(manager_args)
        os.makedirs(work, exist_ok=True)
        self.start_controller()
        for i in range(managers):  # one after the other: m0 joins first, so stacking fills m0 first
            self.start_manager(i)
            self.wait_for(lambda st: len(st["managers"]) == i + 1, f"manager m{i} to join")

    def start_controller(self):
        af = os.path.join(self.work, "controller.address")
        if os.path.exists(af):
            os.remove(af)
        if self.log:
            self.procs["controller"] = subprocess.Popen(
                [self.cairnd, "controller", "--listen", f"127.0.0.1:{self.port}", "--address-file", af, "--log",
                 os.path.join(self.work, "controller.log"), "--log-level", "debug", *self.controller_args])
        else:  # its default: the log on stderr (kept here as controller.log), nothing in its working directory
            os.makedirs(os.path.join(self.work, "cwd"), exist_ok=True)
            self.procs["controller"] = subprocess.Popen(
                [self.cairnd, "controller", "--listen", f"127.0.0.1:{self.port}", "--address-file", af,
                 "--log-level", "debug", *self.controller_args], cwd=os.path.join(self.work, "cwd"),
                stderr=open(os.path.join(self.work, "controller.log"), "a"))
        deadline = time.time() + 30
        while not os.path.exists(af):
            if time.time() > deadline or self.procs["controller"].poll() is not None:
                fail("the controller did not start (see controller.log)")
            time.sleep(0.02)
        self.address = open(af).read().strip()
        self.port = int(self.address.rpartition(":")[2])
        say(f"controller at {self.address}")

    def start_manager(self, i):
        self.procs[f"m{i}"] = subprocess.Popen(
            [self.cairnd, "manager", "--controller", self.address, "--name", f"m{i}", "--agents", str(self.capacity), "--work-dir",
             os.path.join(self.work, f"m{i}"), "--log-level", "debug", *self.manager_args])

    def status(self):
        p = subprocess.run([self.cairn, "status", "--service", self.address, "--json"], capture_output=True,
                           text=True, timeout=30)
        return json.loads(p.stdout) if p.returncode == 0 else None

    def wait_for(self, pred, what, timeout=90):
        deadline = time.time() + timeout
        while time.time() < deadline:
            st = self.status()
            if st is not None:
                try:
                    if pred(st):
                        return st
                except (KeyError, IndexError, TypeError):
                    pass
            time.sleep(0.05)
        fail(f"timed out waiting for {what}; status {self.status()}")

    def kill(self, name, sig=signal.SIGKILL):
        self.procs[name].send_signal(sig)
        self.procs[name].wait(timeout=30)
        del self.procs[name]

    def logs(self):
        text = ""
        for root, _, files in os.walk(self.work):
            for f in sorted(files):
                if f.endswith(".log"):
                    text += f"==== {os.path.join(root, f)}\n" + open(os.path.join(root, f), errors="replace").read()
        return text

    def stop_others(self):
        for f in self.pidfiles:
            try:
                os.kill(int(open(f).read().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass

    def stop(self):
        self.stop_others()
        bad = []
        for name, p in self.procs.items():
            p.send_signal(signal.SIGTERM)
        for name, p in self.procs.items():
            try:
                rc = p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "hung"
            if rc != 0:
                bad.append(f"{name} exited {rc}")
        self.procs = {}
        if bad:
            fail("daemons did not stop cleanly on SIGTERM: " + ", ".join(bad))


class Job:
    """One application under `cairn run`, its output collected as it comes."""

    def __init__(self, t, name, app, app_args, np=4, nodes=2, kill=None, env=(), run_args=()):
        self.t, self.name, self.app, self.app_args, self.np, self.nodes, self.kill = t, name, app, app_args, np, nodes, kill
        self.run_args = list(run_args)
        self.work = os.path.join(t.work, name)
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.env = dict(os.environ)
        self.env.update({
            "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1",
            "CAIRN_MPIRUN_ARGS": os.environ.get("CAIRN_MPIRUN_ARGS", "--oversubscribe"),
            "CAIRN_PREFIX": os.path.join(self.work, "prefix"), "CAIRN_CACHE_DIR": os.path.join(self.work, "cache"),
            "CAIRN_JOB": f"{t.name}-{name}", "CAIRN_REDUNDANCY": "xor", "CAIRN_FLUSH_EVERY": "2", "CAIRN_LOG": "info",
            "CAIRN_SERVICE": t.service.address, "CAIRN_SERVICE_TIMEOUT": "60", "CAIRN_SERVICE_CHUNK": "64K",
            "CAIRN_SERVICE_BUFFER_POOL": "1M",
        })
        self.env.update(dict(kv.split("=", 1) for kv in env))
        self.lines = []

    def command(self, kill=True):
        cmd = [self.t.cairn, "run", "-n", str(self.np), "--nodes", str(self.nodes), *self.run_args]
        if kill and self.kill:
            cmd += ["--kill-node", str(self.kill[0]), "--at-checkpoint", str(self.kill[1]), "--phase", "compute"]
        return cmd + ["--", self.app, *self.app_args]

    def start(self):
        cmd = self.command()
        say(f"{self.name}: {' '.join(cmd)}")
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait(self, timeout=400):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail(f"{self.name} did not finish within {timeout} s:\n{self.output()}")
        self.reader.join(timeout=10)
        print(f"---- {self.name} ----\n{self.output()}", flush=True)
        if rc != 0:
            fail(f"{self.name}: cairn run exited {rc}")

    def output(self):
        return "".join(self.lines)

    def via(self):
        """Who wrote each version's L3 copy, from rank 0's per-version summary lines."""
        return re.findall(r"^\S* ?cairn\[0\] info: version (\d+): .*L3 [\d.]+ ms \([\d.]+ GB/s, (\w+)\)", self.output(), re.M)


def reference(t, app, args=None, np=4):
    """The failure-free result of `app` with `args` on `np` ranks (heat2d: any rank count gives the same),
    cached per build; --sleep-ms does not change it and is left out."""
    if app == "heat2d":
        ns = argparse.Namespace(build=t.build, np=4, env=[], scheme="single", flush_every=4, name="service-reference",
                                app="c", app2=None, app_args=None)
        return scenario.reference_result(ns)
    args = list(args or SYNTH)
    if "--sleep-ms" in args:
        i = args.index("--sleep-ms")
        del args[i:i + 2]
    path = os.path.join(t.build, "tests", "integration", "synthetic-reference-" + "-".join(args[1::2]) +
                        ("" if np == 4 else f"-np{np}") + ".txt")
    if os.path.exists(path):
        return open(path).read().strip()
    work = os.path.join(t.work, "synthetic-reference")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, CAIRN_PREFIX=os.path.join(work, "prefix"), CAIRN_CACHE_DIR=os.path.join(work, "cache"),
               CAIRN_JOB=f"synthetic-ref-{os.getpid()}", CAIRN_REDUNDANCY="single", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [os.environ.get("CAIRN_MPIRUN") or "mpirun", *env.get("CAIRN_MPIRUN_ARGS", "--oversubscribe").split(),
           "-np", str(np), t.synthetic, *args, "--checkpoint-every", "0", "--no-restart"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    shutil.rmtree(work, ignore_errors=True)
    m = re.findall(r"^result ([0-9a-f]{16})$", p.stdout, re.M)
    if p.returncode != 0 or not m:
        fail(f"the synthetic reference run failed:\n{p.stdout}\n{p.stderr}")
    tmp = f"{path}.{os.getpid()}"
    open(tmp, "w").write(m[-1] + "\n")
    os.replace(tmp, path)
    return m[-1]


def check_job(t, job, ref, min_service=1):
    """The result, the restart, who wrote L3, `cairn verify`, and a relaunch from L3 without the caches."""
    out = job.output()
    results = re.findall(r"^result ([0-9a-f]{16})$", out, re.M)
    if not results or results[-1] != ref:
        fail(f"{job.name}: result {results[-1] if results else None}, the failure-free one is {ref}")
    if job.kill and not re.search(r"^restart: version \d+ from level L\d$", out, re.M):
        fail(f"{job.name}: the relaunch after the node was killed did not restart")
    via = job.via()
    service = [v for v, who in via if who == "service"]
    say(f"{job.name}: result {ref} identical; L3 copies by the service: {service}, "
        f"by the embedded flusher: {[v for v, who in via if who != 'service']}")
    if len(service) < min_service:
        fail(f"{job.name}: {len(service)} versions went through the service, expected at least {min_service}")
    prefix = job.env["CAIRN_PREFIX"]
    v = subprocess.run([t.cairn, "verify", prefix, "--level", "l3"], capture_output=True, text=True, timeout=120)
    print(v.stdout + v.stderr, flush=True)
    if v.returncode != 0:
        fail(f"{job.name}: cairn verify exited {v.returncode}")
    shutil.rmtree(job.env["CAIRN_CACHE_DIR"], ignore_errors=True)
    p = subprocess.run(job.command(kill=False), env=job.env, capture_output=True, text=True, timeout=400)
    out2 = p.stdout + p.stderr
    m = re.findall(r"^restart: version (\d+) from level (L\d)$", out2, re.M)
    r2 = re.findall(r"^result ([0-9a-f]{16})$", out2, re.M)
    if p.returncode != 0 or not m or m[-1][1] != "L3" or not r2 or r2[-1] != ref:
        fail(f"{job.name}: the relaunch without caches did not restart from L3 with the same result:\n{out2}")
    say(f"{job.name}: relaunch without caches restarted from version {m[-1][0]} at L3, result identical")


def app_status(st, prefix):
    """The application with `prefix` in a `cairn status --json` (KeyError until it registered)."""
    found = [x for x in st["applications"] if x["prefix"] == prefix]
    if not found:
        raise KeyError(prefix)
    return found[0]


def print_placement(st):
    for a in st["agents"]:
        say(f"agent {a['id']} of application {a['application']} slot {a['slot']} on {a['manager']}: "
            f"{a['bytes_drained']} bytes in {a['transfers']} transfers ({a['why']})")


class Test:
    def __init__(self, args):
        self.args = args
        self.name = args.case
        self.build = os.path.abspath(args.build)
        self.work = os.path.join(self.build, "tests", "integration", "work", f"service-{args.case}")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.cairn = os.path.join(self.build, "tools", "cairn")
        self.heat2d = os.path.join(self.build, "examples", "heat2d", "heat2d")
        self.synthetic = os.path.join(self.build, "examples", "synthetic", "synthetic")
        self.service = None

    def run(self):
        try:
            getattr(self, "case_" + self.name)()
            self.service.stop()
        except (SystemExit, Exception):  # a failed check, or a bug of the test: the daemons go either way
            if getattr(self, "current_job", None):
                print(f"---- {self.current_job.name} (so far) ----\n{self.current_job.output()}", flush=True)
            if self.service:
                print(self.service.logs()[-30000:], flush=True)
                self.service.stop_others()
                for p in self.service.procs.values():
                    p.kill()
            raise
        shutil.rmtree(self.work, ignore_errors=True)
        print(f"PASS: {self.name}", flush=True)

    # ---- the cases --------------------------------------------------------------------------------

    def case_two_apps(self):
        self.service = Service(self.build, os.path.join(self.work, "svc"))
        ref_heat, ref_synth = reference(self, "heat2d"), reference(self, "synthetic")
        heat = Job(self, "heat2d", self.heat2d, HEAT, kill=(1, 6), env=["CAIRN_SERVICE_AGENTS=2"])
        synth = Job(self, "synthetic", self.synthetic, SYNTH, kill=(1, 5))
        heat.start()
        synth.start()
        st = self.service.wait_for(lambda st: len(st["applications"]) == 2, "both applications to register")
        print_placement(st)
        # Stacking: the three agents (two for heat2d, one for the synthetic app) share the first node.
        if sorted(a["manager"] for a in st["agents"]) != ["m0", "m0", "m0"]:
            fail(f"stacking should put all three agents on m0: {st['agents']}")
        last = {}
        stop = threading.Event()

        def watch():  # the last picture of the agents at work: what each drained, where it sat
            while not stop.is_set():
                st = self.service.status()
                if st and any(a["bytes_drained"] for a in st["agents"]):
                    last["status"] = st
                time.sleep(0.2)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        heat.wait()
        synth.wait()
        stop.set()
        watcher.join()
        if "status" not in last:
            fail("no agent ever reported bytes drained")
        print_placement(last["status"])
        check_job(self, heat, ref_heat)
        check_job(self, synth, ref_synth)

    def case_push(self):
        self.service = Service(self.build, os.path.join(self.work, "svc"), managers=1)
        # snapshot = cow: the ranks fi_write from slots that the copy-on-write copier filled (docs/architecture.md,
        # "Limits and fallbacks": the service reads a slot only once its snapshot is complete).
        heat = Job(self, "heat2d-push", self.heat2d, HEAT, kill=(1, 6),
                   env=["CAIRN_SERVICE_MODE=push", "CAIRN_SNAPSHOT=cow"])
        heat.start()
        heat.wait()
        if "push" not in self.service.logs():
            fail("the agents did not run in push mode")
        out = heat.output()
        if "snapshot = cow: copy-on-write" in out:
            if "the checkpoint service reads the L1 slots only" not in out or "(cow: " not in out:
                fail("snapshot = cow with the service: no reason naming the service, or no copy-on-write version")
            say("heat2d-push: copy-on-write snapshots, moved by the service in push mode")
        elif "snapshot = cow: copy, because" not in out:
            fail("heat2d-push: cairn_init did not say which snapshotter it chose")
        else:
            say("heat2d-push: this kernel cannot take copy-on-write snapshots; copied")
        check_job(self, heat, reference(self, "heat2d"))

    def relaunch_from_l3(self, job, ref, extra_env):
        """The job run again without its caches (restarting from L3) with `extra_env`; its output."""
        shutil.rmtree(job.env["CAIRN_CACHE_DIR"], ignore_errors=True)
        env = dict(job.env, **extra_env)
        p = subprocess.run(job.command(kill=False), env=env, capture_output=True, text=True, timeout=400)
        out = p.stdout + p.stderr
        print(f"---- {job.name} relaunched with {extra_env} ----\n{out}", flush=True)
        m = re.findall(r"^restart: version (\d+) from level (L\d)$", out, re.M)
        r = re.findall(r"^result ([0-9a-f]{16})$", out, re.M)
        if p.returncode != 0 or not m or m[-1][1] != "L3" or not r or r[-1] != ref:
            fail(f"{job.name}: the relaunch did not restart from L3 with the failure-free result {ref}")
        return out

    def case_restart_agents(self):
        self.service = Service(self.build, os.path.join(self.work, "svc"), managers=1)
        ref = reference(self, "heat2d")
        heat = Job(self, "heat2d-restart", self.heat2d, HEAT)
        heat.start()
        heat.wait()
        check_job(self, heat, ref)  # as every case: the result, cairn verify, and the ranks' own read from L3
        out = self.relaunch_from_l3(heat, ref, {"CAIRN_SERVICE_RESTART": "agents"})
        if not re.search(r"restarted from version \d+ \('[^']*'\) at L3, served by the agents", out):
            fail("the restart through the agents was not served by them (rank 0 did not say so)")
        served = re.findall(r"rank (\d+): version \d+ restored from L3 into its memory", self.service.logs())
        if sorted(set(served)) != ["0", "1", "2", "3"]:
            fail(f"the agents' logs show restores for ranks {sorted(set(served))}, expected all four")
        say(f"restart through the agents: ranks {sorted(set(served))} restored by the agents, result identical")
        # The service away: the same relaunch reads the version itself.
        self.service.kill("controller", signal.SIGTERM)
        out = self.relaunch_from_l3(heat, ref, {"CAIRN_SERVICE_RESTART": "agents", "CAIRN_SERVICE_TIMEOUT": "2"})
        if "served by the agents" in out or not re.search(r"version \d+ from L3 is read by the ranks themselves", out):
            fail("with the controller stopped, the restart did not fall back to the ranks' own read")
        say("controller stopped: the restart fell back to the ranks' own read, result identical")
        self.service.start_controller()  # back on its port, so that the daemons stop as in every case
        # The manager finds the new controller on its own schedule; the next relaunch needs its agents.
        self.service.wait_for(lambda st: len(st["managers"]) == 1, "manager m0 to join the restarted controller")
        # A chunk that fails at the agent: the newest version's rank-1 file with one byte flipped. Nothing
        # unverified is restored: every rank reads itself, that version fails there too, and the full
        # search restarts from an older one (heat2d recomputes the rest: the same result).
        prefix = heat.env["CAIRN_PREFIX"]
        newest = max(d for d in os.listdir(prefix) if re.fullmatch(r"v\d{8}", d) and
                     os.path.exists(os.path.join(prefix, d, "COMMIT")))
        data = os.path.join(prefix, newest, "rank-1.data")
        with open(data, "r+b") as f:
            f.seek(100)
            b = f.read(1)
            f.seek(100)
            f.write(bytes([b[0] ^ 0xff]))
        out = self.relaunch_from_l3(heat, ref, {"CAIRN_SERVICE_RESTART": "agents"})
        if "served by the agents" in out or not re.search(
                r"cairn\[1\] warn: restart: version %d through the agents: agent: .*checksum mismatch" % int(newest[1:]), out):
            fail(f"with {data} corrupted, rank 1 did not refuse the agents' restore for the checksum")
        if not re.search(r"rank 1: version %d not restored: .*checksum mismatch" % int(newest[1:]), self.service.logs()):
            fail("the agent did not log the chunk that failed")
        say(f"{newest} corrupted on rank 1: the agent refused it, the ranks restarted from an older version, result identical")

    def case_chain(self):
        plugin = os.path.join(self.build, "tests", "plugins", "libcairn_test_second_copy.so")
        copies = os.path.join(self.work, "copies")
        chain = f"verify,compress,write,plugin:{plugin}:{copies}"
        self.service = Service(self.build, os.path.join(self.work, "svc"), managers=1,
                               controller_args=["--chain", f"heat2d={chain}", "--chain", "*=verify,write"])
        heat = Job(self, "heat2d-chain", self.heat2d, HEAT, kill=(1, 6), env=["CAIRN_COMPRESS=zstd:3"])
        heat.start()
        st = self.service.wait_for(lambda st: st["applications"], "heat2d to register")
        if st["applications"][0]["chain"] != chain:
            fail(f"cairn status shows the chain {st['applications'][0]['chain']!r}, the controller was given {chain!r}")
        heat.wait()
        if "agents write uncompressed" in heat.output() or "compress" in " ".join(
                line for line in heat.lines if "embedded flusher" in line):
            fail("compressed versions still went to the embedded flusher")
        check_job(self, heat, reference(self, "heat2d"), min_service=2)
        prefix = heat.env["CAIRN_PREFIX"]
        service = {int(v) for v, who in heat.via() if who == "service"}
        for name in sorted(os.listdir(prefix)):
            m = re.fullmatch(r"v0*(\d+)", name)
            if not m or int(m.group(1)) not in service or not os.path.exists(os.path.join(prefix, name, "COMMIT")):
                continue
            wheres = [f for f in os.listdir(os.path.join(prefix, name)) if f.endswith(".where")]
            if len(wheres) != 4 or not all("compress zstd" in open(os.path.join(prefix, name, f)).read()
                                           for f in wheres):
                fail(f"version {name} by the service is not stored compressed: {wheres}")
        # Every version the plugin copied whole (the prefix keeps only the newest): a COMMIT beside it
        # (docs/format.md), then `cairn verify` checks each rank's copy against its manifest.
        checked = 0
        for name in sorted(os.listdir(copies)):
            copy = os.path.join(copies, name)
            if len([f for f in os.listdir(copy) if f.endswith(".data")]) == 4:
                v = int(name.lstrip("v"))
                open(os.path.join(copy, "COMMIT"), "w").write(f"cairn-commit 1\nversion {v}\nnranks 4\nlabel \n")
                checked += 1
        if checked < 2:
            fail(f"the plugin's second copy holds fewer than two complete versions: {os.listdir(copies)}")
        v = subprocess.run([self.cairn, "verify", copies, "--level", "l3"], capture_output=True, text=True, timeout=120)
        print(v.stdout + v.stderr, flush=True)
        if v.returncode != 0:
            fail(f"cairn verify of the plugin's second copy exited {v.returncode}")
        say(f"the plugin's second copy: {checked} versions, cairn verify good")

    def case_three_apps(self):
        self.service = Service(self.build, os.path.join(self.work, "svc"), managers=2,
                               controller_args=["--placement", "interval"])
        # The same interval (a version to L3 every 20 iterations of >= 20 ms), 4 MiB, 1 MiB and 2 MiB per rank:
        # A's traffic is four times B's. Each runs until the next has registered.
        sizes = {"A": ("4M", 600), "B": ("1M", 450), "C": ("2M", 200)}
        jobs, agent_of = {}, {}
        for name, (size, iters) in sizes.items():
            args = ["--size", size, "--iters", str(iters), "--checkpoint-every", "10", "--sleep-ms", "20"]
            jobs[name] = Job(self, f"synthetic-{name}", self.synthetic, args, np=2, nodes=2)
            jobs[name].start()
            prefix = jobs[name].env["CAIRN_PREFIX"]
            st = self.service.wait_for(
                lambda st: any(a["prefix"] == prefix and a["demand_bps"] > 0 and a["agents"][0] for a in st["applications"]),
                f"application {name} to report its checkpoint traffic", timeout=180)
            app = next(a for a in st["applications"] if a["prefix"] == prefix)
            agent = next(a for a in st["agents"] if a["id"] == app["agents"][0])
            agent_of[name] = agent
            say(f"application {name} ({size} per rank, {app['demand_bps'] / 1e6:.1f} MB/s of checkpoint traffic): "
                f"agent {agent['id']} on {agent['manager']}: {agent['why']}")
        print_placement(st)
        for m in st["managers"]:
            say(f"manager {m['name']}: agents {m['agents']}, traffic {m['demand_bps'] / 1e6:.1f} MB/s, "
                f"measured {m['bandwidth_bps'] / 1e6:.1f} MB/s")
        text = subprocess.run([self.cairn, "status", "--service", self.service.address], capture_output=True,
                              text=True, timeout=30).stdout
        if "traffic" not in text or "interval: the least checkpoint traffic" not in text:
            fail(f"cairn status (text) does not show the traffic and the reasons:\n{text}")
        if st["controller"]["placement"] != "interval":
            fail(f"the controller reports placement {st['controller']['placement']}")
        want = {"A": "m0", "B": "m1", "C": "m1"}  # empty nodes: join order; then the least traffic (A's > B's)
        got = {k: a["manager"] for k, a in agent_of.items()}
        if got != want:
            fail(f"interval placement put the agents on {got}, expected {want}")
        for k, a in agent_of.items():
            if not a["why"].startswith("interval: the least checkpoint traffic"):
                fail(f"agent of {k}: the reason does not explain the interval policy: {a['why']}")
        m = re.search(r"next m0, ([\d.]+) MB/s", agent_of["C"]["why"])
        if not m or float(m.group(1)) <= float(re.search(r"traffic, ([\d.]+) MB/s", agent_of["C"]["why"]).group(1)):
            fail(f"C's reason does not show m0 carrying more traffic: {agent_of['C']['why']}")
        for name, job in jobs.items():
            job.wait()
            ref = reference(self, "synthetic", job.app_args, np=job.np)
            results = re.findall(r"^result ([0-9a-f]{16})$", job.output(), re.M)
            if not results or results[-1] != ref:
                fail(f"{job.name}: result {results[-1] if results else None}, the failure-free one is {ref}")
            if not [v for v, who in job.via() if who == "service"]:
                fail(f"{job.name}: no version went through the service")
        say("three applications: placed by checkpoint traffic, results identical")

    def case_dynamic_agents(self):
        work = os.path.join(self.work, "svc")
        pidfile = os.path.join(work, "m1.pid")
        cmd = (f"{os.path.join(self.build, 'tools', 'cairnd')} manager --controller $CAIRN_CONTROLLER --name m1 "
               f"--agents 4 --agent-bandwidth 4 --work-dir {os.path.join(work, 'm1')} & echo $! > {pidfile}")
        self.service = Service(self.build, work, managers=1, capacity=2, manager_args=["--agent-bandwidth", "4"],
                               controller_args=["--scale-agents", "--scale-up-command", cmd])
        self.service.pidfiles.append(pidfile)
        # 1 MiB per rank, 4 ranks: 4 MB per L3 version (every 20 iterations); at 150 ms per iteration a version
        # every ~3 s needs one agent at 4 MB/s; iterations 60 to 220 at 5 ms need all four.
        args = ["--size", "1M", "--iters", "300", "--checkpoint-every", "10", "--sleep-ms", "150", "--burst", "60:220:5",
                "--probe-agents"]
        job = self.current_job = Job(self, "synthetic-dynamic", self.synthetic, args, np=4, nodes=2)
        job.start()
        prefix = job.env["CAIRN_PREFIX"]
        seen = {"max": 0}

        def app(st):
            found = [a for a in st["applications"] if a["prefix"] == prefix]
            if not found:
                raise KeyError(prefix)
            return found[0]

        def grew(st):
            seen["max"] = max(seen["max"], app(st)["agent_count"])
            return app(st)["agent_count"] >= 3 and app(st)["scaling"]["changes"] >= 1
        st = self.service.wait_for(grew, "the agents to be scaled up", timeout=120)
        say(f"scaled up: {app(st)['agent_count']} agents: {app(st)['scaling']['why']}")
        if "up to" not in app(st)["scaling"]["why"]:
            fail(f"the reason does not say why the agents went up: {app(st)['scaling']}")
        st = self.service.wait_for(lambda st: len(st["managers"]) == 2, "the scale-up command's manager to join", 120)
        say(f"scale-up command: {st['scale_up']}")
        st = self.service.wait_for(
            lambda st: app(st)["agent_count"] < seen["max"] and "down to" in app(st)["scaling"]["why"],
            "the agents to be scaled down again", timeout=240)
        say(f"scaled down: {app(st)['agent_count']} agents: {app(st)['scaling']['why']}")
        job.wait()
        log = open(os.path.join(work, "controller.log")).read()
        if "running the scale-up command" not in log or "scale-up command (pid" not in log or "exit status 0" not in log:
            fail(f"the controller did not log the scale-up command and its exit status:\n{log}")
        if st["scale_up"]["runs"] < 1:
            fail(f"status does not count the scale-up command: {st['scale_up']}")
        changes = re.findall(r"rank \d+: agents changed at iteration", job.output())
        if not changes:
            fail("cairn_probe_agents never saw a change of agent")
        say(f"cairn_probe_agents saw {len(changes)} changes of agent across the ranks")
        ref_args = ["--size", "1M", "--iters", "300", "--checkpoint-every", "10"]
        check_job(self, job, reference(self, "synthetic", ref_args, np=4), min_service=3)
        say("dynamic agents: scaled up and down, no version lost, restart from L3 identical")

    def case_freed_place(self):
        self.service = Service(self.build, os.path.join(self.work, "svc"), managers=1, capacity=1)
        a_args = ["--size", "1M", "--iters", "200", "--checkpoint-every", "10", "--sleep-ms", "20"]
        b_args = ["--size", "1M", "--iters", "600", "--checkpoint-every", "10", "--sleep-ms", "20"]
        a = Job(self, "synthetic-A", self.synthetic, a_args, np=2, nodes=2)
        b = self.current_job = Job(self, "synthetic-B", self.synthetic, b_args, np=2, nodes=2)
        pa, pb = a.env["CAIRN_PREFIX"], b.env["CAIRN_PREFIX"]

        a.start()
        st = self.service.wait_for(lambda st: app_status(st, pa)["agents"][0], "A's agent", timeout=120)
        a_agent, app_a_id = app_status(st, pa)["agents"][0], app_status(st, pa)["id"]
        b.start()
        st = self.service.wait_for(lambda st: app_status(st, pb)["ranks_connected"] == 2, "B's ranks to register", timeout=120)
        if app_status(st, pa)["ranks_connected"] != 2 or app_status(st, pb)["agents"] != [0]:
            fail(f"B should find no room while A runs: {st['applications']}")
        say(f"B registered while A's agent {a_agent} holds the only place: no agent for B")
        a.wait()
        st = self.service.wait_for(
            lambda st: any(x["id"] == app_status(st, pb)["agents"][0] and x["state"] == "up" for x in st["agents"]),
            "B's agent on the place A's agent left", timeout=120)
        b_agent = next(x for x in st["agents"] if x["id"] == app_status(st, pb)["agents"][0])
        say(f"B's agent {b_agent['id']} is up on {b_agent['manager']} ({b_agent['why']})")
        b.wait()
        via = [who for _, who in b.via()]
        if not via or via[0] != "embedded" or via[-1] != "service":
            fail(f"B's versions should go through its embedded flushers first, then the service: {b.via()}")
        log = open(os.path.join(self.work, "svc", "controller.log")).read()
        retired = re.search(rf"application {app_a_id} \(\S+\) retired: every rank left", log)
        placed = re.search(rf"agent \d+ for application {app_status(st, pb)['id']} slot 0 on manager m0", log)
        if not retired or not placed or placed.start() < retired.start():
            fail(f"the controller log does not show A retired, then B's agent placed:\n{log}")
        check_job(self, b, reference(self, "synthetic", b_args, np=2))
        say("a freed place went to the application that had found none")

    def case_gives_way(self):
        work = os.path.join(self.work, "svc")
        self.service = Service(self.build, work, managers=1, capacity=2, manager_args=["--agent-bandwidth", "4"],
                               controller_args=["--scale-agents"])
        # A: 4 MB per L3 version every ~100 ms at 4 MB/s per agent wants every agent it can get (4 ranks: 4);
        # the one manager has room for 2.
        a_args = ["--size", "1M", "--iters", "1500", "--checkpoint-every", "10", "--sleep-ms", "5"]
        b_args = ["--size", "1M", "--iters", "300", "--checkpoint-every", "10", "--sleep-ms", "20"]
        a = Job(self, "synthetic-A", self.synthetic, a_args, np=4, nodes=2)
        b = self.current_job = Job(self, "synthetic-B", self.synthetic, b_args, np=2, nodes=2)
        pa, pb = a.env["CAIRN_PREFIX"], b.env["CAIRN_PREFIX"]

        def up(st, agent):
            return any(x["id"] == agent and x["state"] == "up" for x in st["agents"])
        a.start()
        st = self.service.wait_for(lambda st: app_status(st, pa)["agent_count"] == 2 and all(up(st, x) for x in app_status(st, pa)["agents"]),
                                   "A to be scaled up to both places", timeout=120)
        say(f"A: 2 agents ({app_status(st, pa)['scaling']['why']})")
        b.start()
        st = self.service.wait_for(lambda st: up(st, app_status(st, pb)["agents"][0]), "B's first agent", timeout=120)
        a_now, b_id = app_status(st, pa), app_status(st, pb)["id"]
        say(f"B's agent {app_status(st, pb)['agents'][0]} is up; A: {a_now['agent_count']} agent(s) ({a_now['scaling']['why']})")
        if a_now["ranks_connected"] != 4:
            fail(f"A ended before B got its agent: the place was freed, not given: {st['applications']}")
        if a_now["agent_count"] != 1:
            fail(f"A should hold one agent while B has the other place: {a_now}")
        log = open(os.path.join(work, "controller.log")).read()
        gave = re.search(rf"application {a_now['id']}: agents 2 -> 1 \(down to 1: gives an agent to application {b_id} ", log)
        if not gave:
            fail(f"the controller log does not show A giving an agent to B:\n{log}")
        a.wait()
        b.wait()
        if re.search(rf"application {a_now['id']}: agents 1 -> 2", log[gave.end():]):
            fail(f"A took a second agent again while B held the place:\n{log}")
        check_job(self, a, reference(self, "synthetic", a_args, np=4))
        check_job(self, b, reference(self, "synthetic", b_args, np=2))
        say("an application without an agent got one of another's extra agents")

    def case_migrate(self):
        self.service = Service(self.build, os.path.join(self.work, "svc"), managers=1)
        ref = reference(self, "heat2d")
        job = self.current_job = Job(self, "heat2d-migrate", self.heat2d, HEAT + ["--sleep-ms", "10"], np=8, nodes=4,
                                     run_args=["--spares", "1"], env=["CAIRN_SERVICE_AGENTS=2"])
        job.start()
        state = os.path.join(job.env["CAIRN_PREFIX"], ".cairn", "state")
        deadline = time.time() + 120
        while time.time() < deadline:
            if os.path.exists(state) and re.search(r"^l2=([2-9]|\d\d)", open(state).read(), re.M):
                break
            time.sleep(0.1)
        else:
            fail("the job did not reach version 2")
        m = subprocess.run([self.cairn, "migrate", "--node", "1", "--buffers", "4", "--buffer-size", "256K", "--json",
                            job.env["CAIRN_PREFIX"]], env=job.env, capture_output=True, text=True, timeout=300)
        print(m.stdout + m.stderr, flush=True)
        if m.returncode != 0:
            fail(f"cairn migrate exited {m.returncode}")
        r = json.loads(m.stdout)
        if r["status"] != "done" or r["transport"] != "fabric" or r["restart_level"] != "L1":
            fail(f"the migration did not go over the fabric and restart from L1: {r}")
        if r["node"] != "node1" or r["spare"] != "node4" or r["bytes"] <= 0:
            fail(f"the migration moved the wrong thing: {r}")
        job.wait()
        out = job.output()
        if "over the fabric (auto: the checkpoint service is configured (service))" not in out:
            fail("cairn run did not say why the migration went over the fabric")
        if not re.search(r"migrated node1 to node4: .* verified chunk by chunk.*; over tcp", out):
            fail("cairn run did not report the fabric transfer")
        control = os.path.join(job.env["CAIRN_PREFIX"], ".cairn")
        src = open(os.path.join(control, "migrate-source.log")).read()
        sink = open(os.path.join(control, "migrate-sink.log")).read()
        if "taken by the writer" not in src or "keys revoked" not in src:
            fail(f"the reader on node1 did not log the hand-over:\n{src}")
        if "is in node4's cache" not in sink:
            fail(f"the writer on node4 did not log the version:\n{sink}")
        if os.path.exists(os.path.join(job.env["CAIRN_CACHE_DIR"], f"cairn-{job.env['CAIRN_JOB']}", "node1")):
            fail("node1's cache is still there after the migration")
        say(f"migrated node1 to node4 over the fabric: {r['bytes']} bytes, transfer {r['transfer_seconds']:.2f} s, "
            f"restart from {r['restart_level']}")
        check_job(self, job, ref)

    def slow_job(self, name, env=()):
        """The synthetic app whose versions take about a second each to drain (agents at 8 MB/s)."""
        return Job(self, name, self.synthetic, ["--size", "2M", "--iters", "120", "--checkpoint-every", "10",
                                                "--sleep-ms", "15"], env=["CAIRN_FLUSH_EVERY=1", *env])

    def active_transfer(self):
        """Waits until an agent is moving a version's bytes (some moved, not all); that agent's record."""
        found = {}

        def pred(st):
            for a in st["agents"]:
                act = a.get("active")
                if act and 0 < act["bytes_done"] < act["bytes_total"] and a["pid"]:
                    found["agent"] = a
                    return True
            return False
        self.service.wait_for(pred, "a transfer in progress", timeout=120)
        return found["agent"]

    def no_fallback_for(self, job, version):
        if re.search(rf"version {version}: .*the embedded flusher writes it", job.output()):
            fail(f"version {version} was written by the embedded flusher, not finished by the service")

    def case_agent_killed(self, push=False):
        self.service = Service(self.build, os.path.join(self.work, "svc"), manager_args=["--agent-bandwidth", "8"])
        job = self.slow_job("agent-killed-push" if push else "agent-killed",
                            env=["CAIRN_SERVICE_MODE=push"] if push else ())
        job.start()
        a = self.active_transfer()
        say(f"killing agent {a['id']} (pid {a['pid']}) while it moves version {a['active']['version']}: "
            f"{a['active']['bytes_done']} of {a['active']['bytes_total']} bytes")
        os.kill(a["pid"], signal.SIGKILL)
        self.service.wait_for(lambda st: any(x["id"] != a["id"] and x["state"] == "up" for x in st["agents"]),
                              "a replacement agent")
        job.wait()
        self.no_fallback_for(job, a["active"]["version"])
        if str(a["active"]["version"]) not in [v for v, who in job.via() if who == "service"]:
            fail(f"version {a['active']['version']} was not finished by the service")
        print_placement(self.service.status())
        check_job(self, job, reference(self, "synthetic", job.app_args))

    def case_agent_killed_push(self):
        self.case_agent_killed(push=True)
        if "push" not in self.service.logs():
            fail("the agents did not run in push mode")

    def case_manager_killed(self):
        self.service = Service(self.build, os.path.join(self.work, "svc"), manager_args=["--agent-bandwidth", "8"])
        job = self.slow_job("manager-killed")
        job.start()
        a = self.active_transfer()
        say(f"killing manager {a['manager']} while its agent {a['id']} moves version {a['active']['version']}")
        self.service.kill(a["manager"])
        other = "m1" if a["manager"] == "m0" else "m0"
        st = self.service.wait_for(lambda st: any(x["manager"] == other and x["state"] == "up" for x in st["agents"]),
                                   f"the agents to move to {other}")
        print_placement(st)
        job.wait()
        self.no_fallback_for(job, a["active"]["version"])
        check_job(self, job, reference(self, "synthetic", job.app_args))

    def case_controller_killed(self):
        self.service = Service(self.build, os.path.join(self.work, "svc"), manager_args=["--agent-bandwidth", "8"])
        job = Job(self, "controller-killed", self.synthetic,
                  ["--size", "2M", "--iters", "400", "--checkpoint-every", "10", "--sleep-ms", "15"],
                  env=["CAIRN_FLUSH_EVERY=1"])
        job.start()
        a = self.active_transfer()
        say(f"killing the controller while agent {a['id']} moves version {a['active']['version']}")
        self.service.kill("controller")
        deadline = time.time() + 120
        while "versions go through the embedded flusher until it is back" not in job.output():
            if time.time() > deadline:
                fail("the ranks did not notice the controller was gone")
            time.sleep(0.1)
        time.sleep(2)
        seen_before = len(job.via())
        say(f"starting a controller again on port {self.service.port}")
        self.service.start_controller()
        self.service.wait_for(lambda st: len(st["managers"]) == 2 and len(st["applications"]) == 1,
                              "the managers and the application to come back")
        job.wait()
        after = job.via()[seen_before:]
        if not any(who == "embedded" for _, who in job.via()):
            fail("no version went through the embedded flusher while the controller was away")
        if not any(who == "service" for _, who in after):
            fail(f"no version went through the service after the controller came back: {after}")
        check_job(self, job, reference(self, "synthetic", job.app_args))

    def case_bad_input(self):
        self.service = Service(self.build, os.path.join(self.work, "svc"), managers=1)
        svc = self.service
        # An application A, checkpointing for a while.
        app_a = Job(self, "owner", self.synthetic, [*SYNTH, "--sleep-ms", "80"])
        app_a.start()
        st = svc.wait_for(lambda st: st["applications"] and st["agents"] and st["agents"][0]["state"] == "up",
                          "application A and its agent")
        a_id, a_agent = st["applications"][0]["id"], st["agents"][0]["address"]
        a_prefix = st["applications"][0]["prefix"]

        def refused_at(address, data, words, closes=True):
            c = W.Conn(address)
            c.send(data)
            f = c.read_frame()
            if f is None or f[0] != "error":
                fail(f"{address}: expected an error answer to {data[:40]!r}..., got {f}")
            code, msg = W.error_message(f[1])
            if words not in msg:
                fail(f"{address}: the refusal says '{msg}', expected it to mention '{words}'")
            if closes and not c.closed():
                fail(f"{address}: the connection stayed open after bad input")
            c.close()
            say(f"refused as expected: {msg}")

        ctl = svc.address
        refused_at(ctl, b"GET / HTTP/1.0\r\n\r\n", "not a cairn service message")
        refused_at(ctl, W.frame("status_request", b"\0\0\0\0", version=1), "protocol version 1 is not supported")
        refused_at(ctl, W.frame("status_request", type_number=777), "unknown message type 777")
        refused_at(ctl, W.frame("register_rank", b"\x05\0\0\0ab"), "malformed register_rank")
        key_b = os.urandom(16)
        refused_at(ctl, W.frame("register_rank", W.register_rank("rogue", key_b, 3, 2, "/tmp/x")), "rank 3 of 2")
        refused_at(ctl, W.frame("reassign", W.reassign(a_id, key_b, 0, 1)), "on this connection (a new connection)")
        refused_at(ctl, W.frame("agent_up", b""), "malformed agent_up")
        refused_at(ctl, W.frame("done", b""), "the controller does not take done messages")
        # A truncated frame, then the connection closed: nothing to answer, the controller lives on.
        c = W.Conn(ctl)
        c.send(W.frame("status_request", b"\0\0\0\0")[:7])
        c.close()
        # Another application B: registered with its own key, it tries A's data through the service.
        b = W.Conn(ctl)
        b.send(W.frame("register_rank", W.register_rank("rogue", key_b, 0, 1, self.work + "/b-prefix")))
        f = b.read_frame()
        while f and f[0] != "assigned":
            f = b.read_frame()
        if not f:
            fail("application B got no agent")
        b_app, _, b_agent_id, b_agent = W.assigned(f[1])
        # B's own agent answers B, and only about B's prefix.
        own = W.Conn(b_agent)
        own.send(W.frame("list_versions", W.list_versions(b_app, key_b)))
        f = own.read_frame()
        if not f or f[0] != "version_list":
            fail(f"B's agent did not list B's versions: {f}")
        own.close()
        # A's agent, A's prefix and A's registration are closed to B.
        refused_at(a_agent, W.frame("session_hello", W.session_hello(a_id, key_b, 0)), "wrong key")
        refused_at(a_agent, W.frame("session_hello", W.session_hello(b_app, key_b, 0)), "wrong key")
        refused_at(a_agent, W.frame("list_versions", W.list_versions(a_id, key_b)), "wrong key")
        refused_at(a_agent, W.frame("flush", b"\0" * 30), "before session_hello")
        refused_at(a_agent, b"\xff" * 64, "not a cairn service message")
        refused_at(a_agent, W.frame("session_hello", b"\0" * 10), "malformed session_hello")
        refused_at(ctl, W.frame("register_rank", W.register_rank("rogue2", os.urandom(16), 0, 1, a_prefix)),
                   "is in use by application")
        b.send(W.frame("reassign", W.reassign(a_id, key_b, 0, 1)))
        f = b.read_frame()
        if not f or f[0] != "error" or "wrong key" not in W.error_message(f[1])[1]:
            fail(f"a reassign for A with B's key was not refused: {f}")
        # A manager fed garbage by its controller: it refuses, reconnects, and keeps running.
        self.bad_controller_for_a_manager()
        # Every daemon is still there and A's checkpoints are all A's.
        st = svc.status()
        if st is None or not st["agents"] or svc.procs["controller"].poll() is not None:
            fail("a daemon died of bad input")
        b.close()
        app_a.wait()
        check_job(self, app_a, reference(self, "synthetic", app_a.app_args))
        logs = svc.logs()
        for words in ["not a cairn service message", "wrong key", "protocol version 1"]:
            if words not in logs:
                fail(f"the daemons' logs do not record '{words}'")

    def bad_controller_for_a_manager(self):
        import socket
        lst = socket.socket()
        lst.bind(("127.0.0.1", 0))
        lst.listen(4)
        lst.settimeout(30)
        port = lst.getsockname()[1]
        work = os.path.join(self.work, "lonely")
        m = subprocess.Popen([self.service.cairnd, "manager", "--controller", f"127.0.0.1:{port}", "--name", "lonely",
                              "--work-dir", work, "--log-level", "debug"])
        try:
            for garbage in [b"\x00" * 40, W.frame("manager_welcome", b"\x01"),
                            W.frame("start_agent", b"\x00" * 12, version=W.PROTOCOL)]:
                conn, _ = lst.accept()
                conn.settimeout(30)
                conn.recv(4096)  # its manager_hello
                conn.sendall(garbage if garbage[:4] != b"cnsv" or garbage[6] != 18
                             else W.frame("manager_welcome", b"\x01" + b"\0" * 7) + garbage)
                conn.settimeout(10)
                try:
                    while conn.recv(4096):
                        pass
                except OSError:
                    pass
                conn.close()
            conn, _ = lst.accept()  # it came back after every refusal
            conn.close()
            if m.poll() is not None:
                fail("the manager died of bad input from its controller")
            log = open(os.path.join(work, "manager.log")).read()
            if log.count("refused") < 3:
                fail(f"the manager did not log its refusals:\n{log}")
            say("the manager refused three bad messages from its controller and reconnected each time")
        finally:
            m.send_signal(signal.SIGTERM)
            if m.wait(timeout=30) != 0:
                fail("the manager did not stop cleanly")
            lst.close()

    def case_manager_names(self):
        import socket
        svc = self.service = Service(self.build, os.path.join(self.work, "svc"), managers=0, log=False)
        host = socket.gethostname()

        def manager(name):  # no --name: the host name, as on a checkpoint node
            return subprocess.Popen([svc.cairnd, "manager", "--controller", svc.address, "--agents", "2", "--work-dir",
                                     os.path.join(svc.work, name), "--log-level", "debug"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        svc.procs["first"] = manager("first")
        st = svc.wait_for(lambda st: len(st["managers"]) == 1, "the first manager to join")
        holder = st["managers"][0]
        if holder["name"] != host or holder["pid"] != svc.procs["first"].pid:
            fail(f"the first manager should be '{host}' (pid {svc.procs['first'].pid}): {holder}")
        second = manager("second")
        try:
            rc = second.wait(timeout=20)
        except subprocess.TimeoutExpired:
            second.kill()
            fail("a second manager under a taken name was not refused within 20 s")
        err = second.stderr.read()
        say(f"the second manager exited {rc}: {err.strip()}")
        if rc == 0:
            fail("the refused manager exited 0")
        for want in [f"'{host}' is taken", f"pid {holder['pid']}", "--name"]:
            if want not in err:
                fail(f"the refusal on the second manager's stderr does not say {want!r}: {err!r}")
        # The holder keeps its place: the same entry, no re-join, still running.
        time.sleep(1)
        st = svc.status()
        if [(m["id"], m["pid"]) for m in st["managers"]] != [(holder["id"], holder["pid"])]:
            fail(f"the holder was disturbed: {st['managers']}")
        if svc.procs["first"].poll() is not None:
            fail("the holder exited")
        log = open(os.path.join(svc.work, "controller.log")).read()
        if "joined again" in log or re.search(r"manager \d+ \(.*\) lost", log):
            fail(f"the controller let the second manager replace the first:\n{log}")
        if "is taken by manager" not in log:
            fail(f"the controller did not log the refusal:\n{log}")
        # The controller's default log is its stderr: nothing in the directory it was started from.
        left = os.listdir(os.path.join(svc.work, "cwd"))
        if left:
            fail(f"the controller without --log wrote into its working directory: {left}")
        if "controller listening on" not in log:
            fail(f"the controller's log lines did not go to its stderr:\n{log}")
        say("the second manager was refused; the holder stays; the controller logged to stderr only")

        # cairn status finds the controller from CAIRN_SERVICE, as the jobs do; without one it says what to give.
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
        p = subprocess.run([self.cairn, "status", "--json"], env=dict(env, CAIRN_SERVICE=svc.address),
                           capture_output=True, text=True, timeout=30)
        if p.returncode != 0 or json.loads(p.stdout)["controller"]["address"] != svc.address:
            fail(f"cairn status with CAIRN_SERVICE={svc.address}: exit {p.returncode}\n{p.stdout}{p.stderr}")
        p = subprocess.run([self.cairn, "status"], env=env, capture_output=True, text=True, timeout=30)
        if p.returncode != 2 or "CAIRN_SERVICE" not in p.stderr:
            fail(f"cairn status without a service: exit {p.returncode}, expected 2 and a hint:\n{p.stderr}")
        say("cairn status takes the controller from CAIRN_SERVICE, and says what to give without one")

        # The service is usable: an application's versions go through an agent on the holder.
        ref = reference(self, "heat2d")
        job = Job(self, "heat2d", self.heat2d, HEAT)
        self.current_job = job
        job.start()
        job.wait()
        check_job(self, job, ref, min_service=1)

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", required=True)
    p.add_argument("--case", required=True, choices=["two_apps", "push", "agent_killed", "agent_killed_push", "manager_killed",
                                                     "controller_killed", "bad_input", "chain", "three_apps",
                                                     "dynamic_agents", "freed_place", "gives_way", "restart_agents", "migrate",
                                                     "manager_names"])
    Test(p.parse_args()).run()


if __name__ == "__main__":
    main()
