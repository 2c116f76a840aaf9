#!/bin/sh
# The image's entry point, at the path kube-ovn's Deployment runs (/kube-ovn/start-controller.sh,
# kube-ovn v1.8.18 dist/images/start-controller.sh): starts the controller with the container's
# arguments. kube-ovn's Deployment passes the script's own path as its first argument (its image
# has no entry point); that argument is dropped, so either Deployment works unchanged.
# The northbound address comes from the same variables kube-ovn's script reads (OVN_DB_IPS,
# ENABLE_SSL, OVN_NB_SERVICE_HOST/PORT): the controller derives it itself when --ovn-nb-addr is
# not given. No ovn-nbctl daemon is needed: the controller speaks OVSDB directly.
set -eu
if [ "${1:-}" = "/kube-ovn/start-controller.sh" ]; then
  shift
fi
# `cmd` is not an installed package: python -m finds it in the source root.
cd "${KUBE_OVN_POD_CONTROLLER_ROOT:-/opt/kube-ovn-pod-controller}"
exec python -m cmd.controller "$@"
