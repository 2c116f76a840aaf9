"""The names of the OVN Northbound tables the controller reads and writes (ovn-nb(5)), one home
for the IDL client, its indexes and the security group rows (which import no python-ovs)."""

from __future__ import annotations

LS = "Logical_Switch"
LSP = "Logical_Switch_Port"
LR = "Logical_Router"
LRP = "Logical_Router_Port"
ROUTE = "Logical_Router_Static_Route"
POLICY = "Logical_Router_Policy"
NAT = "NAT"
PG = "Port_Group"
AS = "Address_Set"
ACL = "ACL"
