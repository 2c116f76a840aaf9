"""OVN stand-ins: throwaway Northbound ovsdb-servers (ovsdb.py), the OVN data plane (dataplane.py)
and the CNI stand-in that wires pods into it for the sandbox kubelet (cni.py).
"""
