"""The cluster around an API server: the real control plane, the sandbox kubelet and its seam to
the CNI, scheduler and StatefulSet stand-ins, the node side's Subnet watch, a fault proxy.

Works against the emulator (controller.sandbox.apiserver) or the real kube-apiserver; knows
nothing of OVN (the data plane plugs in through `wiring.PodWiring`).
"""
