# syntax=docker/dockerfile:1
# The kube-ovn pod controller image: the installed package run as `python -m cmd.controller`
# (through /kube-ovn/start-controller.sh, kube-ovn's entry point path), as the unprivileged
# uid/gid 65532 (the chart's podSecurityContext runs it with runAsNonRoot). The wheel
# leaves out the sandbox and the test doubles; the source tree is removed once installed.
#   docker build -t kube-ovn-pod-controller:0.1.0 .
# The base is pinned by digest (a tag moves; a digest is the image that was tested). Bookworm, not
# the newer default of the 3.11-slim tag: Debian's python3-openvswitch below is built for
# bookworm's Python 3.11, the ABI of this interpreter. To move the pin:
#   docker buildx imagetools inspect python:3.11-slim-bookworm   (the index "Digest:")
FROM python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# NOTE: `cmd` is deliberately not an installed package (in site-packages it would shadow the
# standard library's `cmd` for every program); it stays in the working directory so that
# `python -m cmd.controller` finds it (the working directory is first on sys.path).
WORKDIR /opt/kube-ovn-pod-controller

# Dependencies first, from the metadata alone (an empty package stands in for the sources), so
# this layer is rebuilt only when setup.cfg changes, not on every source edit.
COPY setup.cfg pyproject.toml README.md ./
RUN mkdir controller && touch controller/__init__.py \
    && pip install . \
    && rm -rf controller build ./*.egg-info

# python-ovs from PyPI builds without its C JSON parser; Debian's python3-openvswitch has it
# (controller.ovn.connection loads it from there), about twice as fast at the NB sync.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3-openvswitch \
    && rm -rf /var/lib/apt/lists/*

COPY controller ./controller
COPY cmd ./cmd
# kube-ovn's entry point path: its Deployment args (`/kube-ovn/start-controller.sh --flags...`)
# and the chart's (flags only) both start the controller.
COPY image/start-controller.sh /kube-ovn/start-controller.sh
RUN chmod 0755 /kube-ovn/start-controller.sh \
    && pip install --no-deps . \
    && rm -rf controller build ./*.egg-info \
    && python -c "from controller.ovn.connection import enable_c_json_parser as c; \
raise SystemExit(0 if c() else 'python-ovs C JSON parser not loadable')" \
    && groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin nonroot

# Numeric, so the kubelet can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532

# /metrics, /healthz and /readyz (--metrics-port)
EXPOSE 10660

ENTRYPOINT ["/kube-ovn/start-controller.sh"]
