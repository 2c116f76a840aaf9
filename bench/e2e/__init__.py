"""End-to-end throughput of the controller: pods created in the emulator, a real ovsdb-server.

Usage, from the repo root: `python bench/e2e [--quick] [--pods 1000,5000] [--existing 20000]
[--worker-num 3] [--control-plane emulator|real|both] [--workdir DIR] [--py-spy DIR]`
(`--quick`: 200 pods, 2,000 existing, ~20 s; `--workdir` keeps the controller and emulator
logs; `--py-spy` samples the controller, see `children.start_py_spy`).

What runs where (each in its own process, so their CPU and memory are measured apart and no two
of them share a GIL):

* the OVN NB database: a throwaway `ovsdb-server` (`controller.sandbox.ovn.ovsdb.NbServer`);
* the API server emulator: a child process of this script (`python bench/e2e
  serve-emulator`), seeded in-process from a JSON file and counting the requests it serves by
  (method, resource, subresource) on demand (a line protocol on its stdin). NOT in the bench
  process: the bench's creating threads and its watch parser would otherwise take the GIL from
  the server and the figures would be the bench's, not the emulator's;
* the controller: `python -m cmd.controller` from the repo root (as tests/e2e runs it), leader
  election off, its log in the work directory; CPU from /proc/<pid>/stat, memory from
  /proc/<pid>/status (VmRSS, VmHWM);
* this process: a few threads POSTing pods (with spec.nodeName: no scheduler) and one pod watch
  that timestamps, on receipt, when each pod first shows `allocated` and `routed`.

For each N (default 1,000 and 5,000), three measurements in the same run:

1. the controller: pods/s to allocated and to routed (N / time from the first POST to the last
   pod allocated or routed), p50/p99 per-pod latency from its POST to the annotation on the watch,
   controller CPU seconds and memory, emulator CPU;
2. the emulator limit: a fresh emulator, the same pod POSTs, and the API calls the controller made
   per pod (counted in run 1 from the emulator's request log: IP GETs/POSTs, pod PATCHes, Events)
   replayed by worker threads of this process with the same worker count, with a pod watch and an
   IP watch open as the controller's informers have; no OVN;
3. the OVN limit: a fresh NB database and the controller's NB calls per pod (create_port, then
   the routing policies (free once they exist), the pod's address-set entry, the two
   update_nat_rule calls of a pod without EIP/SNAT and the src-ip route removal) through
   `OvsdbappNbClient` from two pools of worker threads (add, update), no API.

The table prints the figures, the limits and the ratios controller / limit, and what the
limits' own client threads spent per pod (the same calls at the same concurrency, nothing else).
Then the floor: the bare libraries doing a pod's writes from one thread in a process of their
own (`run_floor`, at most 1,000 pods): urllib3 (the kubernetes client's transport) POSTing the
IP CR and PATCHing the pod against a fresh emulator, and ovsdbapp's own NB API committing
lsp_add, its addresses and the address-set entry as one transaction; no controller on these
libraries can spend less CPU per pod than their sum.

Then start-up with E existing pods (default 20,000): the emulator seeded with E allocated and
routed pods and their IP CRs, the NB with the router, the switches and E ports (in batches);
the controller is started and timed until /readyz answers 200, with its RSS then and its peak,
(with `--existing-routes=v18` the NB also holds every pod's v1.8 src-ip route, and the time
from /readyz until the controller has replaced the last of them is printed too),
and the phases read from its log: process start to leading (imports, NB connection and initial
sync), informer sync and bootstrap, IPAM rebuild ("take X seconds to initialize IPAM"), start-up
gc, workers. An empty cluster's start-up (from run 1) is printed beside it as the baseline.

With `--control-plane real` the throughput runs (1 and 2) go to the real Kubernetes control plane
instead (bench/realplane.py: a fresh etcd, kube-apiserver, kube-controller-manager and
kube-scheduler per run, the chart's CRDs and RBAC, the controller as its ServiceAccount, the
nodes registered Ready by the sandbox kubelet), the per-pod requests read from kube-apiserver's
audit log and the API limit replayed against kube-apiserver; with `both` each N runs on both
planes and a table puts them side by side. The start-up with existing pods stays on the
emulator. The real plane needs its binaries (`bash .ci/build-control-plane`).

The machine may be shared: figures vary by run; compare ratios from the same run.
"""
