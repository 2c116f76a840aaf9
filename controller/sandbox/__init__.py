"""Stand-ins for the controller's external systems, for tests, benches and the demo (not shipped).

Subpackages, by what they stand in for, each importing only from the ones below it
(setup.cfg's `sandbox-layers` contract):

* `demo`: `python -m controller.sandbox.demo`, the controller at work on a local sandbox;
* `ovn`: throwaway OVN Northbound ovsdb-servers, the OVN data plane and the CNI stand-in that
  wires pods into it;
* `cluster`: the rest of a Kubernetes cluster around an API server: the real control plane
  launcher, the sandbox kubelet (and its `PodWiring` seam), a scheduler and StatefulSet stand-in,
  the Subnet watch of the node side, a fault-injecting proxy;
* `apiserver`: the Kubernetes API server emulator (`python -m controller.sandbox.apiserver`);
* `processes`: the child-process helpers every daemon launcher shares.

controller/sandbox/README.md lists every module's contract.
"""
